"""Inference forwards of the `persistent` strategy replayed from CUDA graphs.

A persistent forward issues about a dozen small operations around its one long kernel (casts, the
input-projection GEMM, the bias, the exchange buffer's memset, the output casts). Issued from
Python they cost ~150 us per call, during which the GPU mostly waits (0.6-1.6 us per step at
T=256; notes_persistent.md, v4). Here the second inference call with the same prepared weights and
configuration captures them once into a CUDA graph, and later calls copy their inputs into the
graph's own input buffers, replay it, and return its outputs cast to the caller's dtype as new
arrays (never the graph's buffers: the next replay overwrites those). The input buffers have the
caller's dtypes and the conversion to fp32 is captured, so a replay's copies are plain device
memcpys: the GPU sits idle until the host has issued them and the graph launch, and a CuPy
elementwise copy costs ~15-50 us of host time each where a memcpy costs a few (H100 profile,
notes_persistent.md v8). The graph holds the input conversion, the projection GEMM, the exchange
memset, the kernel and (CAPTURE_OUTPUT_CASTS, twelfth session) the output casts to the caller's
dtype, so a 16-bit replay's outputs leave by memcpy too instead of three elementwise casts (~100 us
of host time per call, H100 profile of v14). v56 (OUTPUTS_IN_PLACE): where the captured tensor-core forward writes
every packed output, a replay hands it the caller's new output buffer through the ring (a byte delta from the graph's
own buffer) and copies nothing out.
Captures run on one stream per device. Replays run on the caller's stream (v17; before, on the
capture stream, handed over by three new events per replay, ~the host time of a few memcpys before
the launch): the graphs' buffers and their cuBLAS workspace are shared, so two replays must never
overlap, and a replay waits for the one before only where that ran on another stream (one reused
event per device). A lock serialises the host side.

Everything the captured forward allocates comes from a memory pool of its own that lives as long
as the graph, so no buffer the graph uses can be handed to anyone else. Training-mode forwards are
not captured: their reserve must outlive the call. Where capture fails (e.g. a driver that cannot
capture cooperative launches), the configuration stays eager, and the reason is recorded.
"""
from __future__ import annotations

import contextlib
import functools
import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from .. import flag_changes
from ..arrays import data_address, is_gpu_array
from . import batch_pad
from . import persistent_replay_ring as ring_module

ENABLED = True       # benchmarks and tests switch it off to time or test the eager path
CAPTURE_INPUT_CASTS = True   # v8: input buffers in the caller's dtypes, their fp32 conversion captured;
                             # False: fp32 input buffers, converted by each replay (v5; ablation)
CAPTURE_OUTPUT_CASTS = True  # the outputs' cast to the caller's dtype captured too; False: fp32 graph
                             # outputs, cast by each replay (the ablation)
MAX_GRAPHS = 4       # per prepared weights: each graph holds its own buffers
capture_errors: dict = {}   # key -> why capture failed (the call ran eagerly)
_LOCK = threading.Lock()    # one capture or replay at a time (threads sharing prepared weights)
_streams: dict = {}         # device -> the stream of every capture (_graph_stream)
COPY_KERNEL = True          # v17: a replay's three input copies as one kernel (one launch instead of three
                            # ~5.6 us memcpy calls of host time); False: memcpys (the ablation)
INPUTS_BY_REFERENCE = True  # v20: the input copy is the graph's first node, its sources read from a ring in
                            # mapped host memory (persistent_replay_ring); False: the copy kernel (v17)
KERNEL_READS_X = True       # v21 (with INPUTS_BY_REFERENCE): where the forward kernel is x's only reader
                            # (persistent.kernel_reads_x; v35: or layer 0's fp16 split, persistent.split_reads_x),
                            # it reads the caller's x at the fetched address: no copy of x in the graph;
                            # False: x copied like h0 and c0 (v20, the ablation)
_capturing: list = []       # the ring of the capture in progress (input_reference)
REPLAY_ON_CALLER_STREAM = True   # v17: replays run on the caller's stream (no events unless it changes);
                                 # False: on the graph stream, three events per replay (v5-v16, ablation)
