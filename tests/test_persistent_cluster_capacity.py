"""Capacity rule of the cluster forward kernel (kernels/persistent_cluster.cu) on synthetic devices."""
import re

import pytest

from ecornn import NotSupported
from ecornn.engines import persistent_capacity as cap

H100, A100, SMALL = cap.h100_properties(), cap.a100_properties(), cap.small_gpu_properties(20)


@pytest.mark.parametrize("props", [H100, SMALL], ids=["h100", "20sm"])
@pytest.mark.parametrize("hidden, batch, dirs", [(1, 1, 1), (32, 4, 2), (100, 3, 2), (128, 1, 1), (256, 1, 1),
                                                 (256, 4, 2), (256, 8, 1), (384, 4, 1), (512, 4, 1)])
def test_fitting_cluster_plans_respect_every_device_limit(props, hidden, batch, dirs):
    plan = cap.plan_cluster(props, hidden, batch, dirs, max_cluster=16)
    assert plan.cluster in (8, 16) and plan.grid == plan.cluster * dirs <= props["sm_count"]
    assert plan.smem_bytes + cap.SMEM_RESERVED_PER_BLOCK <= props["smem_per_sm"]
    assert plan.smem_bytes <= props["smem_per_block_optin"]
    assert plan.regs_per_thread <= min(255, props["regs_per_sm"] // plan.threads)
    assert plan.units * batch <= plan.threads                       # one pointwise thread per (unit, b)
    shape = plan.tile_shape()
    assert shape.blocks * shape.rows_per_block >= 4 * hidden
    assert shape.padded_cols >= hidden and shape.tile_rows % 4 == 0
    assert 0 <= plan.reg_cols <= plan.cols_per_lane


def test_h256_fits_a_portable_cluster_and_h512_needs_16():
    assert cap.plan_cluster(H100, 256, 1).cluster == 8
    assert cap.plan_cluster(H100, 256, 4, 2).cluster == 8
    with pytest.raises(NotSupported, match="hidden_size=512.*cluster of 8 blocks"):
        cap.plan_cluster(H100, 512, 4)
    assert cap.plan_cluster(H100, 512, 4, max_cluster=16).cluster == 16


def test_too_large_for_any_cluster_names_the_limit():
    with pytest.raises(NotSupported, match=r"hidden_size=1024 \(fp32, 16.00 MiB\).*8/16 blocks"):
        cap.plan_cluster(H100, 1024, 4, max_cluster=16)


def test_a100_has_no_clusters():
    with pytest.raises(NotSupported, match="sm_90.*sm_80"):
        cap.plan_cluster(A100, 64, 1)


def test_directions_must_be_resident_together():
    tiny = cap.small_gpu_properties(12)
    cap.plan_cluster(tiny, 256, 1, 1)
    with pytest.raises(NotSupported, match="2 direction"):
        cap.plan_cluster(tiny, 256, 1, 2)
    with pytest.raises(NotSupported):             # 2 x 16 > 20 SMs
        cap.plan_cluster(SMALL, 512, 4, 2, max_cluster=16)


def test_register_columns_back_off_into_shared_memory():
    plan = cap.plan_cluster(H100, 512, 4, max_cluster=16)
    fewer = plan.with_reg_cols(plan.reg_cols - 8)
    assert fewer.smem_bytes == plan.smem_bytes + 8 * plan.rows_per_lane * plan.threads * 4
    assert fewer.tile_shape() == plan.tile_shape() and fewer.defines()["REG_COLS"] == plan.reg_cols - 8


@pytest.mark.parametrize("hidden, batch, dirs, cluster", [(256, 1, 1, 8), (256, 4, 2, 8), (128, 1, 1, 8),
                                                          (100, 3, 2, 8), (512, 4, 1, 16)])
def test_kernel_check_lines_cover_the_benchmarked_plans(hidden, batch, dirs, cluster):
    """The CI nvcc check (0 spills) compiles exactly the plans the tests and benchmark run."""
    from ecornn.kernels import source
    plan = cap.plan_cluster(H100, hidden, batch, dirs, max_cluster=cluster)
    assert plan.cluster == cluster
    checks = re.findall(r"^// ecornn-check:(.*)$", source("persistent_cluster.cu"), flags=re.M)
    wanted = {f"-D{k}={v}" for k, v in plan.defines().items()}
    assert any(set(line.split()) == wanted for line in checks), plan.defines()


def test_prediction_is_below_the_grid_kernel():
    for hidden, batch in ((128, 1), (256, 1), (256, 4)):
        grid = cap.predicted_us_per_step(cap.plan_pass(H100, "forward", hidden, batch))
        assert cap.predicted_cluster_us_per_step(cap.plan_cluster(H100, hidden, batch)) < grid
