"""v49 on the CPU: the replay ring's publish on plain attribute reads and word stores (it runs on the benches' span,
before the launch). CuPy's own contiguity flag is read where an array has one, and 16-byte alignment decides a copy
only where asked. The slots across the ring's wrap, the wait for fetches and the mismatch are v20's and v21's tests
(test_persistent_v20_cpu, test_persistent_v21_cpu), which run the rewritten publish as they are."""
from types import SimpleNamespace

import numpy as np
import pytest

from ecornn.arrays import c_contiguous
from ecornn.engines import persistent_replay_ring as ring_module
from tests.test_persistent_v20_cpu import _Array, ring  # noqa: F401 (fixture)


def test_c_contiguous_reads_cupys_own_flag_before_flags():
    assert c_contiguous(SimpleNamespace(_c_contiguous=False, flags=SimpleNamespace(c_contiguous=True))) is False
    assert c_contiguous(SimpleNamespace(_c_contiguous=True, flags=SimpleNamespace(c_contiguous=False))) is True
    assert c_contiguous(SimpleNamespace(flags=SimpleNamespace(c_contiguous=False))) is False


@pytest.mark.parametrize("make, contiguous", [(lambda a: a, True), (lambda a: a.T, False), (lambda a: a[:, ::2], False),
                                              (lambda a: a[1:], True)])
def test_c_contiguous_of_numpy_views(make, contiguous):
    assert c_contiguous(make(np.zeros((4, 6), np.float32))) is contiguous


@pytest.mark.parametrize("ptr, aligned, copied", [(64, True, False), (66, True, True), (66, False, False)])
def test_alignment_decides_a_copy_only_where_asked(ring, ptr, aligned, copied):
    src, dst = _Array(ptr), ring.buffers[0]
    assert ring_module._readable_as(src, dst, aligned) is not copied
    assert (ring_module._as_buffer_like(src, dst, aligned=aligned) is src) is not copied
