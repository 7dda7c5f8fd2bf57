"""v15 on the CPU: the fp32 grid forward's in-kernel input projection. Capacity (what it adds, where
it fits, the rule, the defines the kernel's check lines compile), and the engine over the NumPy
emulation of kernels/persistent_lstm.cu (the packed W_ih tiles times x_t staged [k][b], the bias
added in the pointwise) against the float64 reference; refresh of the W_ih tiles; the spill
back-off. tests/test_persistent_v15_gpu.py runs the real kernel."""
import numpy as np
import pytest

from ecornn import LayerWeights, LSTMConfig
from ecornn.engines import persistent, persistent_capacity as cap, reference
from tests.helpers import random_problem, rel_err
from tests.test_persistent_emulated import cpu_engine  # noqa: F401 - fixture

H100 = cap.h100_properties()


def _grid_forward(config):
    return cap.plan_grid_config(H100, config, False)["forward"]


def test_the_projection_adds_its_registers_and_shared_memory():
    config = LSTMConfig(512, 512, 1, False, "float32", 2, 8)
    plan = _grid_forward(config)
    bare = cap.plan_pass(H100, "forward", 512, 2)
    assert plan.input_cols == 16 and plan.tagged                       # 512 inputs / (16 warps x 2 lanes)
    assert plan.regs_per_thread == bare.regs_per_thread + 1 * (16 + 2) + 2   # W_ih, carried partials, x in flight
    assert plan.smem_bytes == bare.smem_bytes + 4 * 16 * 32 * 2             # x staged [k][b]
    assert plan.without_input_projection() == cap.with_poll_delay(bare)   # v16: the delay at B <= 2
    assert plan.input_tile_shape() == bare.tile_shape()                  # input = hidden: the same cut
    assert plan.defines()["IN_COLS"] == 16 and "IN_COLS" not in bare.defines()
    assert "input projection in the kernel (16 columns)" in plan.describe()


def test_defines_match_the_kernel_check_lines():
    from ecornn.kernels import source
    text = source("persistent_lstm.cu")
    for config in (LSTMConfig(512, 512, 1, False, "float32", 4, 8), LSTMConfig(1024, 512, 1, False, "float32", 4, 8),
                   LSTMConfig(512, 512, 1, False, "float32", 1, 8)):
        plan = cap.with_input_projection(H100, cap.plan_pass(H100, "forward", 512, config.batch),
                                         cap.layer_input_sizes(config))
        line = " ".join(f"-D{k}={v}" for k, v in plan.defines().items())
        assert plan.input_cols and line in text, line


@pytest.mark.parametrize("hidden, batch, wanted", [
    (512, 1, True), (512, 2, True), (256, 2, True), (640, 1, True),
    (512, 4, False), (384, 8, False),     # the rule: B <= 2 (measured slower at B = 4, 8)
    (256, 1, False),                      # grid.sync plan
    (1024, 1, False),                     # 2 rows x (32 + 32) columns beside 114 registers: over 128
    (768, 2, False),                      # registers over the 128 of a 512-thread block
])
def test_auto_takes_the_projection_on_tagged_plans_up_to_batch_2_where_it_fits(hidden, batch, wanted):
    plan = _grid_forward(LSTMConfig(hidden, hidden, 1, False, "float32", batch, 8))
    assert plan.in_kernel_projection == wanted
    assert plan.regs_per_thread <= cap.register_cap(H100, plan.threads)


