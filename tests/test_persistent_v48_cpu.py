"""`persistent` v48 on the CPU: the fp16 split by warps (gpu_blas.SPLIT_BY_WARPS, splits_by_warps) and where it
applies, the flag in the replayed graphs' key and the benches' flags, the NumPy split it must equal; the v48
diagnostics' pure parts (the buffer-address table's consistency line, the clock samples' parse and pairing).
Part 2: batch padding by one launch (batch_pad.pad_inputs: what it takes, its fallback and errors), which replays
pad x where the caller has it (pad_reads_x), a padded forward's outputs left padded for the graph (cut=False) and
cut as they are copied out (persistent_graph.CutOutputs), through the fragment emulation."""
import sys
from pathlib import Path

import numpy as np
import pytest

from ecornn import LayerWeights, LSTMConfig, gpu_blas
from ecornn.engines import batch_pad, persistent, persistent_graph
from ecornn.layouts import first_columns, pad_columns
from tests.helpers import random_problem
from tests.test_persistent_mma_emulated import _dtype, cpu_engine  # noqa: F401 (fixture)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import ab_modes  # noqa: E402
import diag_buffer_address_v48 as diag_address  # noqa: E402
import diag_clocks_v48 as diag_clocks  # noqa: E402


@pytest.mark.parametrize("k, chunk, warps", [(1024, 1024, True), (1000, 300, True), (4, 4, True), (1001, 1001, False),
                                             (1024, 254, False), (1024, 256, True), (36, 36, True), (6, 6, False)])
def test_where_the_warp_split_applies(k, chunk, warps):
    assert gpu_blas.splits_by_warps(k, chunk) is warps


def test_the_flag_off_keeps_the_block_split(monkeypatch):
    monkeypatch.setattr(gpu_blas, "SPLIT_BY_WARPS", False)
    assert not gpu_blas.splits_by_warps(1024, 1024)


def test_the_flag_is_in_the_graph_key_and_the_benches_flags(monkeypatch):
    mode = persistent._graph_mode("auto")
    monkeypatch.setattr(gpu_blas, "SPLIT_BY_WARPS", False)
    assert persistent._graph_mode("auto") != mode   # a graph captured with one split is not replayed with the other
    assert "SPLIT_BY_WARPS" in ab_modes.BLAS_FLAGS and ab_modes.ENGINE_FLAG_DEFAULTS["SPLIT_BY_WARPS"] is True


def test_the_numpy_split_is_what_both_kernels_must_give(rng):
    """The GPU tests compare both kernels with this: hi + lo is the scaled row to ~22 bits, parts in order."""
    a = (rng.standard_normal((6, 40)) * np.exp2(rng.integers(-20, 20, (6, 1)))).astype(np.float32)
    out, row_exp = gpu_blas.fp16_split3(a, False, chunk=12)
    parts = gpu_blas.fp16_split3(a, False)[0].astype(np.float32)
    hi, lo = parts[:, :40], parts[:, 40:80]
    assert np.array_equal(parts[:, 80:], hi)
    back = np.ldexp(hi.astype(np.float64) + lo, row_exp[:, None])
    assert np.max(np.abs(back - a) / np.abs(a).max(axis=1, keepdims=True)) < 2.0 ** -21
    assert np.array_equal(out[:, :12].astype(np.float32), hi[:, :12])   # chunk 0: hi, lo, hi of columns 0-11
    assert np.array_equal(out[:, 12:24].astype(np.float32), lo[:, :12])


def test_the_address_table_tells_a_place_that_repeats():
    fast, slow = [1.80, 1.81, 1.80], [1.95, 1.96, 1.94]
    line = diag_address._consistency({"0": fast, "1": slow, "2": fast, "3": slow})
    assert "1.80–1.95" in line and "+1.00" in line
    assert "+0.00" in diag_address._consistency({"0": [2.0, 2.0], "1": [2.0, 2.0]})   # no spread, no correlation


def test_the_clock_samples_parse_and_pair(tmp_path):
    log = tmp_path / "samples.csv"
    log.write_text("2026/11/29 07:52:26.100, 1980, 3201, 345.5, 44, 0x0000000000000000\n"
                   "garbage line\n"
                   "2026/11/29 07:52:26.150, 1755, 3201, 700.0, 46, 0x0000000000000004\n")
    samples = diag_clocks._samples(log)
    assert [s[1] for s in samples] == [1980.0, 1755.0] and samples[1][5] == "0x0000000000000004"
    t0 = samples[0][0]
    rows = diag_clocks._paired([("c", "kernel", t0 + 0.02, t0 + 0.04, 2.7), ("c", "kernel", t0 + 5, t0 + 6, 2.4)],
                               samples)
    assert rows[0]["sm_mhz"] == pytest.approx((1980 + 1755) / 2) and len(rows[0]["reasons"]) == 2
    assert rows[1]["sm_mhz"] is None   # no sample during it


