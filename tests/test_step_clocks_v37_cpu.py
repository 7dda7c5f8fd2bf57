"""v37's step-clock diagnostic on the CPU: the engine flag reaches the kernel's defines, the build cache and the graph
key; the marked kernel compiles (sm_90) and the unmarked one is the same code as before; the record's analysis
(benchmarks/diag_step_clocks_v37.phases) recovers known phase lengths from a synthetic record, 32-bit wraps
included. tests/test_step_clocks_v37_gpu.py reads a real record."""
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ecornn.engines import persistent

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import diag_step_clocks_v37 as diag  # noqa: E402

KERNELS = Path(__file__).resolve().parents[1] / "kernels"
WARPS = 3
# cycles after the step's top: warp w staged at 100 + 10 w, its product done 200 later; the partials' barrier
# 50 after the last product, the pointwise 150, the barrier 190, the next top at 1000
STAGED, PRODUCT, PARTIALS_AFTER, POINTWISE, BARRIER, STEP = 100, 200, 50, 150, 190, 1000


def _synthetic(blocks=4, steps=12, ghz=2.0, wrap_block=1):
    """A record as the kernel writes it (uint32 readings), with block ``wrap_block``'s clocks wrapping past 2^32."""
    rec = np.zeros((blocks, steps, diag.clock_slots(WARPS)), np.int64)
    t = len(diag.THREAD_MARKS)
    step_ns = STEP / ghz
    for b in range(blocks):
        base = 2 ** 32 - 3 * STEP if b == wrap_block else 1000 * b
        base_ns = 2 ** 32 - 2000 if b == wrap_block else 7
        for s in range(steps):
            top = base + s * STEP
            staged = [top + STAGED + 10 * w for w in range(WARPS)]
            product = [x + PRODUCT for x in staged]
            partials = max(product) + PARTIALS_AFTER
            pointwise = partials + POINTWISE
            top_ns = 5_000 + s * step_ns   # one global timer for all blocks
            rec[b, s, :4] = [top, partials, pointwise, pointwise + BARRIER]
            rec[b, s, 4:6] = [top_ns + (base_ns if b == wrap_block else 0), top_ns + 255 + 10 * b]
            rec[b, s, t:t + WARPS] = staged
            rec[b, s, t + WARPS:t + 2 * WARPS] = product
            rec[b, s, t + 2 * WARPS:] = [top_ns + 50 + 5 * w for w in range(WARPS)]
    return (rec & 0xFFFFFFFF).astype(np.uint32)


def test_phases_recover_a_synthetic_records_lengths():
    got = diag.phases(_synthetic(), WARPS)
    c = got["cycles"]
    assert c["stage_median_warp"] == STAGED + 10 and c["stage_last_warp"] == STAGED + 10 * (WARPS - 1)
    assert c["product_median_warp"] == PRODUCT
    assert c["partials"] == PARTIALS_AFTER and c["pointwise"] == POINTWISE and c["barrier"] == BARRIER
    assert c["step"] == STEP
    assert got["ghz"] == pytest.approx(2.0)
    assert got["ns"]["step"] == pytest.approx(STEP / 2.0)
    # blocks publish 255 + 10 b ns after the top: spread 30 over 4 blocks; the median warp stages step s
    # 55 ns after its top, the last publish of s - 1 was 255 + 30 - 500 ns from that top
    assert got["ns"]["publish_spread"] == pytest.approx(30)
    assert got["ns"]["last_publish_to_staged"] == pytest.approx(55 - (255 + 30 - STEP / 2.0))
    assert got["steps_used"] == 12 - 1 - diag.SKIP_STEPS


def test_a_mutated_record_moves_the_phase_it_should():
    rec = _synthetic().astype(np.int64)
    rec[:, :, 2] += 40   # the pointwise ends 40 cycles later, the barrier is 40 shorter
    got = diag.phases(rec & 0xFFFFFFFF, WARPS)["cycles"]
    assert got["pointwise"] == POINTWISE + 40 and got["barrier"] == BARRIER - 40


def test_cells_parse_from_the_command_line():
    assert diag.parse_cell("bfloat16:2048:4") == ("bfloat16", 2048, 4)
    for bad in ("float64:1024:8", "float16:1024", "float16:x:8", "float16:1024:8:1"):
        with pytest.raises(ValueError, match="cell: expected dtype:hidden:batch .* got"):
            diag.parse_cell(bad)


def test_phases_check_the_records_shape():
    slots = len(diag.THREAD_MARKS) + 3 * WARPS   # 16 (v57: the entry mark)
    with pytest.raises(ValueError, match=f"expected {slots} slots per step for 3 warps, got {slots - 1}"):
        diag.phases(np.zeros((2, 10, slots - 1), np.uint32), WARPS)
    with pytest.raises(ValueError, match="expected more than 5 steps, got 5"):
        diag.phases(np.zeros((2, 5, slots), np.uint32), WARPS)


def test_a_record_needs_a_marked_build():
    assert persistent.STEP_CLOCKS == 0
    with pytest.raises(ValueError, match="STEP_CLOCKS is 0, so no build has marks"):
        diag._record(None, 128)


def test_the_flag_reaches_the_defines_the_build_cache_and_the_graph_key(monkeypatch):
    assert "STEP_CLOCKS" not in persistent._flag_defines()
    before = persistent._graph_mode("auto")
    monkeypatch.setattr(persistent, "STEP_CLOCKS", 32)
    assert persistent._flag_defines()["STEP_CLOCKS"] == 32
    assert persistent._graph_mode("auto") != before


PLAN = "-DPASS=0 -DBF16=0 -DBATCH=4 -DNWARPS=8 -DM_TILES=2 -DK_TILES=8 -DREG_K_TILES=8 -DTAGGED=1 -DSPLIT=1"


BACKWARD = "-DPASS=1 -DBF16=0 -DBATCH=8 -DNWARPS=16 -DM_TILES=1 -DK_TILES=16 -DREG_K_TILES=16 -DTAGGED=1"


def _ptx(extra, plan=PLAN):
    out = subprocess.run(["nvcc", "-arch=sm_90", "-std=c++17", "-ptx", "-o", "-", *plan.split(), *extra,
                          str(KERNELS / "persistent_mma.cu")], capture_output=True, text=True, check=True)
    return out.stdout


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_the_marks_compile_in_only_with_the_flag():
    plain, marked = _ptx([]), _ptx(["-DSTEP_CLOCKS=32"])
    assert "ecornn_step_clocks" not in plain and "globaltimer" not in plain
    assert "ecornn_step_clocks" in marked and "%globaltimer_lo" in marked and "%clock" in marked
    # the flag reaches every persistent kernel; the backward's products (step -1) mark nothing
    assert "step_marks" not in _ptx(["-DSTEP_CLOCKS=32"], BACKWARD) and "%clock" not in _ptx(["-DSTEP_CLOCKS=32"], BACKWARD)
