"""v61's wgmma probe on the CPU: its source builds for sm_90a without spills (nvcc), every variant's shared memory fits
a block, and its table reads the rounds' medians."""
import sys
from pathlib import Path

import pytest

from tests.test_kernel_build import NVCC, SPILL, compile_report

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import probe_wgmma_v61 as probe  # noqa: E402

OPT_IN_SHARED = 227 * 1024   # sm_90's opt-in shared memory per block


@pytest.mark.kernel_build
@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
def test_the_probe_builds_for_sm_90a_without_spills():
    report = compile_report(probe.SOURCE, [], "sm_90a")
    spills = [(int(s), int(l)) for s, l in SPILL.findall(report)]
    assert len(spills) == len(probe.VARIANTS) and all(s == l == 0 for s, l in spills), report[-3000:]


def test_every_variant_fits_a_block_and_has_its_own_shared_memory():
    sizes = {v: probe.shared_bytes(v) for v in probe.VARIANTS}
    assert all(0 < n <= OPT_IN_SHARED for n in sizes.values()), sizes
    assert sizes[1] > sizes[0] and sizes[3] > sizes[2] and sizes[5] == sizes[3]   # A in shared memory


def test_the_table_reads_the_medians():
    rows = [{"variant": 0, "name": "mma.sync, A in registers", "swap": 0, "ns_per_step": [440.0, 430.0, 900.0],
             "cycles_per_step": [787.0, 780.0, 1600.0], "rel_err": 2e-7},
            {"variant": 2, "name": "wgmma, A in registers", "swap": 1, "ns_per_step": [598.0], "cycles_per_step": [1070.0],
             "rel_err": 0.8}]
    text = probe.markdown(rows).splitlines()
    assert text[2] == "| mma.sync, A in registers | - | 440.0 | 787 | 2.0e-07 |"
    assert text[3] == "| wgmma, A in registers | 1 | 598.0 | 1070 | 8.0e-01 |"
