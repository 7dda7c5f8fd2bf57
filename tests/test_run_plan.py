"""``python -m ecornn.run plan``: the planner's choice for a named GPU without running anything (no GPU
needed): the strategy is the cheapest prediction, the persistent kernels are the capacity model's
plans, impossible requests exit 2 with the limit named."""
import json

import pytest

from ecornn import LSTMConfig, run_plan
from ecornn.devices import H100
from ecornn.engines import persistent_capacity as cap
from ecornn.run import main


def _run(capsys, *args):
    code = main(["plan", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_small_batch_runs_persistent_and_names_its_kernels(capsys):
    code, out, _ = _run(capsys, "--device", "h100", "--dtype", "float16", "--hidden", "1024", "--batch", "8")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("float16 H=1024 I=1024 B=8 T=256") and "NVIDIA H100" in lines[0]
    assert lines[1].startswith("strategy: persistent (cost model: ")
    forward = cap.plan_config(cap.h100_properties(), LSTMConfig(1024, 1024, 1, False, "float16", 8, 256), False)
    assert f"persistent forward: {forward['forward'].describe()}" in lines
    assert "tagged exchange" in out and "input projection in the kernel" in out


def test_the_choice_is_the_cheapest_prediction_and_training_adds_the_backward():
    for dtype, batch in (("float32", 1), ("float32", 4), ("bfloat16", 16), ("float16", 32)):
        record = run_plan.describe_plan(LSTMConfig(512, 512, 1, False, dtype, batch, 64), H100, training=True)
        predictions = record["predictions"]
        assert set(predictions) == {"persistent", "fused"} and min(predictions.values()) > 0
        assert record["strategy"] == min(predictions, key=predictions.get)
        assert record["predicted_us_per_step"] == predictions[record["strategy"]]
        assert set(record["persistent_passes"]) == {"forward", "backward"}


def test_what_persistent_cannot_fit_is_planned_fused_with_the_limit_named(capsys):
    code, out, _ = _run(capsys, "--device", "h100", "--dtype", "bfloat16", "--batch", "256")
    assert code == 0
    assert "strategy: fused" in out and "persistent excluded" in out and "batch=256" in out
    assert "persistent forward:" not in out
    assert out.count("do not fit one block per SM") == 2   # the tensor-core limit and the fp32 fallback's, once


def test_an_impossible_explicit_strategy_exits_2_naming_the_limit(capsys):
    code, out, err = _run(capsys, "--device", "h100", "--strategy", "persistent", "--hidden", "4096")
    assert code == 2 and out == ""
    assert err.startswith("error: strategy 'persistent' does not support") and "hidden_size=4096" in err


def test_without_a_gpu_the_device_must_be_named(capsys, monkeypatch):
    monkeypatch.setattr(run_plan, "current", lambda: None)
    code, out, err = _run(capsys, "--dtype", "float16")
    assert code == 2 and out == ""
    assert "no CUDA GPU here" in err and "--device a100, h100, h200, small" in err


@pytest.mark.parametrize("args, message", [
    (["--device", "h100", "--batch", "0"], "batch: expected a positive int, got 0"),
    (["--device", "h100", "--hidden", "256", "--input", "-5"], "input_size: expected a positive int, got -5"),
])
def test_bad_sizes_exit_2_with_the_config_error(capsys, args, message):
    code, out, err = _run(capsys, *args)
    assert code == 2 and out == "" and message in err


def test_an_unknown_device_is_an_argument_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["plan", "--device", "v100"])
    assert exc.value.code == 2 and "invalid choice: 'v100'" in capsys.readouterr().err


def test_json_holds_the_printed_record(capsys, tmp_path):
    path = tmp_path / "plan.json"
    code, out, _ = _run(capsys, "--device", "h200", "--dtype", "bfloat16", "--hidden", "2048", "--batch", "4",
                        "--layers", "2", "--bidirectional", "--json", str(path))
    assert code == 0 and out.endswith(f"wrote {path}\n")
    record = json.loads(path.read_text())
    expected = run_plan.describe_plan(LSTMConfig(2048, 2048, 2, True, "bfloat16", 4, 256), run_plan.KNOWN["h200"])
    assert record == json.loads(json.dumps(expected))
    assert record["device"] == "NVIDIA H200" and record["config"]["num_layers"] == 2
