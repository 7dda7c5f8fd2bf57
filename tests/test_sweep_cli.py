"""Sweep and calibration on the CPU: argument errors, JSON/CSV shapes, the plot, model fitting."""
import csv
import dataclasses
import json

import numpy as np
import pytest

from ecornn import LSTMConfig, costmodel
from ecornn.calibrate import fit_constants
from ecornn.devices import H100
from ecornn.planner import persistent_fit
from ecornn.run import main


@pytest.mark.parametrize("args, message", [
    (["--hidden", "0"], "expected comma-separated positive ints"),
    (["--batch", "a,b"], "expected comma-separated positive ints"),
    (["--dtype", "int8"], "expected a comma-separated subset"),
    (["--mode", "train"], "expected a comma-separated subset"),
])
def test_sweep_argument_errors(args, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["sweep", *args])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_sweep_writes_json_and_csv(tmp_path, capsys):
    j, c = tmp_path / "s.json", tmp_path / "s.csv"
    assert main(["sweep", "--hidden", "8,16", "--batch", "1,2", "--seq-len", "3", "--iterations", "1",
                 "--mode", "inference,training", "--strategies", "reference", "--no-torch",
                 "--json", str(j), "--csv", str(c)]) == 0
    out = capsys.readouterr().out
    assert "reference us" in out and "pick" in out
    data = json.loads(j.read_text())
    assert len(data["cells"]) == 8 and data["quality"]["cells"] == 8
    assert {"hidden", "batch", "dtype", "mode", "reference_us", "pick", "pick_over_best"} <= set(data["cells"][0])
    assert all(cell["reference_us"] > 0 for cell in data["cells"])
    rows = list(csv.DictReader(c.open()))
    assert len(rows) == 8 and rows[0]["pick"] == "reference"
    assert sorted({(r["hidden"], r["batch"], r["mode"]) for r in rows}) == sorted(
        {(h, b, m) for h in ("8", "16") for b in ("1", "2") for m in ("inference", "training")})


def test_sweep_plot_is_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "p.png"
    assert main(["sweep", "--hidden", "8", "--batch", "1,2", "--seq-len", "2", "--iterations", "1",
                 "--strategies", "reference", "--no-torch", "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_calibration_recovers_constants_from_synthetic_measurements():
    truth = costmodel.CostConstants(persistent_exchange_us=0.9, persistent_efficiency=0.2, launch_us=3.0,
                                    gemm_efficiency=0.4, gemm_efficiency_16bit=0.15, persistent_vector_us=0.3,
                                    persistent_batch2_us=0.5, fused_fp32_batch_us=0.0)
    from ecornn.calibrate import FUSED_GRID, PERSISTENT_GRID, _predict
    measurements = []
    for strategy, grid in (("persistent", PERSISTENT_GRID), ("fused", FUSED_GRID)):
        for hidden, batch, dtype, training in grid:
            config = LSTMConfig(hidden, hidden, batch=batch, seq_len=256, dtype=dtype)
            measurements.append({"strategy": strategy, "hidden": hidden, "batch": batch, "dtype": dtype,
                                 "seq_len": 256, "training": training,
                                 "us_per_step": _predict(strategy, config, H100, truth, training)})
    fitted = fit_constants(measurements, H100)
    for m in measurements:
        config = LSTMConfig(m["hidden"], m["hidden"], batch=m["batch"], seq_len=256, dtype=m["dtype"])
        got = _predict(m["strategy"], config, H100, fitted, m["training"])
        assert np.isclose(got, m["us_per_step"], rtol=0.05), (m, got)


def test_calibrate_from_sweep_json(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ECORNN_CACHE", str(tmp_path))
    sweep = tmp_path / "s.json"
    cells = [{"hidden": h, "batch": b, "dtype": "float32", "mode": "inference",
              "persistent_us": 2.0 + 0.01 * h * b / 64, "fused_us": 6.0 + 0.02 * b}
             for h in (256, 512) for b in (1, 16)]
    sweep.write_text(json.dumps({"meta": {"seq_len": 256}, "cells": cells}))
    assert main(["calibrate", "--from-sweep", str(sweep), "--device", "h100"]) == 0
    out = capsys.readouterr().out
    assert out.count("measured") == 8 and "wrote" in out
    assert list(tmp_path.glob("calibration_*.json"))


def test_constants_cache_round_trip(tmp_path, monkeypatch):
    monkeypatch.setenv("ECORNN_CACHE", str(tmp_path))
    versions = {"ecornn": "0.1.0", "cupy": "14.2.0"}
    assert costmodel.load_constants("GPU X", versions)[0] == costmodel.DEFAULTS
    consts = costmodel.CostConstants(launch_us=1.5)
    path = costmodel.save_constants("GPU X", versions, consts, [])
    assert path.exists()
    loaded, source = costmodel.load_constants("GPU X", versions)
    assert loaded == consts and source == str(path)
    assert costmodel.load_constants("GPU X", {"ecornn": "0.2.0"})[0] == costmodel.DEFAULTS


def test_calibration_fits_the_clustered_split_on_its_own():
    """v43: the fp32 split on thread-block clusters has its own constants, fitted from its own cells only (and left as
    they are from fewer cells than unknowns)."""
    from ecornn import calibrate
    truth = dataclasses.replace(costmodel.DEFAULTS, split_cluster_step_us=2.0, split_cluster_vector_us=0.05,
                                split_cluster_mma_us=0.1)
    configs = [LSTMConfig(h, h, batch=b, seq_len=256) for h, b in ((1024, 5), (1024, 8), (1024, 12), (768, 6),
                                                                  (1280, 6), (1280, 12))]
    kernels = [persistent_fit(c, H100) for c in configs]
    assert all(k["split_clusters"] == 2 for k in kernels)
    points = [(c, costmodel.predict_persistent_us(c, H100, k, False, truth)) for c, k in zip(configs, kernels)]
    fitted = calibrate._fit_split_cluster_inference(costmodel.DEFAULTS, points, H100)
    for name in ("split_cluster_step_us", "split_cluster_vector_us", "split_cluster_mma_us"):
        assert getattr(fitted, name) == pytest.approx(getattr(truth, name), rel=1e-6)
    assert (fitted.split_step_us, fitted.split_mma_us) == (costmodel.DEFAULTS.split_step_us,
                                                            costmodel.DEFAULTS.split_mma_us)
    assert calibrate._fit_split_cluster_inference(costmodel.DEFAULTS, points[:2], H100) == costmodel.DEFAULTS
