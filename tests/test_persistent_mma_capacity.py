"""Capacity model of the tensor-core kernel (kernels/persistent_mma.cu) on synthetic devices."""
from dataclasses import replace

import pytest

from ecornn import LSTMConfig, NotSupported
from ecornn.engines import persistent_capacity as cap, persistent_rules as rules
from ecornn.kernels import source

H100, A100, SMALL = cap.h100_properties(), cap.a100_properties(), cap.small_gpu_properties(20)


@pytest.mark.parametrize("props", [H100, A100, SMALL], ids=["h100", "a100", "20sm"])
@pytest.mark.parametrize("pass_name", ["forward", "backward"])
@pytest.mark.parametrize("hidden, batch, dirs", [(1, 1, 1), (100, 3, 2), (512, 4, 1), (1000, 3, 1), (1024, 8, 2),
                                                 (1024, 16, 1), (2048, 4, 1), (640, 11, 1)])
def test_fitting_mma_plans_respect_every_device_limit(props, pass_name, hidden, batch, dirs):
    try:
        plan = cap.plan_mma(props, pass_name, hidden, batch, dirs, "bfloat16")
    except NotSupported:
        assert props is not H100 and hidden >= 640    # everything listed fits the H100
        return
    assert plan.grid <= props["sm_count"] and plan.launches * plan.directions_per_launch == dirs
    assert plan.smem_bytes <= props["smem_per_block_optin"] - cap.SMEM_RESERVED_PER_BLOCK
    assert plan.regs_per_thread <= min(255, props["regs_per_sm"] // plan.threads)
    assert plan.units * batch <= plan.threads                 # one pointwise thread per (unit, batch)
    shape = plan.tile_shape()
    assert shape.blocks * shape.rows_per_block >= plan.rows_per_unit * hidden
    assert shape.tile_rows >= shape.rows_per_block and shape.padded_cols >= plan.reduction_length
    assert 0 <= plan.reg_k_tiles <= plan.k_tiles
    assert plan.defines()["BF16"] == 1


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_h2048_fits_forward_and_backward_at_batch_4_on_h100(dtype):
    config = LSTMConfig(2048, 2048, 1, False, dtype, 4, 8)
    plans = cap.plan_mma_config(H100, config, training=True)
    assert set(plans) == {"forward", "backward"} and all(p.kind == "mma" for p in plans.values())
    assert cap.plan_config(H100, config, training=True) == plans       # "auto" takes them
    with pytest.raises(NotSupported):                                   # the widened fp32 tiles do not fit
        cap.plan_grid_config(H100, config, training=True)


def test_largest_hidden_on_h100():
    """Step 64: B=4 forward 2048, backward 2112; B=16 forward 1536, backward 1344 (recorded in the notes)."""
    assert cap.largest_mma_hidden(H100, 4, "forward") >= 2048
    assert cap.largest_mma_hidden(H100, 4, "backward") >= 2048
    assert cap.largest_mma_hidden(H100, 16, "forward") >= 1536
    assert cap.largest_mma_hidden(H100, 16, "backward") >= 1280


def test_one_above_capacity_names_the_limit():
    largest = cap.largest_mma_hidden(SMALL, 4, "forward")
    with pytest.raises(NotSupported, match=f"hidden_size={largest + 64} \\(float16.*20 SMs"):
        cap.plan_mma(SMALL, "forward", largest + 64, 4)


def test_a_16bit_call_too_large_for_both_kernels_names_the_tensor_core_limit_first():
    """fp16 H=2048 B=16 fits neither kernel: the message leads with the 16-bit tensor-core reason, not
    only the fp32 fallback's (which named fp32 and 64 MiB for a float16 call)."""
    config = LSTMConfig(2048, 2048, dtype="float16", batch=16, seq_len=3)
    with pytest.raises(NotSupported) as info:
        cap.plan_config(H100, config, training=False)
    reason = info.value.reason
    assert reason.index("float16, 32.0 MiB") < reason.index("fp32 kernels as fallback") < reason.index("fp32, 64.0 MiB")


def test_fp32_backward_other_dtypes_and_old_gpus_are_not_supported():
    with pytest.raises(NotSupported, match="forwards only"):   # v13 splits fp32 forwards only
        cap.plan_mma(H100, "backward", 256, 4, dtype="float32")
    with pytest.raises(NotSupported, match="float16/bfloat16"):
        cap.plan_mma(H100, "forward", 256, 4, dtype="float64")
    old = dict(H100, compute_capability=(7, 5), name="T4")
    with pytest.raises(NotSupported, match="sm_80.*sm_75"):
        cap.plan_mma(old, "forward", 256, 4)


def test_auto_falls_back_to_the_grid_kernel_where_mma_does_not_fit():
    """16-bit on a GPU without tensor-core plans: plan_config gives the widened grid kernel."""
    old = dict(H100, compute_capability=(7, 5))
    config = LSTMConfig(256, 256, 1, False, "float16", 4, 8)
    for props, cfg in ((old, config), (H100, config.replace(dtype="float32", batch=2))):   # (v41: B=4 runs split)
        plans = cap.plan_config(props, cfg, training=True)
        assert plans["forward"].kind == "grid" and plans["backward"].kind in ("grid", "rows")


def test_bidirectional_shares_the_grid_when_it_fits_else_runs_twice():
    both = cap.plan_mma(H100, "forward", 512, 4, 2)
    assert both.directions_per_launch == 2 and both.launches == 1 and both.grid <= 132
    one_by_one = cap.plan_mma(H100, "forward", 2048, 4, 2)
    assert one_by_one.directions_per_launch == 1 and one_by_one.launches == 2


def test_spill_backoff_moves_k_tiles_to_shared_memory():
    plan = cap.plan_mma(H100, "backward", 1024, 8)
    fewer = plan.with_reg_tiles(plan.reg_k_tiles - 1)
    assert fewer.smem_bytes == plan.smem_bytes + plan.m_tiles * plan.threads * 16
    assert fewer.tile_shape() == plan.tile_shape()
    assert fewer.defines()["REG_K_TILES"] == plan.reg_k_tiles - 1


@pytest.mark.parametrize("pass_name, hidden, batch, dtype", [("forward", 1024, 4, "bfloat16"),
                                                             ("forward", 1024, 8, "float16"),
                                                             ("forward", 2048, 4, "bfloat16"),
                                                             ("backward", 1024, 8, "float16"),
                                                             ("backward", 2048, 4, "bfloat16")])
def test_defines_match_the_kernel_check_lines(pass_name, hidden, batch, dtype):
    """The nvcc build check (tests/test_kernel_build.py) compiles exactly the model's H100 plans (of
    a layer with input = hidden: the forward's in-kernel projection where it fits, v12)."""
    plan = cap.plan_mma_config(H100, LSTMConfig(hidden, hidden, 1, False, dtype, batch, 8), True)[pass_name]
    line = " ".join(f"-D{k}={v}" for k, v in plan.defines().items())
    assert line + "\n" in source("persistent_mma.cu")


def test_plan_describe_and_kind():
    plan = cap.plan_mma(H100, "forward", 1024, 8)
    assert plan.kind == "mma" and plan.kernel_file == "persistent_mma.cu"
    assert "tensor cores" in plan.describe() and "k-tiles in registers" in plan.describe()
    assert 1.0 < cap.predicted_mma_us_per_step(plan) < 5.0


@pytest.mark.parametrize("pass_name, hidden, batch, tagged", [("forward", 1024, 4, True), ("forward", 1024, 8, False),
                                                             ("forward", 2048, 4, False), ("forward", 256, 8, True),
                                                             ("backward", 1024, 1, True), ("backward", 1024, 4, False)])
def test_plans_take_the_tagged_exchange_where_it_measured_faster(pass_name, hidden, batch, tagged):
    """v5: tagged while a warp polls at most 4 uint4 per lane (B * k_tiles <= 32), else grid.sync (v38: H=2048 B=4 on
    8 warps, 16 k-tiles per warp: grid.sync)."""
    plan = cap.plan_mma(H100, pass_name, hidden, batch)
    assert plan.tagged is tagged
    assert (plan.batch * plan.k_tiles <= 8 * rules.TAGGED_MAX_LOADS_PER_LANE) is tagged
    assert plan.defines()["TAGGED"] == int(tagged)
    assert plan.with_reg_tiles(plan.reg_k_tiles - 1).tagged is tagged   # the spill back-off keeps it


def test_exchange_buffer_shape():
    fwd = cap.plan_mma(H100, "forward", 42, 3)
    assert fwd.exchange_shape(2) == (2, 2, 3, 44)          # rows rounded up to 4 words (16 bytes)
    bwd = cap.plan_mma(H100, "backward", 42, 3)
    assert bwd.exchange_shape(1) == (1, 2, 3, 168)
    from dataclasses import replace
    assert replace(fwd, tagged=False).exchange_shape(1) == (1, 2, 3, 24)   # 48 packed 16-bit values
    assert replace(bwd, tagged=False).exchange_shape(1) == (1, 2, 3, 84)


# ---- v12: the input projection inside the forward kernel ----
def _forward(dtype, inp, hidden, batch, layers=1, bidir=False, batch_groups="auto"):
    return cap.plan_mma_config(H100, LSTMConfig(inp, hidden, layers, bidir, dtype, batch, 8), False,
                               batch_groups=batch_groups)["forward"]


def test_input_projection_adds_its_tiles_and_staging_to_shared_memory():
    plain = cap.plan_mma(H100, "forward", 1024, 8, dtype="float16")
    plan = cap.with_input_projection(H100, plain, [1024])
    assert plan.input_k_tiles == 8                       # 1024 inputs over 8 warps of 16-column tiles
    assert plan.smem_bytes - plain.smem_bytes == 8 * 8 * 2 * 32 * 16 + 4 * 8 * 8 * (8 * 8 + 4)
    assert plan.regs_per_thread - plain.regs_per_thread == 4 * plan.m_tiles * plan.n_tiles
    assert plan.defines()["IN_K_TILES"] == 8 and "IN_K_TILES" not in plain.defines()
    assert plan.input_tile_shape() == replace(plain.tile_shape(), k_tiles=8)
    assert plan.without_input_projection() == plain
    assert "input projection in the kernel" in plan.describe()


def test_the_model_takes_the_projection_with_the_tagged_exchange_from_batch_4():
    tagged = _forward("bfloat16", 1024, 1024, 4)
    assert tagged.tagged and tagged.input_k_tiles == 8 and rules.input_projection_pays(tagged)
    grid = _forward("float16", 1024, 1024, 16, batch_groups=False)   # (B=8: v26's tagged projection,
    # test_persistent_v26_cpu; B=16 grouped: v30, test_persistent_v30_cpu)
    assert not grid.tagged and grid.input_k_tiles == 0 and not rules.input_projection_pays(grid)
    one = _forward("float16", 1024, 1024, 1)
    assert one.tagged and one.input_k_tiles == 0 and not rules.input_projection_pays(one)


def test_input_projection_takes_the_widest_layer_input():
    plan = _forward("bfloat16", 40, 96, 4, layers=3, bidir=True)       # inputs 40, 192, 192
    assert plan.input_k_tiles == -(-192 // (16 * plan.warps))


@pytest.mark.parametrize("dtype, inp, hidden, batch, layers, why", [
    ("float16", 37, 256, 4, 1, "input not a multiple of 8"),
    ("bfloat16", 64, 100, 3, 2, "layer 1's input of 100"),
    ("bfloat16", 2048, 2048, 4, 1, "213 KB of shared memory already"),
])
def test_input_projection_stays_a_gemm_where_it_cannot_run(dtype, inp, hidden, batch, layers, why):
    plan = _forward(dtype, inp, hidden, batch, layers)
    assert plan.input_k_tiles == 0, why
    assert plan == cap.with_poll_delay(cap.plan_mma(H100, "forward", hidden, batch, dtype=dtype))   # v18's delay at H=2048


def test_backward_plans_never_carry_the_projection():
    plans = cap.plan_mma_config(H100, LSTMConfig(1024, 1024, 1, False, "bfloat16", 4, 8), True)
    assert plans["forward"].input_k_tiles > 0 and plans["backward"].input_k_tiles == 0
    assert cap.with_input_projection(H100, plans["backward"], [1024]) is plans["backward"]
