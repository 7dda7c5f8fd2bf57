"""Every CUDA source in kernels/ compiles with nvcc for sm_80 and sm_90; persistent kernels don't spill.

A source lists its compile-time constants in lines ``// ecornn-check: -DNAME=V ...`` (one compile per
line and architecture) and carries ``// ecornn-persistent`` when any spill is a failure.
"""
import re
import shutil
import subprocess

import pytest

from ecornn.kernels import sources

NVCC = shutil.which("nvcc")
ARCHS = ("sm_80", "sm_90")
SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
STACK = re.compile(r"(\d+) bytes stack frame")


def variants():
    for path in sources():
        text = path.read_text()
        lines = re.findall(r"^// ecornn-check:(.*)$", text, flags=re.M) or [""]
        persistent = "// ecornn-persistent" in text
        for defines in lines:
            for arch in ARCHS:
                yield pytest.param(path, defines.split(), arch, persistent,
                                   id=f"{path.name}-{arch}-{'_'.join(defines.split()) or 'default'}")


def compile_report(path, defines, arch):
    cmd = [NVCC, f"-arch={arch}", "-std=c++17", "-Xptxas", "-v", "-c", "-o", "/dev/null",
           *defines, str(path)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"nvcc failed: {' '.join(cmd)}\n{done.stderr[-4000:]}"
    return done.stderr


@pytest.mark.kernel_build
@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
@pytest.mark.parametrize("path, defines, arch, persistent", list(variants()))
def test_kernel_compiles(path, defines, arch, persistent):
    report = compile_report(path, defines, arch)
    assert "ptxas info" in report, report[-2000:]
    if persistent:
        spills = [(int(s), int(l)) for s, l in SPILL.findall(report)]
        assert spills and all(s == 0 and l == 0 for s, l in spills), \
            f"persistent kernel spills ({arch}, {defines}):\n{report[-3000:]}"


def test_there_are_kernels_to_check():
    assert sources(), "kernels/ has no .cu sources"
