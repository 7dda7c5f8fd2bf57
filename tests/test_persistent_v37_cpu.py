"""`persistent` v37 on the CPU: the in-kernel projection's x_{t+1} copied by cp.async at the step's top
(ASYNC_X_STAGING). The flag reaches the defines, the build cache key and the graph key; the kernel issues the
copies only with the projection, and X_ASYNC=0 compiles v36's loads. tests/test_persistent_v37_gpu.py checks the
numbers (bitwise the ablation's, and against float64)."""
import shutil
import subprocess
from pathlib import Path

import pytest

from ecornn.engines import persistent

KERNEL = Path(__file__).resolve().parents[1] / "kernels" / "persistent_mma.cu"
PROJECTION = "-DPASS=0 -DBF16=0 -DBATCH=8 -DNWARPS=8 -DM_TILES=2 -DK_TILES=8 -DREG_K_TILES=8 -DTAGGED=1"


def test_the_flag_reaches_the_defines_and_the_graph_key(monkeypatch):
    assert persistent.ASYNC_X_STAGING == "staged"
    assert "X_ASYNC" not in persistent._flag_defines()   # the kernel's default: copies once h is staged
    keys = {persistent._graph_mode("auto")}
    for mode, define in (("top", 1), (False, 0)):
        monkeypatch.setattr(persistent, "ASYNC_X_STAGING", mode)
        assert persistent._flag_defines()["X_ASYNC"] == define
        keys.add(persistent._graph_mode("auto"))
    assert len(keys) == 3


@pytest.mark.parametrize("bad", [True, "early", None])
def test_a_bad_mode_is_a_clear_error(monkeypatch, bad):
    monkeypatch.setattr(persistent, "ASYNC_X_STAGING", bad)
    with pytest.raises(ValueError, match=r"ASYNC_X_STAGING: expected one of \['staged', 'top', False\], got"):
        persistent._flag_defines()


def _ptx(*defines):
    out = subprocess.run(["nvcc", "-arch=sm_90", "-std=c++17", "-ptx", "-o", "-", *PROJECTION.split(), *defines,
                          str(KERNEL)], capture_output=True, text=True, check=True)
    return out.stdout


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_only_a_projection_plan_issues_the_copies():
    with_projection = _ptx("-DIN_K_TILES=8")
    assert "cp.async.cg.shared.global" in with_projection and "cp.async.wait_all" in with_projection
    assert "cp.async" not in _ptx("-DIN_K_TILES=8", "-DX_ASYNC=0")
    assert "cp.async.cg.shared.global" in _ptx("-DIN_K_TILES=8", "-DX_ASYNC=1")
    assert "cp.async" not in _ptx()   # no projection: xw comes from the GEMM
