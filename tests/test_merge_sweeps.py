"""benchmarks/merge_sweeps.py: saved sweeps merge cell by cell (later files win), crossovers."""
import importlib.util
import json
from pathlib import Path

import pytest

from ecornn.sweep import Cell

ROOT = Path(__file__).resolve().parent.parent


def _module():
    spec = importlib.util.spec_from_file_location("merge_sweeps", ROOT / "benchmarks" / "merge_sweeps.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _cell(batch, persistent, fused, pick, mode="inference"):
    return Cell(256, batch, "float32", mode, {"persistent": persistent, "fused": fused}, {}, None, pick, "r")


def _save(path, cells):
    path.write_text(json.dumps({"meta": {"device": "X"}, "cells": [c.as_row() for c in cells]}))


def test_cell_row_round_trip():
    cell = Cell(512, 4, "bfloat16", "training", {"persistent": 3.5, "fused": None}, {"fused": "why"},
                9.0, "persistent", "because")
    back = Cell.from_row(cell.as_row())
    assert back == cell and back.pick_over_best == pytest.approx(1.0)


def test_later_file_overrides_and_crossovers(tmp_path):
    mod = _module()
    first = [_cell(1, 2.0, 5.0, "persistent"), _cell(8, 9.0, 6.0, "persistent"), _cell(64, 30.0, 9.0, "fused")]
    second = [_cell(8, 4.0, 6.0, "persistent")]          # re-measured: persistent now wins at B=8
    _save(tmp_path / "a.json", first)
    _save(tmp_path / "b.json", second)
    cells, metas = mod.merged_cells([str(tmp_path / "a.json"), str(tmp_path / "b.json")])
    assert [c.batch for c in cells] == [1, 8, 64] and len(metas) == 2
    assert cells[1].us["persistent"] == 4.0 and cells[1].pick_over_best == pytest.approx(1.0)
    table = mod.crossovers(cells).splitlines()
    assert table[2] == "float32 | inference | 256 | 64 | 64"
    mod.main.__globals__["plot"] = lambda *a, **k: None     # no matplotlib needed for the text outputs
    import sys
    argv, sys.argv = sys.argv, ["merge", str(tmp_path / "a.json"), "--out", str(tmp_path / "m")]
    try:
        mod.main()
    finally:
        sys.argv = argv
    text = (tmp_path / "m.md").read_text()
    assert "within 10% of the fastest in 66.7% of 3 cells" in text and "worst pick/best 1.50" in text
    assert json.loads((tmp_path / "m.json").read_text())["quality"]["cells"] == 3


def test_persistent_plots_from_a_sweep(tmp_path):
    pytest.importorskip("matplotlib")
    spec = importlib.util.spec_from_file_location("plot_ps", ROOT / "benchmarks" / "plot_persistent_sweep.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    cells = [Cell(h, b, "float32", "inference", {"persistent": 1.0 + h / 1000 + b, "fused": 5.0 + b}, {},
                  10.0, "persistent", "").as_row() for h in (256, 1024) for b in (1, 4, 16)]
    sweep = tmp_path / "s.json"
    sweep.write_text(json.dumps({"meta": {"device": "X"}, "cells": cells}))
    assert mod.main([str(sweep), "--out-prefix", str(tmp_path / "p")]) == 0
    for name in ("p_vs_batch_float32.png", "p_vs_hidden_float32.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