OUTPUTS_IN_PLACE = True     # v56 (with a ring): where the captured forward kernels write every packed output, a replay
                            # hands them the caller's new output buffer through the ring, and copies nothing out
                            # (persistent_mma.cu's output_delta); False: the graph's outputs copied out (the ablation)
_last_replay: dict = {}     # device -> (stream ptr, event recorded after the last replay's work)
FRONT_BRANCH = True         # v59: an inference capture's copy of h0 and c0 and its first kernel's exchange memset on a
                            # side branch beside the input projection (FrontBranch); False: v58's graph (the ablation)
_front: list = []           # the FrontBranch of the capture in progress
_side_streams: dict = {}    # device -> the side stream of every capture's front branch
LOOKUP_MEMO = True          # v61: a replay reuses the graph key of its prepared weights' last replay while the call's
                            # configuration, mode, dtypes, device and the flags are those of that call (_lookup);
                            # False: the key built and hashed per call (v60, the ablation)


@dataclass
class PackedOutputs:
    """Graph outputs that are C-ordered views of one 1-D buffer (v17: the forward's output, hT and
    cT): a replay copies them out with one allocation and one memcpy instead of one each."""
    buffer: object
    layout: tuple       # (offset, shape) of each output, in elements of buffer

    def __iter__(self):   # the outputs themselves, as views
        return iter(buffer_views(self.buffer, self.layout))


@dataclass
class ForwardGraph:
    graph: object
    pool: object        # cupy MemoryPool: every buffer the graph touches
    inputs: tuple       # (x, h0, c0) in the caller's dtypes: the replay copies the caller's arrays in
    outputs: object     # (output, hT, cT), in the caller's dtype (CAPTURE_OUTPUT_CASTS) or fp32,
                        # as PackedOutputs where they share one buffer
    kind: str           # the forward kernel kind the graph runs
    ring: object = None  # InputRing where the graph fetches its inputs itself (v20), else None
    moved: object = None     # v56: MovedOutputs where the kernels write the packed outputs where the ring's delta says

    @property
    def in_place(self) -> bool:
        return self.moved is not None

    def launch_bare(self, stream) -> None:
        """Replay the graph alone on its last inputs (benchmarks timing the graph's GPU time)."""
        launch_bare(self.graph, self.ring, stream)


def launch_bare(graph, ring, stream) -> None:
    """Replay ``graph`` alone on ``stream`` with the inputs of its last launch, through its ``ring``
    where it has one (a bare ``graph.launch`` would fetch NaN and retire the graph)."""
    with _LOCK:
        _after_last_replay(stream)
        if ring is not None:
            ring.republish(_wait_for_last_replay)
        graph.launch(stream=stream)
        _count_launch(ring)
        _mark_replay(stream)


def buffer_views(buffer, layout) -> tuple:
    """The arrays of ``layout`` ((offset, shape) each) as views of the 1-D ``buffer``."""
    views = []
    for offset, shape in layout:
        size = 1
        for n in shape:
            size *= n
        views.append(buffer[offset:offset + size].reshape(shape))
    return tuple(views)