# ---- part 2: batch padding by one launch; the cut at copy-out ---------------------------------------------
def test_numpy_outputs_cut_by_first_columns(rng):
    arrays = [rng.standard_normal((4, 6, 5)).astype(np.float32), rng.standard_normal((1, 6, 5)).astype(np.float16)]
    for got, a in zip(batch_pad.first_columns_of(arrays, 4), arrays):
        assert np.array_equal(got, first_columns(a, 4)) and got.dtype == a.dtype and got.flags.c_contiguous
    outs = [np.empty((4, 2, 5), np.float32)]
    assert batch_pad.first_columns_of(arrays[:1], 2, outs=outs)[0] is outs[0]
    assert np.array_equal(outs[0], arrays[0][:, :2])
    with pytest.raises(ValueError, match="narrower batch"):
        batch_pad.first_columns_into(outs, arrays[:1])   # NumPy: not the kernel's


def test_numpy_inputs_pad_by_pad_columns(rng):
    arrays = [rng.standard_normal((4, 3, 5)).astype(np.float32), rng.standard_normal((1, 3, 5)).astype(np.float16)]
    for got, a in zip(batch_pad.pad_inputs(arrays, 5), arrays):
        assert np.array_equal(got, pad_columns(a, 5)) and got.dtype == a.dtype
    assert not batch_pad.kernel_pads(arrays[0])   # the kernel takes CuPy arrays only


@pytest.mark.parametrize("arrays, batch, x_at, match", [
    ([np.zeros((2, 3, 4))], 2, None, "at least 3 columns"),
    ([np.zeros((2, 3, 4))] * 4, 5, None, "1 to 3 arrays"),
    ([np.zeros((2, 3, 4), np.float32)], 5, np.zeros(4, np.int64), "fetched address"),
])
def test_pad_inputs_errors(arrays, batch, x_at, match):
    with pytest.raises(ValueError, match=match):
        batch_pad.pad_inputs(arrays, batch, x_at=x_at)


def test_which_replays_pad_x_where_it_lies(monkeypatch):
    from ecornn.devices import KNOWN
    monkeypatch.setattr(persistent, "_props", KNOWN["h200"].as_dict)
    monkeypatch.setattr(batch_pad, "kernel_pads", lambda a: True)   # a C-ordered CuPy x
    x = np.zeros((4, 13, 1024), np.float16)
    padded, even = LSTMConfig(1024, 1024, 1, False, "float16", 13, 4), LSTMConfig(1024, 1024, 1, False, "float16", 14, 4)
    assert persistent.pad_reads_x(padded, x) and not persistent.pad_reads_x(even, x)
    monkeypatch.setattr(persistent, "PAD_READS_X", False)
    assert not persistent.pad_reads_x(padded, x)


def test_the_new_flags_are_in_the_graph_key(monkeypatch):
    mode = persistent._graph_mode("auto")
    monkeypatch.setattr(persistent, "PAD_READS_X", False)
    assert persistent._graph_mode("auto") != mode
    monkeypatch.setattr(persistent, "PAD_READS_X", True)
    monkeypatch.setattr(batch_pad, "PAD_BY_KERNEL", False)
    assert persistent._graph_mode("auto") != mode
    monkeypatch.setattr(batch_pad, "PAD_BY_KERNEL", True)
    monkeypatch.setattr(persistent, "CUT_AT_COPY_OUT", False)
    assert persistent._graph_mode("auto") != mode
    assert {"PAD_READS_X", "CUT_AT_COPY_OUT"} <= set(ab_modes.ENGINE_FLAGS) and ab_modes.PAD_FLAGS == ("PAD_BY_KERNEL",)
    ab_modes.set_engine_flags({"PAD_BY_KERNEL": False})
    try:
        assert batch_pad.PAD_BY_KERNEL is False
    finally:
        ab_modes.set_engine_flags({})
    assert batch_pad.PAD_BY_KERNEL is True


def _fake_cp():
    return type("cp", (), {"empty": staticmethod(np.empty)})


