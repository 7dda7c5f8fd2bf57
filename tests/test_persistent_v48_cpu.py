"""`persistent` v48 on the CPU: the fp16 split by warps (gpu_blas.SPLIT_BY_WARPS, splits_by_warps) and where it
applies, the flag in the replayed graphs' key and the benches' flags, the NumPy split it must equal; the v48
diagnostics' pure parts (the buffer-address table's consistency line, the clock samples' parse and pairing)."""
import sys
from pathlib import Path

import numpy as np
import pytest

from ecornn import gpu_blas
from ecornn.engines import persistent

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
