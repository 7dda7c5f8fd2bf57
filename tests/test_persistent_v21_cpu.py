"""v21 on the CPU: a replayed graph's tensor-core kernel reads the caller's x at the address the
replay ring fetched (persistent_graph.KERNEL_READS_X) instead of a copy. Checked here: which
configurations qualify (persistent.kernel_reads_x), the ring's copy mask and its alignment rule,
that a capture whose forward did not take x up fails (its buffer would never be written), and that
the engine hands the ring's words to layer 0's kernel only. The GPU tests run the kernel itself."""
from types import SimpleNamespace

import numpy as np
import pytest

from ecornn import LSTMConfig, LayerWeights
from ecornn.engines import persistent, persistent_graph
from ecornn.engines import persistent_replay_ring as ring_module
from ecornn.engines import reference
from tests import test_persistent_emulated as grid_emulation
from tests.helpers import random_problem, rel_err
from tests.test_persistent_mma_emulated import HALF_TOL, _dtype, cpu_engine  # noqa: F401 (fixture)
from tests.test_persistent_v20_cpu import _Array, ring  # noqa: F401 (fixture)


def _x_like(dtype):
    return SimpleNamespace(dtype=SimpleNamespace(name=dtype))


@pytest.mark.parametrize("dtype, hidden, layers, bidir, batch, reads", [
    ("bfloat16", 1024, 1, False, 4, False),   # v51: half the projection in the kernel, a GEMM reads x too
    ("bfloat16", 512, 1, False, 4, True),     # tagged, the whole projection in the kernel
    ("float16", 256, 3, True, 4, True),
    ("bfloat16", 100, 1, False, 4, False),    # input size not a multiple of 8: the projection is a GEMM
    ("float16", 1024, 1, False, 8, True),     # v26: tagged with the projection at B=8
    ("float16", 1024, 1, False, 16, True),    # v30: two groups of 8, each tagged with the projection
    ("float16", 1024, 1, False, 32, False),   # grid.sync plan (v30: groups of 16): the GEMM stays (v12's rule)
    ("bfloat16", 1024, 1, False, 2, False),   # B < 4: the GEMM stays
    ("bfloat16", 2048, 1, False, 4, False),   # W_ih does not fit in shared memory
    ("float32", 1024, 1, False, 4, False),    # fp32 kernels read fp32 x or xw
])
def test_which_forwards_read_x_in_the_kernel(cpu_engine, dtype, hidden, layers, bidir, batch, reads):
    config = LSTMConfig(hidden, hidden, layers, bidir, dtype, batch, 16)
    assert persistent.kernel_reads_x(config, _x_like(dtype)) is reads


def test_x_of_another_dtype_is_converted_first_so_it_is_copied(cpu_engine, monkeypatch):
    config = LSTMConfig(1024, 1024, 1, False, "bfloat16", 4, 16)
    assert not persistent.kernel_reads_x(config, _x_like("float32"))
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", False)
    assert not persistent.kernel_reads_x(config, _x_like("bfloat16"))


def _kernels_logged(monkeypatch, log):
    def kernel(name):
        return lambda grid, block, args: log.append((name, args))
    monkeypatch.setattr(ring_module, "_fetch_kernels_for", lambda device: (kernel("fetch"), kernel("copy")))


@pytest.mark.parametrize("by_reference, mask", [((False, False, False), 0), ((True, False, False), 1)])
def test_the_copy_node_skips_inputs_read_by_reference(ring, monkeypatch, by_reference, mask):
    log = []
    _kernels_logged(monkeypatch, log)
    made = ring_module.InputRing(ring.buffers, slots=4, host_words=lambda n: ring.host, by_reference=by_reference)
    made.capture_fetch()
    assert [name for name, _ in log] == ["fetch", "copy"]
    copy_args = log[1][1]
    assert copy_args[0] is made.current and int(copy_args[1]) == mask
    assert copy_args[2:] == (made.buffers[0], 32, made.buffers[1], 8, made.buffers[2], 8)


def test_x_read_by_reference_must_be_16_byte_aligned(ring):
    made = ring_module.InputRing(ring.buffers, slots=4, host_words=lambda n: ring.host,
                                 by_reference=(True, False, False))
    x, h0, c0 = _Array(1040), _Array(2002, (1, 2)), _Array(3004, (1, 2))
    assert [a.data.ptr for a in made.publish((x, h0, c0), lambda: None)] == [1040, 2002, 3004]
    made.launched()
    shifted = _Array(1042)   # a view 2 bytes in: the kernel's 16-byte loads need a copy
    kept = made.publish((shifted, h0, c0), lambda: None)
    assert kept[0] is not shifted and kept[0].data.ptr == ring.copies[-1].data.ptr and kept[1] is h0
    assert tuple(made.slot_words[1]) == (1, kept[0].data.ptr, 2002, 3004, 0)   # v56: no output delta


