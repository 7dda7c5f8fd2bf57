"""The standalone runner on the CPU: output, JSON record, argument errors."""
import json
import subprocess
import sys

import pytest

from ecornn.run import main


def test_runner_prints_and_writes_json(tmp_path, capsys):
    path = tmp_path / "r.json"
    assert main(["--hidden", "16", "--batch", "2", "--seq-len", "5", "--iterations", "2",
                 "--strategy", "reference", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "us/step" in out and "strategy: reference" in out
    record = json.loads(path.read_text())
    assert record["strategy"] == "reference" and record["config"]["hidden_size"] == 16
    assert record["us_per_step"] > 0 and record["tflops"] > 0 and record["config"]["seq_len"] == 5


def test_runner_training_mode(capsys):
    assert main(["--hidden", "8", "--layers", "2", "--bidirectional", "--seq-len", "3",
                 "--iterations", "1", "--training", "--strategy", "reference"]) == 0
    assert "forward+backward" in capsys.readouterr().out


def test_runner_rejects_bad_arguments(capsys):
    assert main(["--hidden", "0", "--strategy", "reference"]) == 2
    assert "expected a positive int, got 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--dtype", "int8"])


def test_module_entry_point_runs_default():
    done = subprocess.run([sys.executable, "-m", "ecornn.run", "--iterations", "1"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "us/step" in done.stdout
