"""v19 on the CPU: the refitted register model of the tensor-core plans (more k-tiles in registers,
persistent_capacity.MMA_REG_OVERHEAD_V19), checked against the compiler's data
(benchmarks/results/persistent_v19/fit_mma_registers_nvrtc.json, tools/fit_mma_registers.py --compiler
nvrtc on the H100: every REG_K_TILES of each plan built the engine's way, its registers and spills),
the warp/unit choice it keeps from v4, and the engine's ablation flag.
tests/test_persistent_v19_gpu.py builds and runs the plans."""
import json
from pathlib import Path

import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent, persistent_capacity as cap
from tests.test_persistent_emulated import cpu_engine  # noqa: F401 - fixture

H100 = cap.h100_properties()
FIT = Path(__file__).resolve().parent.parent / "benchmarks" / "results" / "persistent_v19" / "fit_mma_registers_nvrtc.json"


@pytest.mark.parametrize("pass_name, dtype, hidden, batch, v19, v4", [
    ("backward", "float16", 1024, 8, 16, 9),    # every k-tile in registers: no shared-memory tile loop
    ("backward", "bfloat16", 1024, 4, 16, 9),
    ("backward", "float16", 1024, 16, 9, 9),    # all 16 spill at B=16 (NVRTC)
    ("backward", "bfloat16", 2048, 4, 46, 31),  # 8 warps
    ("forward", "float16", 1536, 16, 2, 3),     # v4's 3 spilled (NVRTC: 2 at most)
    ("forward", "bfloat16", 2048, 4, 9, 3),     # v38: 8 warps under v19 (16 under v4; rules.v4_warps_kept)
    ("forward", "bfloat16", 1536, 4, 11, 5),    # 8 warps under both
    ("forward", "float16", 1024, 8, 8, 8),      # unchanged: all in registers before
])
def test_register_k_tiles_of_the_two_models(pass_name, dtype, hidden, batch, v19, v4):
    assert cap.plan_mma(H100, pass_name, hidden, batch, dtype=dtype).reg_k_tiles == v19
    assert cap.plan_mma(H100, pass_name, hidden, batch, dtype=dtype, reg_model="v4").reg_k_tiles == v4


def test_the_model_stays_within_what_ptxas_compiled_without_spills():
    rows = json.loads(FIT.read_text())
    checked = 0
    for r in rows:
        plan = cap.plan_mma(H100, r["pass"], r["hidden"], r["batch"], dtype=r["dtype"])
        if (plan.warps, plan.units, plan.k_tiles) != (r["warps"], r["units"], r["k_tiles"]):
            # v38 ranks some v4 picks anew (rules.v4_warps_kept): the row's geometry as a candidate then
            plan = cap._mma_candidate(H100, r["pass"], r["dtype"], r["hidden"], r["batch"], 1, r["warps"], r["units"])
            assert not cap.rules.v4_warps_kept(plan), r
        checked += 1
        tried = {int(reg): result for reg, result in r["nvrtc_tried"].items()}
        assert tried[plan.reg_k_tiles][1] == 0, r                        # its build does not spill
        # no fewer than v4 kept (where that did not spill), give or take the odd-remainder rule's one
        assert plan.reg_k_tiles >= min(r["model_v4_reg_k_tiles"] or 0, r["nvrtc_reg_k_tiles"]) - 1, r
    assert checked == len(rows)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("hidden", [256, 512, 1024, 1536, 2048])
@pytest.mark.parametrize("batch", [1, 4, 8, 16, 64])
def test_v19_keeps_the_v4_warps_units_and_exchange(dtype, hidden, batch):
    for pass_name in ("forward",) if dtype == "float32" else ("forward", "backward"):
        try:
            old = cap.plan_mma(H100, pass_name, hidden, batch, dtype=dtype, reg_model="v4")
            new = cap.plan_mma(H100, pass_name, hidden, batch, dtype=dtype)
        except cap.NotSupported:
            continue
        kept = cap._mma_candidate(H100, pass_name, dtype, hidden, batch, 1, old.warps, old.units)
        if kept and not cap.rules.v4_warps_kept(kept):   # v38: ranked anew (8 warps where that differs)
            ranked = cap._mma_plan_for_directions(H100, pass_name, dtype, hidden, batch, 1, "v19-ranked")
            assert (new.warps, new.units) == (ranked.warps, ranked.units) and pass_name == "forward"
        elif new.smem_bytes <= old.smem_bytes:   # the v4 geometry still fits under v19
            assert (new.warps, new.units, new.tagged) == (old.warps, old.units, old.tagged)


def test_unknown_register_model_is_a_clear_error():
    with pytest.raises(ValueError, match="reg_model: expected one of"):
        cap.plan_mma(H100, "forward", 1024, 4, dtype="float16", reg_model="v5")


def test_the_engine_flag_plans_with_the_v4_model(cpu_engine, monkeypatch):
    config = LSTMConfig(1024, 1024, 1, False, "float16", 8, 8)
    assert persistent.plans_for(config, training=True)["backward"].reg_k_tiles == 16
    mode = persistent._graph_mode("auto")
    monkeypatch.setattr(persistent, "REGISTER_MODEL", "v4")
    assert persistent.plans_for(config, training=True)["backward"].reg_k_tiles == 9
    assert persistent._graph_mode("auto") != mode
