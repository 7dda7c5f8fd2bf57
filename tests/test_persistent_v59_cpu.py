"""`persistent` v59 on the CPU: an inference capture's front branch (persistent_graph.FrontBranch). The copy of h0 and
c0 and the first exchange memset are issued on a side stream forked after the ring's fetch, x's copy (where it has
one) stays in line, an input read by reference has no copy node (its buffer holds NaN from the ring's making), and
the engine joins the branch before the first reader of h0, c0 or the zeroed words."""
import inspect
from types import SimpleNamespace

import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent, persistent_graph
from ecornn.engines import persistent_replay_ring as ring_module
from tests.test_persistent_v20_cpu import ring  # noqa: F401 (fixture)
from tests.test_persistent_v56_cpu import assert_graph_key_holds


class _Stream:
    """A stream stand-in: a context that makes it the current one (``where``), and its waits logged."""

    def __init__(self, name, log, where):
        self.name, self.log, self.where = name, log, where

    def __enter__(self):
        self.where.append(self.name)
        return self

    def __exit__(self, *exc):
        self.where.pop()
        return False

    def wait_event(self, event):
        self.log.append(("wait", self.name, event.recorded_on))

    def begin_capture(self):
        self.log.append(("begin", self.name))

    def end_capture(self):
        self.log.append(("end", self.name))
        return "graph"


class _Event:
    def __init__(self, log, **kwargs):
        self.log, self.recorded_on = log, None

    def record(self, stream):
        self.recorded_on = stream.name
        self.log.append(("record", stream.name))


@pytest.fixture
def streams(monkeypatch):
    """(log, where, main, side) with persistent_graph's CuPy events made by the stand-ins."""
    log, where = [], ["main"]
    monkeypatch.setattr(persistent_graph, "_cp", lambda: SimpleNamespace(
        cuda=SimpleNamespace(Event=lambda **kw: _Event(log, **kw), Device=lambda: SimpleNamespace(id=0))))
    main, side = _Stream("main", log, where), _Stream("side", log, where)
    monkeypatch.setattr(persistent_graph, "_side_stream", lambda: side)
    return log, where, main, side


def _kernels_on(monkeypatch, log, where):
    def kernel(name):   # a copy's byte counts (its arguments after the mask: buffer, size, ...)
        return lambda grid, block, args: log.append(
            (name, where[-1], tuple(int(a) for a in args[3::2]) if name == "copy" else ()))
    monkeypatch.setattr(ring_module, "_fetch_kernels_for", lambda device: (kernel("fetch"), kernel("copy")))


def _made(ring, by_reference):  # noqa: F811 (the fixture)
    return ring_module.InputRing(ring.buffers, slots=4, host_words=lambda n: ring.host, by_reference=by_reference)


def test_the_states_are_copied_on_the_branch_and_x_read_by_reference_not_at_all(ring, streams, monkeypatch):  # noqa: F811
    log, where, main, side = streams
    _kernels_on(monkeypatch, log, where)
    made = _made(ring, (True, False, False))
    made.capture_fetch(persistent_graph.FrontBranch(main, side))
    assert log[0][:2] == ("fetch", "main")
    assert log[1:] == [("record", "main"), ("wait", "side", "main"), ("copy", "side", (0, 8, 8))]
    assert made.buffers[0].filled == (np.dtype(np.uint8), 0xff)   # NaN for good: read after a wrong tag only
    assert not hasattr(made.buffers[1], "filled") and not hasattr(made.buffers[2], "filled")


def test_a_copied_x_stays_in_line_before_the_projection(ring, streams, monkeypatch):  # noqa: F811
    log, where, main, side = streams
    _kernels_on(monkeypatch, log, where)
    made = _made(ring, (False, False, False))
    made.capture_fetch(persistent_graph.FrontBranch(main, side))
    assert [entry for entry in log if entry[0] == "copy"] == [("copy", "main", (32, 0, 0)), ("copy", "side", (0, 8, 8))]
    assert not any(hasattr(b, "filled") for b in made.buffers)


def test_without_a_branch_one_copy_node_as_before(ring, streams, monkeypatch):  # noqa: F811
    log, where, main, side = streams
    _kernels_on(monkeypatch, log, where)
    made = _made(ring, (True, False, False))
    made.capture_fetch()
    assert [entry[:2] for entry in log] == [("fetch", "main"), ("copy", "main")]
    assert log[1][2] == (32, 8, 8)   # x's buffer NaN-filled after a wrong tag (mask bit 0, checked in v21's test)


class _Ring:
    def __init__(self, log):
        self.log, self.current = log, object()

    def capture_fetch(self, branch=None):
        self.log.append(("fetch", branch))
        if branch is not None:
            branch.fork()

    def check_references(self):
        self.log.append(("checked",))


def test_captured_opens_the_branch_for_the_forward_and_joins_it_before_the_end(streams):
    log, where, main, side = streams
    fake_ring = _Ring(log)
    seen = []

    def run():
        with persistent_graph.on_front_branch():
            seen.append(where[-1])
        persistent_graph.join_front_branch()
        persistent_graph.join_front_branch()   # once only
        with persistent_graph.on_front_branch():
            seen.append(where[-1])
        return "outputs"
    graph, result = persistent_graph.captured(main, run, ring=fake_ring, front_branch=True)
    assert (graph, result, seen) == ("graph", "outputs", ["side", "main"])
    assert [e for e in log if e[0] in ("wait", "end")] == [("wait", "side", "main"), ("wait", "main", "side"),
                                                            ("end", "main")]
    assert not persistent_graph._front