def test_reference_is_given_for_the_buffer_of_a_by_reference_input_only(ring):
    made = ring_module.InputRing(ring.buffers, slots=4, host_words=lambda n: ring.host,
                                 by_reference=(True, False, False))
    assert made.reference(_Array(99), 0) is None                      # not the buffer
    assert made.reference(made.buffers[1], 1) is None                 # h0 is copied
    with pytest.raises(RuntimeError, match=r"inputs \[0\] were to be read by reference"):
        made.check_references()
    assert made.reference(made.buffers[0], 0) is made.current
    made.check_references()


def test_a_capture_whose_forward_ignores_the_reference_fails(monkeypatch):
    """captured(): the ring is visible to the forward while it runs (input_reference), and a
    by-reference input it did not take up fails the capture (recorded: the call stays eager)."""
    log = []

    class FakeStream:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def begin_capture(self):
            log.append("begin")

        def end_capture(self):
            log.append("end")
            return "g"
    stream = FakeStream()

    class FakeRing:
        def __init__(self, takes):
            self.takes, self.current = takes, object()

        def capture_fetch(self, branch=None):
            log.append("fetch")

        def reference(self, array, index):
            return self.current if self.takes else None

        def check_references(self):
            if not self.takes:
                raise RuntimeError("not taken up")

    def run(x):
        log.append(("run", persistent_graph.input_reference(x)))
        return "out"
    taking = FakeRing(True)
    assert persistent_graph.captured(stream, run, "x", ring=taking) == ("g", "out")
    assert log == ["begin", "fetch", ("run", taking.current), "end"]
    log.clear()
    with pytest.raises(RuntimeError, match="not taken up"):
        persistent_graph.captured(stream, run, "x", ring=FakeRing(False))
    assert log == ["begin", "fetch", ("run", None), "end"] and not persistent_graph._capturing
    assert persistent_graph.input_reference("x") is None   # no capture in progress


def test_the_engine_hands_the_ring_words_to_layer_zero_only(cpu_engine, rng, monkeypatch):
    """_forward_eager under a capture that reads x by reference: layer 0's tensor-core kernel gets
    the ring's words as x_at, the later layers read y; the results are those of the emulation."""
    config = LSTMConfig(24, 24, 2, False, "float16", 4, 3)
    weights, x, h0, c0 = random_problem(rng, config)
    weights = [LayerWeights(*(np.asarray(a, np.float32).astype(_dtype("float16")) for a in w)) for w in weights]
    x, h0, c0 = (np.asarray(a, np.float32).astype(np.float16) for a in (x, h0, c0))
    assert persistent.kernel_reads_x(config, x)
    words, asked, launched = object(), [], []
    fake_ring = SimpleNamespace(reference=lambda a, index: asked.append(a) or (words if len(asked) == 1 else None),
                                output_reference=lambda buffer: None)   # v56: outputs not moved here
    emulated = grid_emulation._emulated_launch

    def launch(plan, args, directions, *rest, x_at=None, **kw):
        launched.append(x_at)
        return emulated(plan, args, directions, *rest, **kw)
    monkeypatch.setattr(persistent, "_launch", launch)
    monkeypatch.setattr(persistent_graph, "_capturing", [fake_ring])
    got = persistent._forward_eager(config, x, weights, h0, c0)
    assert launched == [words, None] and len(asked) == 2
    f64 = lambda a: np.asarray(a, np.float32).astype(np.float64)  # noqa: E731
    want = reference.forward(config.replace(dtype="float64"), f64(x), [LayerWeights(*map(f64, w)) for w in weights],
                             f64(h0), f64(c0))
    for g, w in zip(got[:3], want[:3]):
        assert rel_err(f64(g), w) <= HALF_TOL


def test_16bit_x_off_alignment_is_copied_before_the_kernel_reads_it(monkeypatch):
    """_storage16 hands 16-bit x to the tensor-core kernel as it is (v17), which loads it 16 bytes at
    a time: x 2 bytes off alignment (found by the v21 GPU test: misaligned address) becomes a copy."""
    monkeypatch.setattr(persistent, "_cp", lambda: np)
    base = np.zeros(8 * 40 + 8, np.float16)
    start = (-base.__array_interface__["data"][0] % 16) // 2   # the first 16-byte aligned element
    aligned = base[start:start + 320].reshape(8, 40)
    shifted = base[start + 1:start + 321].reshape(8, 40)
    shifted[...] = np.arange(320).reshape(8, 40)
    got = persistent._storage16(shifted, "float16")
    assert got.__array_interface__["data"][0] % 16 == 0 and np.array_equal(got, shifted)
    same = persistent._storage16(aligned, "float16")
    assert same.__array_interface__["data"][0] == aligned.__array_interface__["data"][0]
