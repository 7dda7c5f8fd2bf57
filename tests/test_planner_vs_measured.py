"""benchmarks/planner_vs_measured.py on a made-up bench file: the ratios are predicted / measured of
the cost model's own numbers, and "pick right" says whether the planner chose the measured faster."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import planner_vs_measured as pvm  # noqa: E402

from ecornn import LSTMConfig  # noqa: E402
from ecornn.devices import H100  # noqa: E402
from ecornn.run_plan import describe_plan  # noqa: E402


def _predictions(dtype, hidden, batch, training=False):
    return describe_plan(LSTMConfig(hidden, hidden, 1, False, dtype, batch, 256), H100, training=training)["predictions"]


def test_ratios_and_the_pick_against_made_up_measurements(tmp_path, capsys):
    fast = _predictions("float16", 1024, 8)          # the planner picks persistent here
    assert min(fast, key=fast.get) == "persistent"
    train = _predictions("float16", 1024, 8, training=True)["persistent"]
    rows = [
        # measured as predicted, halved: ratios 2.00; persistent measured faster: the pick is right
        {"dtype": "float16", "hidden": 1024, "batch": 8, "steps": 256, "persistent_us": fast["persistent"] / 2,
         "fused_us": fast["fused"] / 2, "persistent_train_ms": train * 256 / 1e3 / 2},
        # fused measured faster than persistent: the same pick is wrong
        {"dtype": "float16", "hidden": 1024, "batch": 8, "steps": 256, "persistent_us": 9.0, "fused_us": 3.0},
        # no fused timing: no verdict
        {"dtype": "float16", "hidden": 1024, "batch": 8, "steps": 256, "persistent_us": 2.0, "fused_us": None},
        {"dtype": "float32", "hidden": 512, "batch": 4, "steps": 256, "persistent_us": None},   # skipped
    ]
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps({"meta": {"device": {"name": "made up"}}, "rows": rows}))
    assert pvm.main([str(bench), "--device", "h100", "--out", str(tmp_path / "out")]) == 0
    saved = json.loads((tmp_path / "out" / "planner_vs_measured.json").read_text())["rows"]
    assert [r["pick_is_fastest"] for r in saved] == [True, False, None]
    assert abs(saved[0]["train_predicted_us"] / saved[0]["train_measured_us"] - 2.0) < 1e-9
    table = capsys.readouterr().out.splitlines()
    assert len(table) == 2 + 3
    assert table[2].count("(2.00)") == 3 and "| yes |" in table[2]
    assert "| **no** |" in table[3] and f"{fast['persistent']:.2f} / 9.00" in table[3]
    assert "| – |" in table[4]
