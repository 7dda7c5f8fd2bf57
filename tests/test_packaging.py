"""`pip install .` yields one import name, ecornn, with layouts and kernel sources inside it."""
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(out), str(ROOT)], check=True, capture_output=True, timeout=300)
    (path,) = out.glob("ecornn-*.whl")
    return path


def test_wheel_has_one_top_level_package(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"ecornn"}, tops
    assert "ecornn/layouts/gates.py" in names
    assert any(n.startswith("ecornn/kernels/") and n.endswith(".cu") for n in names)
    assert "ecornn/kernels/persistent_common.cuh" in names   # inlined by kernels.source()


def test_installed_wheel_imports_outside_the_checkout(wheel, tmp_path):
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
                    str(wheel)], check=True, capture_output=True, timeout=300)
    code = ("import ecornn, ecornn.layouts, ecornn.kernels; "
            "assert ecornn.kernels.sources(), 'no kernel sources'; "
            "assert 'sigmoidf_' in ecornn.kernels.source('persistent_lstm.cu'); print(ecornn.layouts.__file__)")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert str(target) in done.stdout
