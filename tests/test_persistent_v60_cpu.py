"""`persistent` v60 on the CPU: a replay's host path before the launch, shortened.

- flag_changes counts assignments to the flag modules' attributes; persistent._graph_mode is rebuilt only after
  one, as a tuple that hashes once, so a replay neither rebuilds nor rehashes its ~60 flags.
- InputRing.publish takes the inputs' addresses by attribute reads where every input is a plain device array of its
  buffer's kind (a replay's usual case); anything else goes the way it went before (checked, converted or refused).
"""
import ast
import inspect
from types import SimpleNamespace

import numpy as np
import pytest

from ecornn import flag_changes, gpu_blas
from ecornn.engines import batch_pad, persistent, persistent_graph
from ecornn.engines import persistent_replay_ring as ring_module
from ecornn.engines import persistent_rules as rules
from tests.test_persistent_v20_cpu import _Array, _Device, ring  # noqa: F401 (fixture)


def test_an_assignment_to_a_counted_module_counts_and_a_restore_counts_again(monkeypatch):
    before = flag_changes.assignments
    monkeypatch.setattr(persistent, "POLL_BACKOFF_NS", 300)
    assert flag_changes.assignments == before + 1 and persistent.POLL_BACKOFF_NS == 300
    monkeypatch.undo()
    assert flag_changes.assignments == before + 2 and persistent.POLL_BACKOFF_NS != 300
    persistent.v60_probe = 1
    del persistent.v60_probe
    assert flag_changes.assignments == before + 4


def test_the_modules_the_mode_reads_are_all_counted():
    """Every module whose attributes _mode_items reads (persistent's own globals, rules., gpu_blas., batch_pad.)
    counts assignments: a flag of an uncounted module would leave a remembered mode stale."""
    tree = ast.parse(inspect.getsource(persistent._mode_items))
    read = {node.value.id for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)}
    modules = {"rules": rules, "gpu_blas": gpu_blas, "batch_pad": batch_pad}
    assert read == set(modules)
    for module in (persistent, *modules.values()):
        assert type(module) is flag_changes._CountedModule, module.__name__


@pytest.mark.parametrize("module, flag", [(persistent, "POLL_BACKOFF_NS"), (rules, "MAX_BATCH_PADDING"),
                                          (gpu_blas, "SPLIT_BY_WARPS"), (batch_pad, "PAD_BY_KERNEL")])
def test_the_mode_is_remembered_until_a_flag_changes(monkeypatch, module, flag):
    first = persistent._graph_mode("auto")
    assert persistent._graph_mode("auto") is first                        # no assignment: the same tuple
    assert persistent._graph_mode("rows") is not first and persistent._graph_mode("rows")[0] == "rows"
    value = getattr(module, flag)
    monkeypatch.setattr(module, flag, ("changed", value))
    changed = persistent._graph_mode("auto")
    assert changed != first and ("changed", value) in changed
    monkeypatch.setattr(module, flag, value)                               # set back: equal again, so the
    again = persistent._graph_mode("auto")                                 # graph captured then is found again
    assert again == first and hash(again) == hash(first) and again is not first


def test_the_remembered_mode_equals_one_built_now():
    assert persistent._graph_mode("auto") == persistent._mode_items("auto")


def test_a_hashed_tuple_is_a_tuple_that_hashes_once():
    items = (1, "a", None, (2.5, True))
    hashed = flag_changes.HashedTuple(items)
    assert hashed == items and hash(hashed) == hash(items) and isinstance(hashed, tuple)
    assert {items: "found"}[hashed] == "found" and {hashed: "found"}[items] == "found"
    assert flag_changes.HashedTuple() == ()


def test_a_graph_key_hashes_the_mode_once(monkeypatch):
    calls = []

    class Counting(flag_changes.HashedTuple):
        def __hash__(self):
            calls.append(1)
            return super().__hash__()
    mode = Counting((1, 2, 3))
    monkeypatch.setattr(persistent_graph, "_cp", lambda: SimpleNamespace(
        cuda=SimpleNamespace(runtime=SimpleNamespace(getDevice=lambda: 0))))
    a = np.zeros(2, np.float32)
    config = SimpleNamespace(key=lambda: ("config",))
    graphs = {persistent_graph._key(config, mode, a, a, a): "graph"}
    assert graphs[persistent_graph._key(config, mode, a, a, a)] == "graph" and len(calls) == 2


class _Plain(_Array):
    """A plain device array's stand-in as publish's attribute-read path sees it (CuPy's ``_c_contiguous``)."""

    @property
    def _c_contiguous(self):
        return self.flags.c_contiguous


class _Subclass(_Plain):
    pass


@pytest.fixture
def fast_ring(ring, monkeypatch):  # noqa: F811
    """v20's ring whose device arrays are _Plain (its ``_ndarray``), and which records any slow-path check."""
    ring._ndarray = _Plain
    slow = []
    real = ring_module._address_as
    monkeypatch.setattr(ring_module, "_address_as", lambda *a: slow.append(a[0]) or real(*a))
    monkeypatch.setattr(ring_module, "is_gpu_array", lambda a: isinstance(a, _Array))
    ring.slow = slow
    return ring


def _plain_inputs(n):
    return (_Plain(1024 * n + 16), _Plain(1024 * n + 32, (1, 2)), _Plain(1024 * n + 48, (1, 2)))