def packed_layout(shapes) -> tuple:
    """((offset, shape) of each array, total size) of arrays packed in one 1-D buffer, each starting 64 elements
    (256 bytes of fp32) aligned: the forward's output, hT and cT (persistent._output_layout, v17)."""
    layout, offset = [], 0
    for shape in shapes:
        layout.append((offset, tuple(shape)))
        offset += -(-int(np.prod(shape)) // 64) * 64
    return tuple(layout), offset


@dataclass
class CutOutputs:
    """v48: a padded forward's outputs (persistent.run_config: the caller's batch plus zero columns), cut to the
    caller's ``batch`` columns as a replay copies them out (one launch for all, batch_pad.first_columns_of) instead of
    by the graph, into one buffer of ``size`` elements laid out as ``layout`` (the caller's batch; made once)."""
    outputs: object     # PackedOutputs or a tuple of arrays, at the padded batch
    batch: int
    layout: tuple
    size: int

    def __iter__(self):   # the outputs at the padded batch, as views
        return iter(self.outputs)


def _cut_where_padded(outputs, batch: int):
    """``outputs`` as CutOutputs where their batch (axis 1) is wider than the caller's ``batch``."""
    wide = tuple(outputs)
    if wide[0].shape[1] == batch:
        return outputs
    return CutOutputs(outputs, batch, *packed_layout((a.shape[0], batch) + tuple(a.shape[2:]) for a in wide))


def pack_outputs(arrays):
    """PackedOutputs of ``arrays`` where they are C-ordered views of one 1-D buffer of their dtype,
    else the arrays themselves (copied out one by one)."""
    arrays = tuple(arrays)
    base = arrays[0].base if arrays else None
    if base is None or base.ndim != 1 or not all(
            a.base is base and a.flags.c_contiguous and a.dtype == base.dtype for a in arrays):
        return arrays
    layout = tuple(((data_address(a) - data_address(base)) // a.itemsize, tuple(a.shape)) for a in arrays)
    return PackedOutputs(base, layout)


_cupy = None


def _cp():
    global _cupy
    if _cupy is None:   # v56: imported once (an import statement per call: ~0.25 µs, several before a replay's launch)
        import cupy
        _cupy = cupy
    return _cupy


def _key(config, mode, x, h0, c0, device=None) -> tuple:
    if device is None:
        device = _cp().cuda.runtime.getDevice()
    return (config.key(), mode, CAPTURE_INPUT_CASTS, CAPTURE_OUTPUT_CASTS, INPUTS_BY_REFERENCE, KERNEL_READS_X,
            OUTPUTS_IN_PLACE, FRONT_BRANCH, device, x.dtype, h0.dtype, c0.dtype)


def _lookup(prepared, config, mode, x, h0, c0, device) -> tuple:
    """(key, graph or None) of a replay. v61: the last found key of ``prepared`` is reused while this call's stamp
    (configuration, mode, dtypes, device, the count of flag assignments) equals that call's: the same objects call
    after call, which the tuple comparison checks by identity first, and the key is neither built nor hashed again
    (measured −0.3 to −1.3 µs per call, on the span before the launch). Equal new objects compare equal and give
    the same key."""
    stamp = (config, mode, x.dtype, h0.dtype, c0.dtype, device, flag_changes.assignments)
    memo = prepared.last_lookup if LOOKUP_MEMO else None
    key = memo[1] if memo is not None and memo[0] == stamp else flag_changes.HashedTuple(
        _key(config, mode, x, h0, c0, device))
    entry = _graphs(prepared).get(key)
    if entry is not None and LOOKUP_MEMO:
        prepared.last_lookup = (stamp, key)
    return key, entry


def _graphs(prepared) -> OrderedDict:
    return prepared.graphs   # PersistentWeights.graphs: the graphs live and die with the weights


def _wanted(prepared, x) -> bool:
    """Graphs need prepared weights and CuPy arrays (the CPU emulation tests run NumPy)."""
    return ENABLED and prepared is not None and is_gpu_array(x)


def _graph_stream():
    """One stream per device for every capture and replay: all graphs share one cuBLAS handle and
    workspace (gpu_blas keys them by stream), and replays run in issue order, never side by side."""
    return _device_stream(_streams)


def _device_stream(streams: dict):
    """The current device's stream in ``streams`` (device -> stream), made non-blocking at first use."""
    cp = _cp()
    device = cp.cuda.Device().id
    if device not in streams:
        streams[device] = cp.cuda.Stream(non_blocking=True)
    return streams[device]


def _warm_blas(stream) -> None:
    """Create the stream's cuBLAS handle and workspace before a capture (no allocation inside it)."""
    from ..gpu_blas import handle_for
    handle_for(stream)


def replay(prepared, config, mode, x, h0, c0):
    """``(kernel kind, outputs)`` of a replayed forward, with the outputs cast to ``x``'s dtype as
    new arrays, or None when this call must run eagerly (first call of a configuration, capture
    off or failed). Ordered after and before the caller's current stream's work."""
    if not _wanted(prepared, x) or not prepared.graphs:
        return None
    device = _cp().cuda.runtime.getDevice()
    key, entry = _lookup(prepared, config, mode, x, h0, c0, device)
    if entry is None:
        return None
    try:
        outputs = _launch(entry, x, h0, c0, device)
    except Exception as exc:  # noqa: BLE001 - recorded; this and later calls run eagerly
        capture_errors[key] = f"replay: {type(exc).__name__}: {exc}"
        del _graphs(prepared)[key]
        return None
    _graphs(prepared).move_to_end(key)
    return entry.kind, outputs


def _launch(entry: ForwardGraph, x, h0, c0, device=None) -> tuple:
    with _LOCK:   # the graph's buffers are shared by every caller of these prepared weights
        return launch_with_copies(entry.graph, entry.inputs, (x, h0, c0), entry.outputs, x.dtype, entry.ring,
                                  entry.moved, device)


SPARE_OUTPUT_MAX_BYTES = 32 << 20   # v56: larger outputs are made before their launch (no spare held)


class MovedOutputs:
    """v56: the new output buffers of a graph whose kernels write its packed outputs where the ring's delta says.
    Each replay's buffer is made after the replay before it has launched, for the next one on the same stream
    (made before the launch it sat on the benches' span: 3-6 µs of host time after a device sync). So a graph
    holds one spare output buffer between its replays, up to SPARE_OUTPUT_MAX_BYTES (a larger one's call runs long
    enough that the allocation does not count)."""

    def __init__(self, outputs: PackedOutputs):
        self.outputs, self.spare = outputs, None   # spare: (stream pointer, buffer)
        self.address = outputs.buffer.data.ptr     # v60: the captured buffer's, read once (the delta's origin)

    def take(self, stream, dtype):
        """A new buffer of the packed outputs for a replay on ``stream`` returning ``dtype`` (None: their own), or
        None where the outputs are to be cast (the copies out cast them)."""
        buffer = self.outputs.buffer
        if dtype is not None and dtype != buffer.dtype:
            return None
        spare, self.spare = self.spare, None
        if spare is not None and spare[0] == stream.ptr:   # CuPy's pool reuses a block on its own stream only
            return spare[1]
        return _cp().empty(buffer.shape, buffer.dtype)

    def make_spare(self, stream) -> None:
        buffer = self.outputs.buffer
        if buffer.nbytes <= SPARE_OUTPUT_MAX_BYTES:
            self.spare = (stream.ptr, _cp().empty(buffer.shape, buffer.dtype))


def launch_with_copies(graph, buffers, inputs, outputs, dtype=None, ring=None, moved=None, device=None) -> tuple:
    """Copy ``inputs`` into the graph's ``buffers`` (or, with a ``ring``, hand the graph their
    addresses), launch ``graph`` and return new arrays holding ``outputs`` (cast to ``dtype`` if
    given), all on the caller's stream (REPLAY_ON_CALLER_STREAM), ordered after the replay before
    it, whatever stream that ran on. ``moved`` (v56, MovedOutputs): the graph's kernels write the packed
    ``outputs`` where the ring's delta says, so a new buffer is handed to them instead of copied into. ``device``
    (v61): the current device where the caller has read it already. Call under _LOCK."""
    if not REPLAY_ON_CALLER_STREAM:
        return _launch_on_graph_stream(graph, buffers, inputs, outputs, dtype, ring)
    cp = _cp()
    caller = cp.cuda.get_current_stream()
    if device is None:
        device = cp.cuda.runtime.getDevice()
    _after_last_replay(caller, device)
    buffer = moved.take(caller, dtype) if moved is not None and OUTPUTS_IN_PLACE else None
    delta = buffer.data.ptr - moved.address if buffer is not None else 0
    kept = _hand_inputs(buffers, inputs, caller, ring, delta)   # alive until the launch is issued
    graph.launch(stream=caller)
    _count_launch(ring)
    del kept
    if buffer is None:
        copies = _copies_out(outputs, dtype, caller)
        _mark_replay(caller, device)
        return copies
    _mark_replay(caller, device)   # v56: in place, the launch is all of this replay's GPU work
    moved.make_spare(caller)
    return buffer_views(buffer, outputs.layout)


def _hand_inputs(buffers, inputs, stream, ring, output_delta: int = 0):
    """The inputs' addresses (and v56's ``output_delta``) into the ring's next slot (v20), else copied into the
    buffers. Returns what must stay alive until the launch is issued (the ring's converted copies)."""
    if ring is None:
        _copy_inputs(buffers, inputs, stream)
        return None
    return ring.publish(inputs, _wait_for_last_replay, output_delta)


def _count_launch(ring) -> None:
    if ring is not None:
        ring.launched()


def _wait_for_last_replay() -> None:
    """Block until every replay on this device has run (a ring about to reuse an unfetched slot)."""
    last = _last_replay.get(_cp().cuda.runtime.getDevice())
    if last is not None:
        last[1].synchronize()


def _after_last_replay(stream, device=None) -> None:
    """Order ``stream`` after the last replay on this device where that ran on another stream: the
    graphs share their buffers and cuBLAS workspace, so replays must never overlap."""
    last = _last_replay.get(_cp().cuda.runtime.getDevice() if device is None else device)
    if last is not None and last[0] != stream.ptr:
        stream.wait_event(last[1])


def _mark_replay(stream, device=None) -> None:
    """Record where this replay's work (its output copies included) ends: one event per device, reused."""
    cp = _cp()
    if device is None:
        device = cp.cuda.runtime.getDevice()
    event = _last_replay[device][1] if device in _last_replay else cp.cuda.Event(disable_timing=True)
    event.record(stream)
    _last_replay[device] = (stream.ptr, event)


def _copies_out(outputs, dtype, stream) -> tuple:
    """New arrays holding ``outputs`` (a tuple, or PackedOutputs: one buffer copied at once; CutOutputs: their
    first columns, into one buffer)."""
    cp = _cp()
    if isinstance(outputs, CutOutputs):
        return _cut_copies(outputs, dtype, stream)
    if isinstance(outputs, PackedOutputs):
        whole = cp.empty(outputs.buffer.shape, dtype or outputs.buffer.dtype)
        _copy_in(whole, outputs.buffer, stream)
        return buffer_views(whole, outputs.layout)
    copies = []
    for a in outputs:
        copy = cp.empty(a.shape, dtype or a.dtype)
        _copy_in(copy, a, stream)
        copies.append(copy)
    return tuple(copies)


def _cut_copies(outputs: CutOutputs, dtype, stream) -> tuple:
    """The first ``outputs.batch`` columns of each padded output, as views of one new buffer: by one kernel launch
    where the dtype stays, else cast array by array (batch_pad.first_columns_of). On the current stream (the
    caller's: ``stream``)."""
    wide = tuple(outputs)
    views = buffer_views(_cp().empty((outputs.size,), dtype or wide[0].dtype), outputs.layout)
    return batch_pad.first_columns_of(wide, outputs.batch, outs=views)


def _launch_on_graph_stream(graph, buffers, inputs, outputs, dtype=None, ring=None) -> tuple:
    """v5-v16: copies and launch on the graph stream, handed over to and from the caller's stream by
    three new events (the ablation of REPLAY_ON_CALLER_STREAM)."""
    cp = _cp()
    stream, caller = _graph_stream(), cp.cuda.get_current_stream()
    _after_last_replay(stream)
    stream.wait_event(caller.record())                 # the caller's inputs are written
    with stream:
        kept = _hand_inputs(buffers, inputs, stream, ring)   # alive until the launch is issued
        graph.launch(stream=stream)
        _count_launch(ring)
        del kept
    caller.wait_event(stream.record())
    copies = _copies_out(outputs, dtype, caller)
    stream.wait_event(caller.record())                 # read before the next replay rewrites them
    _mark_replay(caller)
    return copies


def _copy_inputs(buffers, inputs, stream) -> None:
    """The caller's ``inputs`` into the graph's ``buffers`` on ``stream`` (the current one): three
    same-dtype, C-ordered device arrays starting 16-byte aligned by one kernel (COPY_KERNEL), else
    one copy each."""
    if not (COPY_KERNEL and len(buffers) == 3 and _copyable_by_kernel(buffers, inputs)):
        for dst, src in zip(buffers, inputs):
            _copy_in(dst, src, stream)
        return
    sizes = [np.int64(b.nbytes) for b in buffers]
    threads = sum(int(n) // 16 + 1 for n in sizes)
    _copy_kernel(_cp().cuda.runtime.getDevice())((max(1, min(-(-threads // 256), 1024)),), (256,), (
        buffers[0], inputs[0], sizes[0], buffers[1], inputs[1], sizes[1], buffers[2], inputs[2], sizes[2]))


def _copyable_by_kernel(buffers, inputs) -> bool:
    """Whether every input is a device array of its buffer's dtype and size, C-ordered and 16-byte
    aligned (the buffers are the graph's own allocations: aligned and C-ordered)."""
    return all(is_gpu_array(src) and src.dtype == dst.dtype and src.nbytes == dst.nbytes and src.flags.c_contiguous
               and src.data.ptr % 16 == 0 for dst, src in zip(buffers, inputs))


@functools.lru_cache(maxsize=None)
def _copy_kernel(device: int):
    from ..gpu import compile_module
    return compile_module("replay_inputs.cu").get_function("copy_three")


def _copy_in(dst, src, stream) -> None:
    """``src`` into ``dst`` on ``stream``: a device memcpy where the layout and dtype match (a
    replay's usual case), else an elementwise copy (with the cast)."""
    cp = _cp()
    if src.dtype == dst.dtype and src.flags.c_contiguous:
        cp.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, dst.nbytes, cp.cuda.runtime.memcpyDeviceToDevice,
                                    stream.ptr)
    else:
        cp.copyto(dst, src, casting="unsafe")


def capture(prepared, config, mode, x, h0, c0, run_eager, x_by_reference: bool = False,
            front_branch: bool = True) -> None:
    """Capture ``run_eager(x, h0, c0) -> (output, hT, cT, kind)`` (inputs in the caller's dtypes,
    outputs in the caller's dtype or fp32: CAPTURE_OUTPUT_CASTS) into a graph
    (called after an eager call of the same configuration: modules are compiled, cuBLAS warm).
    ``x_by_reference``: the kernel (v21) or layer 0's x split (v35) is x's only reader and takes it through
    input_reference. ``front_branch`` (v59): the forward has work ahead of its first kernel for a FrontBranch to run
    beside (its input projection; not an in-kernel one).
    Nothing runs now; a failure leaves the configuration eager."""
    if not _wanted(prepared, x):
        return
    key = _key(config, mode, x, h0, c0)
    graphs = _graphs(prepared)
    if key in graphs or key in capture_errors:
        return
    cp = _cp()
    pool = cp.cuda.MemoryPool()
    stream = _graph_stream()
    with _LOCK:
        _warm_blas(stream)
        try:
            with cp.cuda.using_allocator(pool.malloc):
                inputs = tuple(cp.empty(a.shape, a.dtype if CAPTURE_INPUT_CASTS else cp.float32) for a in (x, h0, c0))
                by_reference = (x_by_reference and KERNEL_READS_X and CAPTURE_INPUT_CASTS, False, False)
                ring = ring_module.InputRing(inputs, by_reference=by_reference) if use_input_ring() else None
                graph, (*outputs, kind) = captured(stream, run_eager, *inputs, ring=ring,
                                                   front_branch=FRONT_BRANCH and front_branch)
        except Exception as exc:  # noqa: BLE001 - recorded; the call path stays eager
            capture_errors[key] = f"{type(exc).__name__}: {exc}"
            return
    if len(graphs) >= MAX_GRAPHS:
        graphs.popitem(last=False)
    outputs = _cut_where_padded(pack_outputs(outputs), config.batch)
    in_place = ring is not None and isinstance(outputs, PackedOutputs) and ring.moves_outputs_of(outputs.buffer)
    graphs[key] = ForwardGraph(graph, pool, inputs, outputs, kind, ring, MovedOutputs(outputs) if in_place else None)


def use_input_ring() -> bool:
    """Whether captures take their inputs through a replay ring (v20): INPUTS_BY_REFERENCE, on a host whose stores
    reach the GPU in program order (persistent_replay_ring.host_orders_stores); else v17's copy kernel."""
    return INPUTS_BY_REFERENCE and ring_module.host_orders_stores()


def captured(stream, run, *args, ring=None, front_branch: bool = False):
    """``(graph, run(*args))`` with run's work captured on ``stream`` (not executed), after the
    ``ring``'s fetch of the inputs where one is given (v20). ``front_branch`` (v59, inference captures): the copy of
    h0 and c0 and the first exchange memset go on a FrontBranch, joined before their first reader. Captures hold
    _LOCK, so one FrontBranch at a time is open (_front); only the capturing thread's forward sees it (an eager call
    in another thread must not issue work into the capture)."""
    branch = FrontBranch(stream, _side_stream()) if front_branch else None   # its events made outside the capture
    with stream:
        stream.begin_capture()
        try:
            if ring is not None:
                ring.capture_fetch(branch)
                _capturing.append(ring)
            elif branch is not None:
                branch.fork()
            if branch is not None:
                _front.append(branch)
            try:
                result = run(*args)
            finally:
                if ring is not None:
                    _capturing.remove(ring)
                if branch is not None:
                    _front.remove(branch)
                    branch.join()   # a capture must end with every branch joined
            if ring is not None:
                ring.check_references()
        except Exception:
            _abandon(stream)
            raise
        return stream.end_capture(), result


class FrontBranch:
    """v59: a side branch of an inference capture, forked after the ring's fetch. Before v59 the graph ran fetch, the
    copy of h0 and c0, the x split, the projection GEMM, the exchange memset and the kernel in one line; the copy and
    the memset (~2.4 and ~1.2 µs) only feed the kernel, so they run here, beside the x split and the GEMM. The engine
    joins the branch before the first node that reads h0, c0 or the zeroed buffer (join_front_branch): the first
    kernel launch, or a cast, pad or product of h0 and c0 ahead of it."""

    def __init__(self, main, side):
        cp = _cp()
        self.main, self.side, self.open = main, side, False
        self.thread = threading.get_ident()
        self._fork, self._join = cp.cuda.Event(disable_timing=True), cp.cuda.Event(disable_timing=True)

    def fork(self) -> None:
        """Start the branch at the main stream's current point (work issued there from now on runs beside it)."""
        self._fork.record(self.main)
        self.side.wait_event(self._fork)
        self.open = True

    def join(self) -> None:
        """Order the main stream after the branch's work (once; later calls do nothing)."""
        if self.open:
            self.open = False
            self._join.record(self.side)
            self.main.wait_event(self._join)


def _side_stream():
    """The side stream of the capture stream of this device (one per device, as _graph_stream)."""
    return _device_stream(_side_streams)


def _this_threads_branch():
    """The open FrontBranch of the capture this thread is running, or None."""
    branch = _front[-1] if _front else None
    return branch if branch is not None and branch.open and branch.thread == threading.get_ident() else None


def on_front_branch():
    """A context that issues work on the open front branch of the capture in progress (v59), else where it is."""
    branch = _this_threads_branch()
    return branch.side if branch is not None else contextlib.nullcontext()


def join_front_branch() -> None:
    """Join the open front branch of the capture in progress (v59) into its main stream; nothing otherwise. Called
    before anything reads h0, c0 (the branch copies them) or an exchange buffer zeroed there."""
    branch = _this_threads_branch()
    if branch is not None:
        branch.join()


def input_reference(array, index: int = 0):
    """The device words of the fetched input addresses (a kernel's ``x_at``) where the capture in
    progress reads input ``index`` by reference and ``array`` is its buffer (v21), else None."""
    return _capturing[-1].reference(array, index) if _capturing else None


def output_reference(buffer):
    """v56: the device words of the fetched addresses and output delta (a forward kernel's ``out_at``) where the
    capture in progress takes its inputs through a ring and OUTPUTS_IN_PLACE is on, ``buffer`` being the packed
    output buffer those kernels write; else None (the kernels write where they are told, and the replay copies
    the outputs out)."""
    if not OUTPUTS_IN_PLACE or not _capturing or buffer is None:
        return None
    return _capturing[-1].output_reference(buffer)


def _abandon(stream) -> None:
    """End a capture that failed half-way (the partial graph is dropped)."""
    try:
        stream.end_capture()
    except Exception:  # noqa: BLE001 - the capture is already invalid; nothing to keep
        pass


flag_changes.count_assignments(__name__)   # v61: the flags of the graph key counted (_lookup)
