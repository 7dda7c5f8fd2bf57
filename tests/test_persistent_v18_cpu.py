"""v18 on the CPU: the long first-poll delay (rules.long_poll_delay_pays) of the tagged
tensor-core forwards at B = 4 and H >= 2048 without the in-kernel projection: which plans take it,
its define, the engine's flag. tests/test_persistent_v16_gpu.py runs the kernel with and without it."""
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent, persistent_capacity as cap, persistent_rules as rules
from tests.test_persistent_emulated import cpu_engine  # noqa: F401 - fixture

H100 = cap.h100_properties()


@pytest.mark.parametrize("dtype, hidden, batch, delay", [
    ("bfloat16", 2048, 4, 0), ("float16", 2048, 4, 0),   # v38: 8 warps under grid.sync (rules.v4_warps_kept)
    ("bfloat16", 2048, 2, 0),                    # v16's rule leaves H > 1024 out at B <= 2
    ("bfloat16", 1536, 4, 0),                    # a grid.sync plan
    ("bfloat16", 1024, 4, 0),                    # v12's projection in the kernel
    ("float16", 1024, 1, rules.POLL_DELAY_NS),     # v16
])
def test_which_forwards_take_which_delay(dtype, hidden, batch, delay):
    plans = cap.plan_config(H100, LSTMConfig(hidden, hidden, 1, False, dtype, batch, 8), training=True)
    assert plans["forward"].poll_delay_ns == rules.poll_delay_ns(plans["forward"]) == delay
    assert plans["forward"].defines().get("POLL_DELAY_NS", 0) == delay
    assert getattr(plans["backward"], "poll_delay_ns", 0) == 0


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_the_tagged_16_warp_forward_at_h2048_b4_takes_the_long_delay(dtype):
    """v38's engine runs 8 warps under grid.sync there; the plan before v38 ("v19-kept") keeps v18's delay."""
    plan = cap.with_poll_delay(cap.plan_mma(H100, "forward", 2048, 4, dtype=dtype, reg_model="v19-kept"))
    assert (plan.warps, plan.tagged, plan.poll_delay_ns) == (16, True, rules.LONG_POLL_DELAY_NS)


def test_the_engine_flag_turns_the_long_delay_off(cpu_engine, monkeypatch):
    config = LSTMConfig(2048, 2048, 1, False, "bfloat16", 4, 8)
    monkeypatch.setattr(persistent, "REGISTER_MODEL", "v19-kept")   # the 16-warp tagged plan before v38
    assert persistent.plans_for(config)["forward"].poll_delay_ns == rules.LONG_POLL_DELAY_NS
    monkeypatch.setattr(persistent, "POLL_DELAY", False)
    assert persistent.plans_for(config)["forward"].poll_delay_ns == 0