def test_plain_inputs_are_published_by_attribute_reads(fast_ring):
    device = _Device(fast_ring)
    for n in range(6):   # across the ring's wrap (4 slots)
        inputs = _plain_inputs(n)
        assert fast_ring.publish(inputs, lambda: None, 64 * n) == []
        fast_ring.launched()
        device.run_fetch()
        assert fast_ring.last_sources == tuple(a.data.ptr for a in inputs)
    assert device.fetched == [tuple(a.data.ptr for a in _plain_inputs(n)) for n in range(6)]
    assert device.deltas == [64 * n for n in range(6)] and fast_ring.slow == []


@pytest.mark.parametrize("odd", ["strided", "dtype", "subclass", "numpy"])
def test_other_inputs_go_the_checked_way(fast_ring, odd):
    x, h0, c0 = _plain_inputs(1)
    h0 = {"strided": _Plain(900, (1, 2), contiguous=False), "dtype": _Plain(900, (1, 2), np.float16),
          "subclass": _Subclass(900, (1, 2)), "numpy": np.zeros((1, 2), np.float32)}[odd]
    kept = fast_ring.publish((x, h0, c0), lambda: None)
    assert fast_ring.slow[0] is x and len(kept) == 3
    want = 900 if odd == "subclass" else 10_000   # a subclass is read where it lies; the others are copied
    assert tuple(fast_ring.slot_words[0][1:4]) == (x.data.ptr, want, c0.data.ptr)


def test_a_size_the_graph_was_not_captured_for_is_refused(fast_ring):
    x, h0, c0 = _plain_inputs(1)
    with pytest.raises(ValueError, match="captured for"):
        fast_ring.publish((_Plain(900, (3, 2)), h0, c0), lambda: None)


def test_an_input_read_by_reference_off_16_bytes_is_copied(fast_ring):
    fast_ring.by_reference = (True, False, False)
    fast_ring._expected = tuple((b.dtype, b.size, r) for b, r in zip(fast_ring.buffers, fast_ring.by_reference))
    x, h0, c0 = _plain_inputs(1)
    assert fast_ring.publish((x, h0, c0), lambda: None) == []
    fast_ring.launched()
    off = _Plain(2048 + 8)
    fast_ring.publish((off, h0, c0), lambda: None)
    assert fast_ring.slow and int(fast_ring.slot_words[1][1]) != off.data.ptr


def test_the_claim_still_waits_and_a_mismatch_still_raises(fast_ring):
    for n in range(4):
        fast_ring.publish(_plain_inputs(n), lambda: None)
        fast_ring.launched()
    with pytest.raises(RuntimeError, match="4 launches issued, 0 fetched"):
        fast_ring.publish(_plain_inputs(4), lambda: None)
    device = _Device(fast_ring)
    for _ in range(5):   # the four queued, then a launch around the ring
        device.run_fetch()
    with pytest.raises(ring_module.RingMismatch):
        fast_ring.publish(_plain_inputs(5), lambda: None)


def test_fp32_itself_reads_dw_hh_farthest_from_float64_when_one_h0_column_is_scaled_by_1e3(rng):
    """v57's open question: with one batch column of h0 scaled by 1e3, fp32 training's dW_hh read 7e-5 from float64
    on the GPU. The NumPy reference does so in fp32 too: that column's first pre-activations are sums of terms ~1e3
    that cancel to O(1) where a gate is not saturated, so fp32 rounds them ~1e-4 off and their gates' derivatives up
    to 2% (an fp32 forward under a float64 backward reads the same dW_hh error). dW_hh weights those derivatives by
    h0's 1e3. So the GPU test bounds dW_hh there by the fp32 reference's own error.
    v61: over 460 seeds (CI's seed 3819805309 read dW_hh 8.5e-6) the fp32 reference's dW_hh error ran 1e-6 to 3.4e-4,
    median 3.9e-5, and was always the largest, ≥ 2.2x every other result's. dh0 (the gradient into the scaled column)
    reached 3.4e-5 in 4 seeds; every other result stayed ≤ 5.5e-6."""
    from ecornn import LSTMConfig, lstm_backward, lstm_forward
    from tests.helpers import random_problem, rel_err
    config = LSTMConfig(256, 256, 1, False, "float32", 8, 32)
    weights, x, h0, c0 = random_problem(rng, config)
    h0[:, 2] *= 1e3
    dy = rng.standard_normal(config.output_shape).astype(np.float32)
    runs = []
    for dtype in (np.float32, np.float64):
        w = [tuple(np.asarray(a, dtype) for a in layer) for layer in weights]
        out = lstm_forward(x.astype(dtype), w, h0.astype(dtype), c0.astype(dtype), strategy="reference",
                           training=True)
        grads = lstm_backward(out.reserve, dy.astype(dtype))
        runs.append([out.y, out.h, out.c, grads.dx, grads.dh0, grads.dc0, *grads.dweights[0]])
    errors = [rel_err(a, b) for a, b in zip(*runs)]
    others = errors[:4] + errors[5:7] + errors[8:]   # 4: dh0, 7: dW_hh
    assert errors[7] > max(errors[:7] + errors[8:]) and max(others) < 1e-5, errors
