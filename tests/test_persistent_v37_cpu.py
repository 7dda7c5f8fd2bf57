"""`persistent` v37 on the CPU: tagged forwards with the in-kernel projection issue the next step's first poll early
(EARLY_POLL: capacity.with_early_poll, its shared memory, the defines, the graph key), and the options that copy
x_{t+1} by cp.async (ASYNC_X_STAGING). The kernel issues copies only where asked. tests/test_persistent_v37_gpu.py
checks the numbers (bitwise the ablations', and against float64)."""
import shutil
import subprocess
from pathlib import Path

import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent
from ecornn.engines import persistent_capacity as capacity

KERNEL = Path(__file__).resolve().parents[1] / "kernels" / "persistent_mma.cu"
PROJECTION = "-DPASS=0 -DBF16=0 -DBATCH=8 -DNWARPS=8 -DM_TILES=2 -DK_TILES=8 -DREG_K_TILES=8 -DTAGGED=1"


def test_the_flags_reach_the_defines_and_the_graph_key(monkeypatch):
    assert persistent.ASYNC_X_STAGING is False and persistent.EARLY_POLL == "registers"
    assert "X_ASYNC" not in persistent._flag_defines()   # the kernel's default: v12's loads
    keys = {persistent._graph_mode("auto")}
    for mode, define in (("top", 1), ("staged", 2)):
        monkeypatch.setattr(persistent, "ASYNC_X_STAGING", mode)
        assert persistent._flag_defines()["X_ASYNC"] == define
        keys.add(persistent._graph_mode("auto"))
    monkeypatch.setattr(persistent, "EARLY_POLL", False)
    keys.add(persistent._graph_mode("auto"))
    assert len(keys) == 4


PROPS = capacity.h100_properties()


def _forward(dtype, hidden, batch):
    return capacity.plan_config(PROPS, LSTMConfig(hidden, hidden, 1, False, dtype, batch, 256), False)["forward"]


@pytest.mark.parametrize("dtype, hidden, batch, extra", [
    ("float16", 1024, 8, 8 * 256 * 16),    # 8 tagged rows x 128 values per warp: 256 words = 8 uint4 per lane
    ("float16", 1024, 16, 8 * 256 * 16),   # two groups of 8
    ("bfloat16", 1024, 4, 8 * 128 * 16),
    ("float16", 256, 16, None),            # 2 k-tiles per warp: 64 uint4 per warp
])
def test_early_poll_plans_count_their_shared_memory(dtype, hidden, batch, extra):
    plan = _forward(dtype, hidden, batch)
    assert plan.tagged and plan.input_k_tiles > 0 and not plan.polls_early
    in_registers = capacity.with_early_poll(PROPS, plan)
    assert in_registers.defines()["EARLY_POLL"] == 2 and in_registers.smem_bytes == plan.smem_bytes
    early = capacity.with_early_poll(PROPS, plan, "shared")
    assert early.polls_early and early.defines()["EARLY_POLL"] == 1
    assert early.smem_bytes - plan.smem_bytes == capacity.early_poll_smem_bytes(plan)
    per_warp = -(-plan.tagged_rows * 4 * plan.k_tiles // 32) * 32 * 16
    assert capacity.early_poll_smem_bytes(plan) == plan.warps * per_warp
    if plan.warps == 8 and plan.k_tiles == 8:
        assert capacity.early_poll_smem_bytes(plan) == extra
    assert "EARLY_POLL" not in plan.defines()


@pytest.mark.parametrize("dtype, hidden, batch", [("float32", 1024, 4), ("bfloat16", 2048, 4), ("float16", 1024, 32)])
def test_no_early_poll_without_a_tagged_projection(dtype, hidden, batch):
    plan = _forward(dtype, hidden, batch)
    assert not (plan.tagged and plan.input_k_tiles)
    assert capacity.with_early_poll(PROPS, plan) == plan


def test_no_early_poll_under_grid_sync_or_where_shared_memory_is_short():
    plan = _forward("float16", 1024, 8)
    assert capacity.with_early_poll(PROPS, plan.with_exchange(False)) == plan.with_exchange(False)
    short = {**PROPS, "smem_per_block_optin": plan.smem_bytes + capacity.SMEM_RESERVED_PER_BLOCK + 1024}
    assert capacity.with_early_poll(short, plan, "shared") == plan
    assert capacity.with_early_poll(short, plan, "registers").polls_early
    assert capacity.with_early_poll(PROPS, plan, False) == plan
    with pytest.raises(ValueError, match=r"early poll mode: expected one of \[False, 'shared', 'registers'\], got True"):
        capacity.with_early_poll(PROPS, plan, True)


def test_the_engine_applies_the_flag(monkeypatch):
    monkeypatch.setattr(persistent, "_props", lambda: PROPS)
    config = LSTMConfig(1024, 1024, 1, False, "float16", 8, 256)
    assert persistent._plans(config, False)["forward"].polls_early
    monkeypatch.setattr(persistent, "EARLY_POLL", False)
    assert not persistent._plans(config, False)["forward"].polls_early


@pytest.mark.parametrize("bad", [True, "early", None])
def test_a_bad_mode_is_a_clear_error(monkeypatch, bad):
    monkeypatch.setattr(persistent, "ASYNC_X_STAGING", bad)
    with pytest.raises(ValueError, match=r"ASYNC_X_STAGING: expected one of \[False, 'staged', 'top'\], got"):
        persistent._flag_defines()


def _ptx(*defines):
    out = subprocess.run(["nvcc", "-arch=sm_90", "-std=c++17", "-ptx", "-o", "-", *PROJECTION.split(), *defines,
                          str(KERNEL)], capture_output=True, text=True, check=True)
    return out.stdout


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_copies_are_issued_only_where_asked():
    assert "cp.async" not in _ptx("-DIN_K_TILES=8")   # v12's loads, first poll after the projection
    assert "cp.async" not in _ptx("-DIN_K_TILES=8", "-DEARLY_POLL=2")   # the early poll in registers
    for asked in (["-DEARLY_POLL=1"], ["-DX_ASYNC=1"], ["-DX_ASYNC=2"]):
        ptx = _ptx("-DIN_K_TILES=8", *asked)
        assert "cp.async.cg.shared.global" in ptx and "cp.async.wait_all" in ptx, asked
    assert "cp.async" not in _ptx("-DEARLY_POLL=1")   # no projection: nothing to overlap