def test_one_plan_serves_every_layer_with_the_widest_input():
    config = LSTMConfig(64, 256, 2, True, "float32", 2, 8)   # inputs 64 and 512
    plan = _grid_forward(config)
    assert plan.input_cols == -(-512 // (plan.warps * (32 // plan.lane_rows)))


def test_shared_memory_columns_keep_the_gemm():
    """W_hh partly in shared memory (H=1536 B=1): its registers are spoken for."""
    plan = cap.plan_pass(H100, "forward", 1536, 4)
    assert plan.reg_cols < plan.cols_per_lane
    assert cap.with_input_projection(H100, plan, [1536]) == plan


CONFIGS = [  # (input, hidden, layers, bidirectional, batch, steps)
    (7, 5, 1, False, 1, 1),
    (37, 100, 1, False, 3, 9),
    (30, 64, 3, True, 3, 7),
    (24, 200, 2, True, 4, 5),
    (20, 1000, 1, False, 2, 3),
    (512, 512, 1, False, 4, 3),
    (512, 512, 1, False, 2, 3),
]


@pytest.mark.parametrize("inp, hidden, layers, bidir, batch, steps", CONFIGS)
def test_emulated_projection_matches_the_reference(cpu_engine, monkeypatch, rng, inp, hidden, layers, bidir, batch,
                                                   steps):
    """Forced in the kernel: no projection GEMM runs, forward and every gradient within 1e-5."""
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", True)

    def no_gemm(*args, **kwargs):
        raise AssertionError("the projection ran as a GEMM")
    monkeypatch.setattr(persistent, "_input_projections", no_gemm)
    config = LSTMConfig(inp, hidden, layers, bidir, "float32", batch, steps)
    assert persistent.plans_for(config, True)["forward"].in_kernel_projection
    weights, x, h0, c0 = random_problem(rng, config)
    dy = rng.standard_normal(config.output_shape).astype(np.float32)
    dh, dc = (rng.standard_normal(config.state_shape).astype(np.float32) for _ in range(2))
    got = cpu_engine.forward(config, x, weights, h0, c0, training=True)
    got_grads = cpu_engine.backward(got[3], dy, dh, dc)
    w64 = [LayerWeights(*(a.astype(np.float64) for a in w)) for w in weights]
    f64 = lambda a: a.astype(np.float64)  # noqa: E731
    want = reference.forward(config.replace(dtype="float64"), f64(x), w64, f64(h0), f64(c0), training=True)
    want_grads = reference.backward(want[3], f64(dy), f64(dh), f64(dc))
    for g, w in zip(list(got[:3]) + list(got_grads[:3]), list(want[:3]) + list(want_grads[:3])):
        assert rel_err(g, w) <= 1e-5
    for gw, ww in zip(got_grads[3], want_grads[3]):
        for g, w in zip(gw, ww):
            assert rel_err(g, w) <= 1e-5


def test_a_wrong_w_ih_packing_fails_the_emulation(cpu_engine, monkeypatch, rng):
    """The check above can fail: W_ih tiles packed with W_hh's column count (a mutation) are off."""
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", True)
    config = LSTMConfig(37, 100, 1, False, "float32", 3, 4)
    pack = persistent._pack
    monkeypatch.setattr(persistent, "_pack", lambda plan, m, order_only=False, matrix="w_hh":
                        pack(plan, m[:, ::-1].copy() if matrix == "w_ih" else m, order_only, matrix))
    weights, x, h0, c0 = random_problem(rng, config)
    got = cpu_engine.forward(config, x, weights, h0, c0, training=True)
    want = reference.forward(config.replace(dtype="float64"), x.astype(np.float64),
                             [LayerWeights(*(a.astype(np.float64) for a in w)) for w in weights],
                             h0.astype(np.float64), c0.astype(np.float64))
    assert rel_err(got[0], want[0]) > 1e-3


def test_refresh_rewrites_the_w_ih_tiles_as_a_fresh_prepare(cpu_engine, monkeypatch, rng):
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", True)
    config = LSTMConfig(24, 40, 2, True, "float32", 4, 5)
    weights, x, h0, c0 = random_problem(rng, config)
    prepared = cpu_engine.prepare(config, weights)
    cpu_engine.forward(config, x, weights, h0, c0, training=True, prepared=prepared)
    assert any(key[1] == "input" and key[2] == "grid" for key in prepared.tile_plans)
    new, _, _, _ = random_problem(rng, config)
    cpu_engine.refresh(prepared, config, new)
    fresh = cpu_engine.prepare(config, new)
    for key, packed in prepared.tiles.items():
        want = (persistent._biases(fresh, key[1], packed.shape[0]) if key[0] == "bias"
                else persistent._tiles(fresh, *prepared.tile_plans[key], persistent._tile_matrix(key)))
        np.testing.assert_array_equal(packed, want)


def test_a_spilling_build_gives_the_projection_up_first(cpu_engine):
    plan = _grid_forward(LSTMConfig(512, 512, 1, False, "float32", 2, 8))
    backed_off = persistent._fewer_register_tiles(plan, H100)
    assert backed_off == plan.without_input_projection() and backed_off.reg_cols == plan.reg_cols
