"""Capacity model of the persistent kernels on synthetic devices (no GPU needed)."""
import pytest

from ecornn import LSTMConfig, NotSupported
from ecornn.engines import persistent_capacity as cap

H100, A100, SMALL = cap.h100_properties(), cap.a100_properties(), cap.small_gpu_properties(20)


@pytest.mark.parametrize("props", [H100, A100, SMALL], ids=["h100", "a100", "20sm"])
@pytest.mark.parametrize("pass_name", ["forward", "backward"])
@pytest.mark.parametrize("hidden, batch", [(1, 1), (100, 3), (256, 1), (512, 4), (1000, 3), (640, 8)])
def test_fitting_plans_respect_every_device_limit(props, pass_name, hidden, batch):
    try:
        plan = cap.plan_pass(props, pass_name, hidden, batch)
    except NotSupported:
        assert props is SMALL and hidden >= 640
        return
    assert plan.grid <= props["sm_count"]
    assert plan.smem_bytes <= props["smem_per_block_optin"]
    assert plan.regs_per_thread * plan.threads <= props["regs_per_sm"]
    assert plan.regs_per_thread <= 255
    shape = plan.tile_shape()
    assert shape.blocks * shape.rows_per_block >= plan.rows_per_unit * hidden
    assert shape.padded_cols >= plan.reduction_length
    assert shape.tile_rows >= shape.rows_per_block
    assert 0 <= plan.reg_cols <= plan.cols_per_lane
    assert plan.units * batch <= plan.threads


def test_h100_capacity_targets():
    assert cap.largest_hidden(H100, batch=4) >= 1536
    assert cap.largest_hidden(H100, batch=4, pass_name="backward") >= 1536


def test_smaller_gpus_hold_less():
    big, mid, small = (cap.largest_hidden(p, batch=4) for p in (H100, A100, SMALL))
    assert big > mid > small > 0


def test_one_above_capacity_names_the_limit():
    largest = cap.largest_hidden(SMALL, batch=4, step=32)
    with pytest.raises(NotSupported, match=f"hidden_size={largest + 32}.*20 SMs"):
        cap.plan_pass(SMALL, "forward", largest + 32, 4)


def test_bidirectional_shares_the_grid_when_it_fits_else_runs_twice():
    both = cap.plan_pass(H100, "forward", 256, 4, num_directions=2)
    assert both.directions_per_launch == 2 and both.launches == 1
    one_by_one = cap.plan_pass(H100, "forward", 1536, 4, num_directions=2)
    assert one_by_one.directions_per_launch == 1 and one_by_one.launches == 2


def test_no_cooperative_launch_is_not_supported():
    props = dict(H100, cooperative_launch=False)
    with pytest.raises(NotSupported, match="cooperative"):
        cap.plan_pass(props, "forward", 128, 1)


def test_plan_config_adds_backward_only_for_training():
    config = LSTMConfig(64, 64, 2, True, "float32", 4, 10)
    assert set(cap.plan_config(H100, config, training=False)) == {"forward"}
    assert set(cap.plan_config(H100, config, training=True)) == {"forward", "backward"}


@pytest.mark.parametrize("rows, lanes", [(32, (16, 2)), (64, (32, 2)), (8, (8, 1)), (48, (16, 3)),
                                         (12, (4, 3)), (1, (1, 1)), (3, (1, 3))])
def test_lane_choice_pads_least(rows, lanes):
    assert cap.choose_lanes(rows) == lanes


def test_spill_backoff_moves_columns_to_shared_memory():
    plan = cap.plan_pass(H100, "forward", 1024, 4)
    fewer = plan.with_reg_cols(plan.reg_cols - 8)
    assert fewer.smem_bytes == plan.smem_bytes + 8 * plan.rows_per_lane * plan.threads * 4
    assert fewer.tile_shape() == plan.tile_shape()
    assert fewer.defines()["REG_COLS"] == plan.reg_cols - 8


def test_defines_match_the_kernel_check_lines():
    from ecornn.kernels import source
    text = source("persistent_lstm.cu")
    plan = cap.plan_pass(H100, "forward", 1024, 4)
    line = " ".join(f"-D{k}={v}" for k, v in plan.defines().items())
    assert line in text


def test_backward_vector_limit_is_named():
    with pytest.raises(NotSupported, match="dz vector alone needs 256 KB"):
        cap.plan_pass(H100, "backward", 1024, 16)
    cap.plan_pass(H100, "forward", 1024, 16)  # inference still fits


def test_rows_backward_plans_match_the_kernel_check_lines():
    """v7: the H100 plans of kernels/persistent_bwd_rows.cu that the check lines compile."""
    from ecornn.kernels import source
    text = source("persistent_bwd_rows.cu")
    for hidden, batch in ((1024, 8), (1024, 4), (512, 8), (1000, 3), (1024, 16)):
        plan = cap.plan_backward_rows(H100, hidden, batch)
        line = " ".join(f"-D{k}={v}" for k, v in plan.defines().items())
        assert line in text


def test_rows_backward_takes_over_where_the_grid_backward_does_not_fit():
    config = LSTMConfig(1024, 1024, 1, False, "float32", 7, 4)
    assert cap.plan_grid_config(H100, config, True)["backward"].kind == "rows"   # measured faster
    b8 = config.replace(batch=8)   # v45: the grid backward in 2 groups of 4 measured faster there
    assert cap.plan_grid_config(H100, b8, True)["backward"].kind == "grid"
    assert cap.plan_grid_config(H100, config, True, backward_by_rows=False)["backward"].kind == "grid"
    small = config.replace(input_size=512, hidden_size=512, batch=4)             # the grid backward
    assert cap.plan_grid_config(H100, small, True)["backward"].kind == "grid"
    assert cap.plan_grid_config(H100, small, True, backward_by_rows=True)["backward"].kind == "rows"
    b16 = config.replace(batch=16)   # the grid backward's 4H x B vector does not fit: rows
    assert cap.plan_grid_config(H100, b16, True)["backward"].kind == "rows"
    with pytest.raises(NotSupported, match="backward"):
        cap.plan_grid_config(H100, b16, True, backward_by_rows=False, backward_groups=False)
    grouped = cap.plan_grid_config(H100, b16, True, backward_by_rows=False)["backward"]   # v41: in 2 groups it fits
    assert (grouped.kind, grouped.batch_groups) == ("grid", 2)
    big = config.replace(input_size=1536, hidden_size=1536, batch=4)   # rows do not fit the registers
    assert cap.plan_backward_rows(H100, 1536, 4) is None
    assert cap.plan_grid_config(H100, big, True)["backward"].kind == "grid"


@pytest.mark.parametrize("pass_name, hidden, batch, tagged", [
    ("forward", 256, 1, False),    # 256 words: a few hot L2 lines, measured slower tagged
    ("backward", 256, 1, True),    # 4H = 1024 words
    ("forward", 512, 1, True),
    ("forward", 1024, 4, True),
    ("forward", 1024, 16, False),  # 8 loads per lane
    ("backward", 1024, 4, False),
])
def test_grid_plans_take_the_tagged_exchange_where_it_measured_faster(pass_name, hidden, batch, tagged):
    plan = cap.plan_pass(H100, pass_name, hidden, batch)
    assert plan.tagged is tagged and plan.defines()["TAGGED"] == int(tagged)
    red = 4 * plan.warps * plan.batch * plan.rows_per_lane * plan.lane_rows
    assert plan.with_exchange(not tagged).smem_bytes - plan.smem_bytes == (red if not tagged else -red)
