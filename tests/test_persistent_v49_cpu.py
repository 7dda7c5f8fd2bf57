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


def _nodes(monkeypatch, ring, sizes, by_reference):
    """(kernel name, its arguments) of each node a capture's fetch issues, for buffers of ``sizes`` bytes."""
    log = []
    monkeypatch.setattr(ring_module, "_fetch_kernels_for", lambda device: tuple(
        (lambda grid, block, args, name=name: log.append((name, grid, block, args)))
        for name in ("fetch_slot", "copy_current", "fetch_and_copy")))
    buffers = [_Array(16 * (k + 1), (n // 4,)) for k, n in enumerate(sizes)]
    made = ring_module.InputRing(buffers, slots=4, host_words=lambda n: ring.host, by_reference=by_reference)
    made.capture_fetch()
    return made, log


@pytest.mark.parametrize("sizes, by_reference, one_block", [
    ((8 << 20, 32768, 32768), (True, False, False), True),      # fp32 H=1024 B=8: x read by reference, h0 c0 32 KB
    ((8 << 20, 65536, 65536), (True, False, False), True),      # B=16: 64 KB each, the block's last words
    ((8 << 20, 65540, 65540), (True, False, False), False),     # a word past them
    ((262144, 1024, 1024), (False, False, False), False),       # x copied (256 KB): many blocks copy it
    ((4096, 1024, 1024), (False, False, False), True),          # everything small
])
def test_the_fetch_and_its_copies_are_one_node_where_the_copies_are_few(ring, monkeypatch, sizes, by_reference,
                                                                       one_block):
    made, log = _nodes(monkeypatch, ring, sizes, by_reference)
    assert made.copies_in_one_block() is one_block
    assert [name for name, *_ in log] == (["fetch_and_copy"] if one_block else ["fetch_slot", "copy_current"])
    mask = sum(1 << k for k, b in enumerate(by_reference) if b)
    name, grid, block, args = log[-1]
    copy_args = args[4:] if one_block else args   # (current, mask, buffer, bytes, ...)
    assert copy_args[0] is made.current and int(copy_args[1]) == mask
    assert [int(a) if k % 2 else a for k, a in enumerate(copy_args[2:])] == [
        x for b in made.buffers for x in (b, b.nbytes)]
    if one_block:
        assert grid == (1,) and block == (ring_module.ONE_BLOCK_THREADS,)
        assert int(args[0]) == made.host.device_ptr and args[1] is made.state and int(args[3]) == made.slots


def test_the_one_block_node_is_the_ablations_two_when_switched_off(ring, monkeypatch):
    monkeypatch.setattr(ring_module, "FETCH_AND_COPY", False)
    made, log = _nodes(monkeypatch, ring, (4096, 1024, 1024), (False, False, False))
    assert [name for name, *_ in log] == ["fetch_slot", "copy_current"]


def test_one_block_covers_what_the_kernel_loads():
    """ONE_BLOCK_COPY_BYTES is fetch_and_copy's kFewWords words of 16 bytes per thread of ONE_BLOCK_THREADS."""
    import re
    from ecornn.kernels import KERNEL_DIR
    text = (KERNEL_DIR / "replay_inputs.cu").read_text()
    few = int(re.search(r"constexpr int kFewWords = (\d+);", text).group(1))
    bound = int(re.search(r"__launch_bounds__\((\d+), 1\) fetch_and_copy", text).group(1))
    assert bound == ring_module.ONE_BLOCK_THREADS
    assert ring_module.ONE_BLOCK_COPY_BYTES == few * 16 * ring_module.ONE_BLOCK_THREADS