@pytest.mark.parametrize("dtype", [None, np.float16])
def test_cut_outputs_copy_out_the_callers_columns_packed(monkeypatch, rng, dtype):
    monkeypatch.setattr(persistent_graph, "_cp", _fake_cp)
    layout, offset = [], 0
    for shape in ((6, 8, 10), (2, 8, 5), (2, 8, 5)):   # y [T, B', D H], hT and cT [L D, B', H]
        layout.append((offset, shape))
        offset += -(-int(np.prod(shape)) // 64) * 64
    buffer = rng.standard_normal(offset).astype(np.float32)
    packed = persistent_graph.PackedOutputs(buffer, tuple(layout))
    assert persistent_graph._cut_where_padded(packed, 8) is packed
    cut = persistent_graph._cut_where_padded(packed, 7)
    got = persistent_graph._copies_out(cut, dtype, stream=None)
    for g, w in zip(got, packed):
        assert g.shape == (w.shape[0], 7) + w.shape[2:] and g.dtype == (dtype or np.float32)
        assert np.array_equal(g, first_columns(w, 7).astype(g.dtype)) and not np.shares_memory(g, buffer)
    base = got[0].base
    assert all(g.base is base for g in got)   # one buffer, each output starting 64 elements aligned in it
    assert all((g.__array_interface__["data"][0] - base.__array_interface__["data"][0]) % (64 * g.itemsize) == 0
               for g in got)


def test_a_padded_forward_left_padded_for_the_graph(cpu_engine, rng):  # noqa: F811
    """cut=False (the capture) returns the padded outputs: their first columns are the cut call's, bitwise; the
    added column is the layer run on zeros."""
    config = LSTMConfig(64, 96, 1, False, "float16", 11, 6)
    assert persistent.run_config(config, False).batch == 12
    weights, x, h0, c0 = random_problem(rng, config)
    cast = lambda a: np.asarray(a, np.float32).astype(_dtype(config.dtype))  # noqa: E731
    weights = [LayerWeights(*(cast(a) for a in w)) for w in weights]
    x, h0, c0 = (cast(a) for a in (x, h0, c0))
    cut = persistent._forward_eager(config, x, weights, h0, c0)
    wide = persistent._forward_eager(config, x, weights, h0, c0, cut=False)
    for c, w in zip(cut[:3], wide[:3]):
        assert w.shape[1] == 12 and np.array_equal(first_columns(w, 11), c)
    zeros = tuple(np.zeros((a.shape[0], 1) + a.shape[2:], a.dtype) for a in (x, h0, c0))
    alone = persistent._forward_eager(config.replace(batch=1), *zeros[:1], weights, *zeros[1:])
    assert np.allclose(np.asarray(wide[0][:, 11:], np.float32), np.asarray(alone[0], np.float32), atol=1e-3)


# ---- part 3: the planner's 16-bit forward and backward constants refitted (benchmarks/refit_mma_forward_v48.py) ---
def test_the_weights_term_counts_groups_and_the_in_kernel_product():
    from ecornn import costmodel
    config = LSTMConfig(1024, 1024, 1, False, "float16", 16, 256)
    hb, hh = costmodel.mma_step_terms(config, 2)
    assert costmodel.mma_forward_terms(config, 2, 2) == (hb, 4 * hh) and costmodel.mma_forward_terms(config) == \
        costmodel.mma_step_terms(config)
    assert costmodel.mma_products({"in_kernel_projection": True}) == 2 and costmodel.mma_products({}) == 1


@pytest.mark.parametrize("training, low, high", [(False, 0.84, 1.11), (True, 0.80, 1.15)])
def test_the_defaults_predict_the_measured_16bit_cells(training, low, high):
    """Every 16-bit cell of v45-v48's H200 benches (whole forward, fwd+bwd per step) within the fit's range; v47's
    constants read the whole forwards 1.22-2.23x."""
    import refit_mma_forward_v48 as refit
    from ecornn import costmodel
    from ecornn.devices import KNOWN
    cells = refit.points_from([refit.RESULTS / s for s in refit.DEFAULT_SOURCES], training)
    assert len(cells) == 22
    predicted = refit.predictions(cells, costmodel.DEFAULTS, KNOWN["h200"], training)
    ratios = [predicted[c] / us for c, us in cells.items()]
    assert low <= min(ratios) and max(ratios) <= high, sorted(ratios)


def test_the_defaults_are_the_documented_fit():
    import dataclasses
    import refit_mma_forward_v48 as refit
    from ecornn import costmodel
    from ecornn.devices import KNOWN
    sources = [refit.RESULTS / s for s in refit.DEFAULT_SOURCES]
    start = dataclasses.replace(costmodel.DEFAULTS, **refit.BEFORE)
    fitted = refit.refit(refit.points_from(sources), KNOWN["h200"], start)
    fitted = refit.refit_backward(refit.points_from(sources, True), KNOWN["h200"], fitted)
    for name in refit.FITTED:
        assert getattr(fitted, name) == pytest.approx(getattr(costmodel.DEFAULTS, name), abs=1e-3), name
