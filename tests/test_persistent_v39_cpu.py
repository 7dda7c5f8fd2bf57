"""`persistent` v39 on the CPU: the ADAPTIVE_POLL_DELAY flag's kernel defines, its checks, the build and graph keys,
and the kernel's adaptive delay (the update rule's lines, the backward untouched)."""
import re
from pathlib import Path

import pytest

from ecornn.engines import persistent

KERNEL = Path(__file__).resolve().parents[1] / "kernels" / "persistent_mma.cu"


def test_no_defines_by_default():
    assert persistent.ADAPTIVE_POLL_DELAY is None
    assert not any(k.startswith("ADAPT_") for k in persistent._flag_defines())


def test_the_flag_sets_the_kernel_defines(monkeypatch):
    monkeypatch.setattr(persistent, "ADAPTIVE_POLL_DELAY", (25, 100, 1600))
    defines = persistent._flag_defines()
    assert {k: defines[k] for k in defines if k.startswith("ADAPT_")} == {
        "ADAPT_POLL_DELAY": 1, "ADAPT_DOWN_NS": 25, "ADAPT_UP_NS": 100, "ADAPT_MAX_NS": 1600}


@pytest.mark.parametrize("bad", [(25, 100), (25, -1, 100), (25, 100, 0), (2.5, 10, 100), "25/100/1600"])
def test_a_bad_flag_names_what_was_expected(monkeypatch, bad):
    monkeypatch.setattr(persistent, "ADAPTIVE_POLL_DELAY", bad)
    with pytest.raises(ValueError, match=r"ADAPTIVE_POLL_DELAY: expected None or \(down_ns, up_ns, max_ns\)"):
        persistent._flag_defines()


def test_the_flag_is_in_the_graph_key(monkeypatch):
    before = persistent._graph_mode("mma")
    monkeypatch.setattr(persistent, "ADAPTIVE_POLL_DELAY", (25, 100, 1600))
    assert persistent._graph_mode("mma") != before


def _function(source: str, name: str) -> str:
    start = source.index(f"void {name}(")
    return source[start:source.index("\n}\n", start)]


def test_the_kernel_adapts_only_forwards_and_only_under_the_flag():
    source = KERNEL.read_text()
    assert "constexpr bool kAdaptPollDelay = ADAPT_POLL_DELAY != 0 && PASS == 0;" in source
    stage = _function(source, "stage_tagged")
    # the adaptive sleep replaces the constant one; the update after the polls, from the first chunk's repolls
    assert re.search(r"if constexpr \(kAdaptPollDelay\) \{\s*if \(delay_ns > 0\) __nanosleep\(delay_ns\);\s*\}"
                     r" else if constexpr \(POLL_DELAY_NS > 0\) \{\s*first_poll_delay\(\);", stage)
    assert "if (base == 0) repolled = true;" in stage
    assert "if constexpr (kAdaptPollDelay) adapt_poll_delay(delay_ns, repolled);" in stage
    rule = _function(source, "adapt_poll_delay")
    assert "__any_sync(0xffffffffu, repolled)" in rule   # one decision per warp
    assert "ADAPT_MAX_NS" in rule and "delay_ns > ADAPT_DOWN_NS ? delay_ns - ADAPT_DOWN_NS : 0u" in rule
    # the forward's delay starts at the plan's constant and lives over the steps; the backward passes a zero
    assert "unsigned int poll_delay_ns = POLL_DELAY_NS;" in source
    assert "acc, poll_delay_ns, step);" in source and "(T - step) & 0xffffu, acc, no_delay);" in source
