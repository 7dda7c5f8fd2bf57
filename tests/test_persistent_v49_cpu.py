"""v49 on the CPU: the replay ring's publish on plain attribute reads and word stores (it runs on the benches' span,
before the launch). CuPy's own contiguity flag is read where an array has one; the ring's word view and its NumPy
slots are the same memory, tag last; an input the fetch cannot read as it is still becomes a copy."""
from types import SimpleNamespace

import numpy as np
import pytest

from ecornn.arrays import c_contiguous
from ecornn.engines import persistent_replay_ring as ring_module
from tests.test_persistent_v20_cpu import _Array, _inputs, ring  # noqa: F401 (fixture)


def test_c_contiguous_reads_cupys_own_flag_before_flags():
    assert c_contiguous(SimpleNamespace(_c_contiguous=False, flags=SimpleNamespace(c_contiguous=True))) is False
    assert c_contiguous(SimpleNamespace(_c_contiguous=True, flags=SimpleNamespace(c_contiguous=False))) is True
    assert c_contiguous(SimpleNamespace(flags=SimpleNamespace(c_contiguous=False))) is False


@pytest.mark.parametrize("make, contiguous", [(lambda a: a, True), (lambda a: a.T, False), (lambda a: a[:, ::2], False),
                                              (lambda a: a[1:], True)])
def test_c_contiguous_of_numpy_views(make, contiguous):
    assert c_contiguous(make(np.zeros((4, 6), np.float32))) is contiguous


def test_the_word_view_is_the_slots_memory(ring):
    for n in range(6):   # across the wrap of the 4 slots
        ring.publish(_inputs(n), lambda: None)
        slot = ring.slot_words[n % ring.slots]
        assert tuple(int(v) for v in slot) == (n, *(a.data.ptr for a in _inputs(n)))
        ring.launched()
        ring.done[0] = n + 1   # the emulated fetch of launch n
    assert ring.last_sources == tuple(a.data.ptr for a in _inputs(5))


def test_a_mismatch_written_into_the_host_words_is_seen(ring):
    ring.done[1] = 3
    with pytest.raises(ring_module.RingMismatch, match="fetch 2"):
        ring.publish(_inputs(0), lambda: None)


def test_a_full_ring_waits_for_the_fetches(ring):
    waits = []

    def wait():
        waits.append(ring.issued)
        ring.done[0] = ring.issued
    for n in range(ring.slots + 1):
        ring.publish(_inputs(n), wait)
        ring.launched()
    assert waits == [ring.slots]


@pytest.mark.parametrize("ptr, aligned, copied", [(64, True, False), (66, True, True), (66, False, False)])
def test_alignment_decides_a_copy_only_where_asked(ring, ptr, aligned, copied):
    src, dst = _Array(ptr), ring.buffers[0]
    assert ring_module._readable_as(src, dst, aligned) is not copied
    assert (ring_module._as_buffer_like(src, dst, aligned=aligned) is src) is not copied
