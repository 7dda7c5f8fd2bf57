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
    assert "acc, poll_delay_ns, step," in source and "(T - step) & 0xffffu, acc, no_delay);" in source


def _grouped_forward():
    from ecornn import LSTMConfig
    from ecornn.engines import persistent_capacity as cap
    props = cap.h100_properties()
    return props, cap.plan_config(props, LSTMConfig(1024, 1024, 1, False, "float16", 16, 256), False)["forward"]


def test_the_early_poll_plan_counts_its_shared_memory_and_defines():
    from ecornn.engines import persistent_capacity as cap
    props, plan = _grouped_forward()
    assert plan.tagged and plan.input_k_tiles == 8 and not plan.polls_early and "EARLY_POLL_AT" not in plan.defines()
    early = cap.with_early_poll(props, plan, 4)
    # 8 warps x (8 rows x 128 k / 4 quads, rounded to 32) x 16 bytes
    assert early.smem_bytes - plan.smem_bytes == cap.early_poll_smem_bytes(plan) == 8 * 256 * 16
    assert early.defines()["EARLY_POLL_AT"] == 4 and early.polls_early
    assert cap.with_early_poll(props, plan, 20).early_poll_at == 8   # at most the input k-tiles
    assert cap.with_early_poll(props, plan, None) is plan


def test_no_early_poll_where_it_does_not_apply_or_fit():
    from dataclasses import replace
    from ecornn.engines import persistent_capacity as cap
    props, plan = _grouped_forward()
    assert cap.with_early_poll(props, replace(plan, input_k_tiles=0), 4).early_poll_at == -1   # no projection
    assert cap.with_early_poll(props, replace(plan, tagged=False), 4).early_poll_at == -1     # grid.sync
    full = replace(plan, smem_bytes=props["smem_per_block_optin"] - 2048)
    assert cap.with_early_poll(props, full, 4) is full                                        # does not fit
    with pytest.raises(ValueError, match="early poll k-tile: expected None or an int >= 0, got -2"):
        cap.with_early_poll(props, plan, -2)


def test_the_early_poll_is_in_the_graph_key(monkeypatch):
    before = persistent._graph_mode("mma")
    monkeypatch.setattr(persistent, "EARLY_POLL_AT", 4)
    assert persistent._graph_mode("mma") != before


def test_the_kernel_issues_the_early_poll_inside_the_input_product():
    source = KERNEL.read_text()
    product = _function(source, "input_product")
    first = product.index("smem_tile_products<kEarlyPollAt")
    issue = product.index("issue_early_poll(early_s, poll_src, k_len)")
    rest = product.index("smem_tile_products<rest")
    assert first < issue < rest   # the k-tiles before the poll, then the poll, then the rest in their sets
    stage = _function(source, "stage_tagged")
    assert 'asm volatile("cp.async.wait_all;" ::: "memory");' in stage and "early[i]" in stage
    assert "kEarlyPoll && step > 0 ? s.early + (threadIdx.x / 32) * kEarlyU4PerWarp : nullptr" in source
