"""ecornn.kernels.source() inlines local headers: NVRTC gets a self-contained program text."""
import hashlib
import re
import shutil
import subprocess

import pytest

import ecornn.kernels as kernels
from ecornn.kernels import source, sources

LOCAL_INCLUDE = re.compile(r'^\s*#\s*include\s*"', flags=re.M)


def _body(header_text):
    """A header's lines that must appear verbatim in the inlined text."""
    return [line for line in header_text.splitlines() if line.strip()]


@pytest.mark.parametrize("name", ["persistent_lstm.cu", "persistent_cluster.cu"])
def test_persistent_kernels_inline_the_common_header(name):
    raw = (kernels.KERNEL_DIR / name).read_text()
    assert '#include "persistent_common.cuh"' in raw
    text = source(name)
    assert not LOCAL_INCLUDE.search(text)
    header = (kernels.KERNEL_DIR / "persistent_common.cuh").read_text()
    assert "\n".join(_body(header)) in "\n".join(_body(text))
    assert text.count("#define ECORNN_PERSISTENT_COMMON_CUH") == 1


@pytest.mark.parametrize("path", sources(), ids=lambda p: p.name)
def test_no_local_include_survives(path):
    assert not LOCAL_INCLUDE.search(source(path.name))


def test_line_directives_keep_the_main_file_numbering():
    text = source("persistent_lstm.cu")
    raw = (kernels.KERNEL_DIR / "persistent_lstm.cu").read_text().splitlines()
    lines = text.splitlines()
    resumed = [(i, int(m.group(1))) for i, line in enumerate(lines)
               if (m := re.fullmatch(r'#line (\d+) "persistent_lstm.cu"', line))]
    assert resumed
    for i, n in resumed:
        assert lines[i + 1:i + 4] == raw[n - 1:n + 2]


@pytest.fixture
def kdir(tmp_path, monkeypatch):
    monkeypatch.setattr(kernels, "KERNEL_DIR", tmp_path)
    return tmp_path


def inlined(kdir, **files):
    """source("k.cu") of a kernels/ holding files {name with "_" for ".": text}."""
    for name, text in files.items():
        (kdir / name.replace("_", ".")).write_text(text)
    return source("k.cu")


def test_recursive_and_each_header_once(kdir):
    text = inlined(kdir, b_cuh="int from_b;\n", a_cuh='#include "b.cuh"\nint from_a;\n',
                   k_cu='#include <cooperative_groups.h>\n#include "a.cuh"\n  #include "b.cuh"\nint k;\n')
    assert text.count("int from_b;") == 1 and text.count("int from_a;") == 1
    assert text.index("int from_b;") < text.index("int from_a;") < text.index("int k;")
    assert "#include <cooperative_groups.h>" in text
    assert not LOCAL_INCLUDE.search(text)


def test_include_cycle_terminates(kdir):
    text = inlined(kdir, a_cuh='#include "b.cuh"\nint from_a;\n', b_cuh='#include "a.cuh"\nint from_b;\n',
                   k_cu='#include "a.cuh"\n')
    assert text.count("int from_a;") == 1 and text.count("int from_b;") == 1


@pytest.mark.parametrize("line", ['#include "missing.cuh"', '#include "../persistent_common.cuh"',
                                  '#include "sub/x.cuh"'])
def test_unknown_local_header_raises(kdir, line):
    with pytest.raises(ValueError, match=r'kernels/k\.cu:2: #include ".*" names no file in'):
        inlined(kdir, k_cu=f"// top\n{line}\n")


def test_text_and_cache_key_change_with_a_header(kdir):
    before = inlined(kdir, h_cuh="int v = 1;\n", k_cu='#include "h.cuh"\n')
    after = inlined(kdir, h_cuh="int v = 2;\n")
    assert "int v = 2;" in after
    assert hashlib.sha1(after.encode()).hexdigest() != hashlib.sha1(before.encode()).hexdigest()


NVCC = shutil.which("nvcc")


@pytest.mark.kernel_build
@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
@pytest.mark.parametrize("name", ["persistent_lstm.cu", "persistent_cluster.cu"])
def test_inlined_text_compiles_alone_to_the_same_cubin(name, tmp_path):
    """The text NVRTC gets builds without kernels/ on any path, to the cubin of the file itself."""
    defines = re.findall(r"^// ecornn-check:(.*)$", source(name), flags=re.M)[0].split()
    alone = tmp_path / name
    alone.write_text(source(name))

    def cubin(path, out):
        cmd = [NVCC, "-arch=sm_90", "-std=c++17", "-cubin", "-o", str(out), *defines, str(path)]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        return out.read_bytes()

    assert cubin(alone, tmp_path / "alone.cubin") == cubin(kernels.KERNEL_DIR / name, tmp_path / "file.cubin")
