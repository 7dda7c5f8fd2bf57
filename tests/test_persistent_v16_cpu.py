"""v16 on the CPU: the first poll's delay of tagged forwards at B <= 2 (rules.poll_delay_pays):
where the plans take it, the defines the kernels' check lines compile, the engine's flag and
overrides. tests/test_persistent_v16_gpu.py runs the kernels."""
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent, persistent_capacity as cap, persistent_rules as rules
from tests.test_persistent_emulated import cpu_engine  # noqa: F401 - fixture

H100 = cap.h100_properties()


@pytest.mark.parametrize("dtype, hidden, batch, delayed", [
    ("float32", 512, 1, True), ("float32", 512, 2, True), ("float32", 768, 2, True),   # grid, tagged
    ("float16", 1024, 1, True), ("bfloat16", 1024, 2, True),                           # tensor cores, tagged
    ("float32", 512, 4, True),                                   # v41: the split in groups of 2 columns, tagged
    ("float32", 768, 4, True), ("bfloat16", 1024, 4, False),     # B = 4 (and v12's projection)
    ("float32", 256, 1, False),                                  # grid.sync plan
    ("float16", 1024, 8, False),
    ("bfloat16", 2048, 2, False),                                # H > 1024: not measured faster
])
def test_tagged_forwards_up_to_batch_2_take_the_delay(dtype, hidden, batch, delayed):
    plans = cap.plan_config(H100, LSTMConfig(hidden, hidden, 1, False, dtype, batch, 8), training=True)
    assert plans["forward"].poll_delay_ns == (rules.POLL_DELAY_NS if delayed else 0)
    assert ("POLL_DELAY_NS" in plans["forward"].defines()) == delayed
    assert getattr(plans["backward"], "poll_delay_ns", 0) == 0   # forwards only


def test_delay_defines_match_the_kernel_check_lines():
    from ecornn.kernels import source
    for dtype, hidden, batch, file in (("float32", 512, 1, "persistent_lstm.cu"), ("float32", 768, 2, "persistent_lstm.cu"),
                                       ("float16", 1024, 1, "persistent_mma.cu"), ("float16", 1024, 2, "persistent_mma.cu")):
        plan = cap.plan_config(H100, LSTMConfig(hidden, hidden, 1, False, dtype, batch, 8), training=False)["forward"]
        line = " ".join(f"-D{k}={v}" for k, v in plan.defines().items())
        assert plan.poll_delay_ns and line in source(file), line


def test_the_engine_flag_and_overrides_set_the_delay_last(cpu_engine, monkeypatch):
    config = LSTMConfig(1024, 1024, 1, False, "float16", 1, 8)
    mode = persistent._graph_mode("auto")
    assert persistent.plans_for(config)["forward"].poll_delay_ns == rules.POLL_DELAY_NS
    monkeypatch.setattr(persistent, "POLL_DELAY", False)
    assert persistent.plans_for(config)["forward"].poll_delay_ns == 0
    assert persistent._graph_mode("auto") != mode                  # graphs captured with the delay are not replayed
    monkeypatch.setattr(persistent, "POLL_DELAY", True)
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", True)  # the tensor-core projection: no delay
    plan = persistent.plans_for(config)["forward"]
    assert plan.in_kernel_projection and plan.poll_delay_ns == 0
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", "auto")
    monkeypatch.setattr(persistent, "TAGGED_EXCHANGE", False)      # grid.sync: nothing to delay
    assert persistent.plans_for(config)["forward"].poll_delay_ns == 0


def test_with_poll_delay_keeps_a_plan_that_needs_no_change():
    plan = cap.plan_pass(H100, "forward", 512, 4)
    assert cap.with_poll_delay(plan) is plan
