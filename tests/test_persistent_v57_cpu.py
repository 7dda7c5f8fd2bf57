"""`persistent` v57 on the CPU: the fp32 split's h0 exponents by 16-byte loads (H0_WIDE_LOADS: a define, in the
kernel cache's and the graphs' keys, an A/B flag; ungrouped plans only), the step clocks' entry mark, and the
diagnostics' arithmetic (a line through times against T; a marked launch's timeline)."""
import sys
from pathlib import Path

import numpy as np
import pytest

from ecornn.engines import persistent

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import ab_modes  # noqa: E402
import diag_early_steps_v57 as early  # noqa: E402
import diag_intercept_v57 as intercept  # noqa: E402
from diag_step_clocks_v37 import THREAD_MARKS, clock_slots  # noqa: E402


def _kernel_text() -> str:
    from ecornn.kernels import sources
    return next(p for p in sources() if p.name == "persistent_mma.cu").read_text()


def test_the_wide_h0_loads_are_a_define_and_key_builds_graphs_and_ab_modes(monkeypatch):
    mode = persistent._graph_mode("auto")
    assert persistent.H0_WIDE_LOADS is True and "H0_WIDE_LOADS" not in persistent._flag_defines()
    monkeypatch.setattr(persistent, "H0_WIDE_LOADS", False)
    assert persistent._flag_defines()["H0_WIDE_LOADS"] == 0 and persistent._graph_mode("auto") != mode
    assert "H0_WIDE_LOADS" in ab_modes.ENGINE_FLAGS
    ab_modes.set_engine_flags({})   # back to the default, as every A/B mode starts
    assert persistent.H0_WIDE_LOADS is True


def test_the_kernel_reads_h0_wide_only_where_its_rows_allow():
    text = _kernel_text()
    assert "#define H0_WIDE_LOADS 1" in text
    exponent = text[text.index("__device__ __forceinline__ int h0_column_exponent("):]
    exponent = exponent[:exponent.index("\n}\n")]
    assert "constexpr bool kH0Wide = H0_WIDE_LOADS != 0 && kGroups == 1;" in text   # ungrouped plans only
    wide = "if (kH0Wide && H % 4 == 0 && reinterpret_cast<size_t>(rows) % 16 == 0)"
    assert wide in exponent
    after = exponent[exponent.index(wide):]
    assert after.index("h0_exponent_of_vectors(") < after.index("else") < after.index("h0_exponent_of_values(")
    vectors = text[text.index("void h0_exponent_of_vectors("):]
    vectors = vectors[:vectors.index("\n}\n")]
    assert "const bool warp_in_one_row = H % 128 == 0;" in vectors   # a warp's 32 vectors: 128 values of one row
    assert "h0_exponent_slot(red_s, 4 * i / H)" in vectors           # vector i holds values 4i .. 4i + 3


def test_the_kernel_marks_its_entry_before_the_prologue():
    body = _kernel_text()
    body = body[body.index("persistent_lstm_fwd(const uint4*"):]
    assert body.index("block_mark(0, kMarkEntryNs, true);") < body.index("const Carve s = carve(smem);") < \
        body.index("h0_column_exponent(h0, s.red, p, H)") < body.index("load_tiles(a_reg, s.a, tiles, p.tile);")


def test_the_step_clocks_have_an_entry_mark():
    assert THREAD_MARKS[-1] == "entry_ns" and clock_slots(3) == len(THREAD_MARKS) + 9
    from ecornn.kernels import sources
    clocks = (next(iter(sources())).parent / "step_clocks.cuh").read_text()
    assert "kMarkPublishedNs, kMarkEntryNs,\n                 kThreadMarks };" in clocks


def test_a_line_through_times_against_steps():
    ts = [16, 64, 256]
    a, b = intercept.line(ts, [10.5 + 2.2 * t for t in ts])
    assert a == pytest.approx(10.5) and b == pytest.approx(2.2)


def _record(base, blocks=3, steps=6, prologue=9000, step_ns=2300):
    """A marked launch's record (uint32 readings of one global timer): block b enters at base + 100 b ns, its step 0's
    top comes ``prologue`` ns later, step 0 lasts ``step_ns`` + 200 and every later step ``step_ns``; each step
    publishes 1500 ns after its top."""
    rec = np.zeros((blocks, steps, clock_slots(2)), np.int64)
    top_ns, pub_ns, entry_ns = (THREAD_MARKS.index(k) for k in ("top_ns", "published_ns", "entry_ns"))
    for b in range(blocks):
        entry = base + 100 * b
        rec[b, 0, entry_ns] = entry
        for s in range(steps):
            top = entry + prologue + s * step_ns + (200 if s > 0 else 0)
            rec[b, s, top_ns], rec[b, s, pub_ns] = top, top + 1500
    return (rec & 0xFFFFFFFF).astype(np.uint32)


def test_the_timeline_of_a_marked_launch():
    got = early.timeline(_record(base=1_000_000))
    assert got["prologue_median_ns"] == 9000 and got["prologue_max_ns"] == 9000
    assert got["entry_spread_ns"] == 200 and got["step0_top_spread_ns"] == 200
    assert got["step_ns"] == [2500.0, 2300.0, 2300.0, 2300.0, 2300.0]
    assert got["marks_span_ns"] == 200 + 9000 + 5 * 2300 + 200 + 1500   # first entry -> the last block's last publish
    assert got["first_entry_to_last_top0_ns"] == 9200


def test_the_timeline_reads_through_the_timers_wrap():
    """The 32-bit timer wraps during the prologue: the same timeline."""
    assert early.timeline(_record(base=2 ** 32 - 4000)) == early.timeline(_record(base=1_000_000))