def test_a_forward_that_never_joins_is_joined_at_the_end_and_no_branch_without_the_flag(streams):
    log, where, main, side = streams
    persistent_graph.captured(main, lambda: None, ring=_Ring(log), front_branch=True)
    assert [e for e in log if e[0] in ("wait", "end")][-2:] == [("wait", "main", "side"), ("end", "main")]
    log.clear()
    persistent_graph.captured(main, lambda: None, ring=_Ring(log))
    assert ("fetch", None) in log and not any(e[0] == "wait" for e in log)
    log.clear()
    persistent_graph.captured(main, lambda: None, front_branch=True)   # no ring: the branch forks at the start
    assert log[:3] == [("begin", "main"), ("record", "main"), ("wait", "side", "main")]


def test_a_failed_forward_leaves_no_branch_open(streams):
    log, where, main, side = streams

    def run():
        raise ValueError("boom")
    with pytest.raises(ValueError):
        persistent_graph.captured(main, run, ring=_Ring(log), front_branch=True)
    assert not persistent_graph._front


@pytest.fixture
def joins(monkeypatch):
    joined = []
    monkeypatch.setattr(persistent_graph, "join_front_branch", lambda: joined.append(True))
    monkeypatch.setattr(persistent, "_cp", lambda: np)
    return joined


@pytest.mark.parametrize("dtype, contiguous, states16, joined", [
    ("float32", True, False, False),   # the kernels read them as they are
    ("float16", True, True, False),
    ("float16", True, False, True),    # cast to fp32 now
    ("float32", False, False, True),   # copied now
    ("float16", False, True, True),
])
def test_the_states_join_the_branch_before_a_cast_or_copy_reads_them(joins, dtype, contiguous, states16, joined):
    h0 = np.ones((2, 3, 4), dtype)
    h0 = h0 if contiguous else h0.transpose(0, 2, 1)
    h, c = persistent._states_for_kernels(h0, np.ones((2, 3, 4), dtype), states16)
    assert bool(joins) == joined
    assert h.flags.c_contiguous and h.dtype == (np.dtype(dtype) if states16 else np.float32)
    if not joined:
        assert h is h0


def test_the_split_joins_before_its_h0_product_only(joins, monkeypatch):
    monkeypatch.setattr(persistent, "_initial_recurrence", lambda h0, preps: ("product", len(joins)))
    h0 = np.ones((1, 2, 3), np.float32)
    assert persistent.split_h0(h0, [], False) is h0 and not joins
    assert persistent.split_h0(h0, [], True) == ("product", 1)
    monkeypatch.setattr(persistent, "H0_IN_PRODUCT", False)
    assert persistent.split_h0(h0, [], False) == ("product", 2)


@pytest.mark.parametrize("function, before", [
    (persistent._launch, "for launch in range"), (persistent._launch_cluster, "kern(("),
    (persistent._forward_eager, "batch_pad.pad_inputs((x, h0, c0)")])
def test_every_kernel_launch_and_the_padding_join_first(function, before):
    source = inspect.getsource(function)
    assert -1 < source.index("persistent_graph.join_front_branch()") < source.index(before)


def test_the_memset_goes_on_the_branch():
    source = inspect.getsource(persistent._launch)
    branch = source.index("with persistent_graph.on_front_branch():")
    assert branch < source.index("zeroed = cp.zeros(") < source.index("persistent_graph.join_front_branch()")


def test_the_flag_is_in_the_graph_key_and_the_ab_flags(monkeypatch):
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import ab_modes
    assert "FRONT_BRANCH" in ab_modes.GRAPH_FLAGS and ab_modes.ENGINE_FLAG_DEFAULTS["FRONT_BRANCH"] is True
    assert_graph_key_holds(monkeypatch, "FRONT_BRANCH", False)


@pytest.mark.parametrize("in_kernel", [True, False])
def test_the_branch_is_asked_for_where_a_projection_precedes_the_kernel(monkeypatch, in_kernel):
    asked = []
    monkeypatch.setattr(persistent, "kernel_reads_x", lambda config, x, variant: in_kernel)
    monkeypatch.setattr(persistent, "_forward_eager", lambda *a, **k: ("y", "h", "c", None))
    monkeypatch.setattr(persistent_graph, "replay", lambda *a: None)
    monkeypatch.setattr(persistent_graph, "capture", lambda *a, **k: asked.append(k))
    config = LSTMConfig(8, 8, 1, False, "float32", 2, 3)
    persistent.forward(config, np.zeros(config.input_shape, np.float32), None, None, None)
    assert asked[0]["front_branch"] is not in_kernel


def _issue_and_join(where, seen) -> None:
    """What a forward does with the branch: its memset where on_front_branch says (recorded), then the join."""
    with persistent_graph.on_front_branch():
        seen.append(where[-1])
    persistent_graph.join_front_branch()


def test_another_threads_forward_does_not_see_the_branch(streams):
    """An eager forward in another thread while a capture holds the branch open issues nothing into the capture."""
    import threading
    log, where, main, side = streams
    seen = []

    def run():
        worker = threading.Thread(target=_issue_and_join, args=(where, seen))
        worker.start()
        worker.join()
        assert persistent_graph._front[-1].open   # not joined by the other thread
    persistent_graph.captured(main, run, ring=_Ring(log), front_branch=True)
    assert seen == ["main"]
