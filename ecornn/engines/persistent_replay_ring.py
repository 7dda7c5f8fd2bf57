"""v20: a replayed graph reads the caller's inputs by reference (persistent_graph.INPUTS_BY_REFERENCE).

Until v19 a replay copied x, h0 and c0 into the graph's input buffers with a kernel launched from
Python before the graph launch: ~12 us of host time on a warm host and more after a sync, during
which the GPU waits (benchmarks/profile_replay_host.py, v17). Here the copy is the graph's first
nodes (`fetch_slot`, `copy_current` in kernels/replay_inputs.cu) and takes its source addresses at
run time from a ring of slots in mapped host memory, which the host fills with plain stores: the
graph launch is the only CUDA call before the GPU starts.

Slot n % SLOTS holds {n, x, h0, c0} (v56: and the output delta) for the n-th launch of the graph. The kernel
counts the slots it fetched (v56; before, its own runs) and reports each finished fetch to the host (``done[0]``),
so the host never rewrites a slot that a queued launch has yet to read (it waits on the last replay's event first).
A launch that bypasses the ring (``graph.launch`` directly) finds a slot whose tag is not its
count: it fills the buffers with NaN instead of reading another call's inputs, and reports it
(``done[1]``); the next replay then drops the graph (``RingMismatch``) and runs eagerly.
v56: the device's count is of slots fetched (it advances on a matching tag only), so such a launch either finds the
next slot unpublished or, queued ahead of a replay, takes that replay's slot and computes its outputs into its buffer
(the replay's own launch then finds none). Every published slot is fetched once, in order, its inputs and output
delta together: with outputs written in place, no caller's buffer is left unwritten.

v21: an input the graph's kernel reads where it lies (``by_reference``: x of a tensor-core forward
with its projection inside, persistent.kernel_reads_x) is not copied at all: the kernel takes its
address from ``current`` (``reference``), and its buffer is only NaN-filled after a wrong tag.
"""
from __future__ import annotations

import ctypes
import functools
import platform
import weakref

import numpy as np

from ..arrays import c_contiguous, data_address, is_gpu_array

SLOTS = 32          # launches that may be queued before the host waits for the oldest fetch
SLOT_WORDS = 5      # {tag, x, h0, c0, output delta (v56)}
FETCH_THREADS = 256
FETCH_MAX_BLOCKS = 1024


IN_ORDER_STORE_MACHINES = ("x86_64", "amd64", "i386", "i686", "x86")   # x86's total store order


def host_orders_stores(machine: str | None = None) -> bool:
    """Whether this host's CPU (``machine``: platform.machine()'s name) makes its plain stores visible in program
    order, as InputRing._write relies on (the tag written last is seen last): x86. An Arm host (Grace) would need a
    release fence between the addresses and the tag, which Python cannot issue, so its replays copy the inputs with
    v17's kernel instead of using a ring (persistent_graph.use_input_ring)."""
    return (platform.machine() if machine is None else machine).lower() in IN_ORDER_STORE_MACHINES


class RingMismatch(RuntimeError):
    """The graph ran a launch the ring did not issue (its fetch saw a wrong tag and wrote NaN)."""


def _cp():
    import cupy
    return cupy


class HostWords:
    """``count`` int64 words of mapped, pinned host memory: a NumPy view for the host and the
    device address of the same words for kernels. Freed with this object."""

    def __init__(self, count: int, memory=None):
        alloc, free, device_pointer = memory or _cuda_host_memory()
        self.ptr = alloc(8 * count)
        self._finalizer = weakref.finalize(self, free, self.ptr)
        self.words = np.ctypeslib.as_array((ctypes.c_int64 * count).from_address(self.ptr))
        self.words[:] = 0
        self.device_ptr = device_pointer(self.ptr)


def _cuda_host_memory() -> tuple:
    """(alloc, free, device address) of CUDA's mapped pinned host memory."""
    runtime = _cp().cuda.runtime
    return (lambda n: runtime.hostAlloc(n, runtime.hostAllocMapped | runtime.hostAllocPortable), runtime.freeHost,
            lambda p: runtime.pointerGetAttributes(p).devicePointer)


class InputRing:
    """The ring of one graph: its host slots, its device counters and its fetch node's arguments."""

    def __init__(self, buffers, slots: int = SLOTS, host_words=HostWords, by_reference=(False, False, False)):
        cp = _cp()
        self.buffers, self.slots, self.issued = tuple(buffers), slots, 0
        self.by_reference = tuple(bool(b) for b in by_reference)   # v21: read by the kernel, not copied
        self._ndarray = getattr(cp, "ndarray", None)   # v60: publish's attribute-read check of the inputs
        self._expected = tuple((b.dtype, b.size, r) for b, r in zip(self.buffers, self.by_reference))
        self.referenced = [False] * len(self.buffers)                # ... and taken up by the capture
        self.host = host_words(SLOT_WORDS * slots + 2)   # the slots, then done[0] (fetches) and done[1] (mismatch)
        self.slot_words = self.host.words[:SLOT_WORDS * slots].reshape(slots, SLOT_WORDS)
        self.done = self.host.words[SLOT_WORDS * slots:]
        self.slot_words[:, 0] = -1                       # no launch's tag: a launch before any publish fetches NaN
        self._words = memoryview(self.host.words).cast("B").cast("q")   # v49: the same words, ~4x faster to touch
        self._done_at = SLOT_WORDS * slots                                 # done[0] and done[1] in _words
        self.state = cp.zeros(1, cp.uint64)               # device: the fetch count
        self.current = cp.zeros(5, cp.int64)   # device: this launch's x, h0, c0, whether its tag matched, output delta
        self.output_buffer = None   # v56: (address, bytes) of the packed outputs the capture's kernels move (output_reference)
        self._fill_referenced_with_nan()
        cp.cuda.get_current_stream().synchronize()       # zeroed before any stream's first launch
        self.last_sources = tuple(data_address(b) for b in self.buffers)
        _fetch_kernels_for(cp.cuda.runtime.getDevice())  # compiled now: never inside the capture

    def capture_fetch(self, branch=None) -> None:
        """Issue the fetch kernels on the current stream (called at the start of a capture): one warp
        reads the slot (host memory, read once), then the copies read device memory only. v59, ``branch``
        (persistent_graph.FrontBranch): the copy of h0 and c0 goes on the branch, forked after the fetch; x's copy, where
        it has one, stays in line (the projection reads it next); an input read by reference gets no copy node (its
        buffer holds NaN from the ring's making: _fill_referenced_with_nan)."""
        cp = _cp()
        fetch_slot, copy_current = _fetch_kernels_for(cp.cuda.runtime.getDevice())
        fetch_slot((1,), (32,), (np.uint64(self.host.device_ptr), self.state,
                                 np.uint64(self.host.device_ptr + 8 * SLOT_WORDS * self.slots), np.int32(self.slots),
                                 np.int32(SLOT_WORDS), self.current))
        sizes = [int(b.nbytes) for b in self.buffers]
        if branch is None:   # v20's single copy node: by-reference inputs only NaN-filled after a wrong tag
            mask = sum(1 << k for k, b in enumerate(self.by_reference) if b)
            self._copy(copy_current, mask, sizes)
            return
        branch.fork()
        copied = [0 if by_ref else n for n, by_ref in zip(sizes, self.by_reference)]
        if copied[0]:
            self._copy(copy_current, 0, [copied[0], 0, 0])
        if any(copied[1:]):
            with branch.side:
                self._copy(copy_current, 0, [0] + copied[1:])

    def _copy(self, copy_current, by_reference_mask: int, sizes) -> None:
        """One copy_current node over the buffers, ``sizes`` bytes of each (0: that buffer untouched)."""
        words = max(sizes) // 16 + 1
        blocks = max(1, min(-(-words // FETCH_THREADS), FETCH_MAX_BLOCKS))
        args = [self.current, np.int32(by_reference_mask)]
        for buffer, size in zip(self.buffers, sizes):
            args += [buffer, np.int64(size)]
        copy_current((blocks,), (FETCH_THREADS,), tuple(args))

    def _fill_referenced_with_nan(self) -> None:
        """v59: the buffers of inputs read by reference hold NaN (0xff bytes in fp32, fp16, bf16) for good: a kernel
        reads them only after a wrong tag, and nothing else writes them (v20's copy node filled them then)."""
        for buffer, by_ref in zip(self.buffers, self.by_reference):
            if by_ref:
                buffer.view(_cp().uint8).fill(0xff)

    def publish(self, inputs, wait_for_fetches, output_delta: int = 0) -> list:
        """Fill the next slot with ``inputs``' addresses (converted copies where an input is not a
        C-ordered device array of its buffer's dtype and size; returned, to be kept until the launch
        is issued) and (v56) ``output_delta``: bytes from the captured output buffer to where this launch's kernel
        writes its outputs (0: the graph's own). ``wait_for_fetches()`` blocks until every issued launch has fetched.
        v49: on the benches' span (the GPU idles until the launch), so plain attribute reads and word stores only."""
        self._claim_slot(wait_for_fetches)
        sources = self._addresses_where_they_lie(inputs)
        if sources is not None:
            self.last_sources = sources
            self._write(sources, output_delta)
            return []   # the caller's own arrays: nothing of the ring's to keep
        kept, sources = [], []
        for src, dst, by_ref in zip(inputs, self.buffers, self.by_reference):
            address = _address_as(src, dst, by_ref)   # v56: checked and read once (was two passes)
            if address is None:
                src = _as_buffer_like(src, dst, aligned=by_ref)
                address = src.data.ptr
            kept.append(src)
            sources.append(address)
        self.last_sources = tuple(sources)   # device arrays, all of them
        self._write(self.last_sources, output_delta)
        return kept

    def _addresses_where_they_lie(self, inputs):
        """v60: the inputs' device addresses where every one is a plain CuPy array of its buffer's dtype and size,
        C-ordered (and on 16 bytes where read by reference): a replay's usual case, checked by attribute reads only
        (_address_as's function calls per input cost ~1 µs on the span before the launch); else None."""
        sources = []
        for src, (dtype, size, by_ref) in zip(inputs, self._expected):
            if type(src) is not self._ndarray or src.dtype != dtype or src.size != size or not src._c_contiguous:
                return None
            address = src.data.ptr
            if by_ref and address % 16:
                return None
            sources.append(address)
        return tuple(sources)

    def reference(self, array, index: int):
        """``current`` (the fetched addresses, for the kernel's ``x_at`` argument) where input ``index``
        is read by reference and ``array`` is its buffer, else None. Called while the graph is captured."""
        if not self.by_reference[index] or data_address(array) != data_address(self.buffers[index]) \
                or array.nbytes != self.buffers[index].nbytes:
            return None
        self.referenced[index] = True
        return self.current

    def check_references(self) -> None:
        """After the capture: every input meant to be read by reference was (its buffer is never
        written on a matching tag, so any other reader would see stale values)."""
        unused = [k for k, b in enumerate(self.by_reference) if b and not self.referenced[k]]
        if unused:
            raise RuntimeError(f"replay ring: inputs {unused} were to be read by reference, the captured "
                               "forward did not take them up")

    def output_reference(self, buffer):
        """``current`` (the fetched words, for the forward kernel's ``out_at``), recording ``buffer`` as the packed
        output buffer the capture's kernels move by the fetched delta (v56). Called while the graph is captured."""
        self.output_buffer = (data_address(buffer), int(buffer.nbytes))
        return self.current

    def moves_outputs_of(self, buffer) -> bool:
        """Whether the captured kernels write ``buffer`` (the graph's packed outputs) where the fetched delta says."""
        return self.output_buffer == (data_address(buffer), int(buffer.nbytes))

    def republish(self, wait_for_fetches) -> None:
        """The next slot with the previous launch's sources again (benchmarks that replay the bare
        graph: their launches go through the ring too), its outputs in the graph's own buffer (delta 0: the last
        caller's may be freed by now)."""
        self._claim_slot(wait_for_fetches)
        self._write(self.last_sources, 0)

    def _claim_slot(self, wait_for_fetches) -> None:
        """Make sure the next slot is free: its last launch (SLOTS ago) has fetched."""
        self._check_mismatch()
        if self.issued - self._words[self._done_at] >= self.slots:
            wait_for_fetches()
            if self.issued != int(self.done[0]):
                raise RuntimeError(f"replay ring: {self.issued} launches issued, {int(self.done[0])} fetched "
                                   "after waiting for them")

    def launched(self) -> None:
        self.issued += 1

    def _write(self, sources, output_delta: int) -> None:
        words, at = self._words, SLOT_WORDS * (self.issued % self.slots)
        words[at + 1], words[at + 2], words[at + 3] = sources
        words[at + 4] = output_delta
        words[at] = self.issued   # the tag last: a slot is whole once its tag matches. The fetch relies on the host's
        # stores becoming visible in order, as x86 keeps them (rings are made only there: host_orders_stores).

    def _check_mismatch(self) -> None:
        if self._words[self._done_at + 1]:
            raise RingMismatch(f"the graph's fetch {int(self.done[1]) - 1} found a slot of another launch "
                               "(a launch outside the replay ring); that call's outputs are NaN")


def _as_buffer_like(src, dst, aligned: bool = False):
    """``src`` itself where the fetch can read it as ``dst``'s bytes (``aligned``: and a kernel
    loads it 16 bytes at a time), else a C-ordered copy in ``dst``'s dtype and shape (made on the
    current stream; an input of another size raises)."""
    if _readable_as(src, dst, aligned):
        return src
    cp = _cp()
    if int(np.prod(src.shape)) != dst.size:
        raise ValueError(f"replay input of shape {tuple(src.shape)}; the graph was captured for {tuple(dst.shape)}")
    copy = cp.empty(dst.shape, dst.dtype)
    cp.copyto(copy, cp.asarray(src).reshape(dst.shape), casting="unsafe")
    return copy


def _address_as(src, dst, aligned: bool):
    """``src``'s device address where the fetch can read it where it lies as ``dst``'s bytes (a C-ordered device
    array of ``dst``'s dtype and size; ``aligned``: starting on 16 bytes), else None."""
    if not (is_gpu_array(src) and src.dtype == dst.dtype and src.size == dst.size and c_contiguous(src)):
        return None
    address = src.data.ptr
    return None if aligned and address % 16 else address


def _readable_as(src, dst, aligned: bool) -> bool:
    return _address_as(src, dst, aligned) is not None


@functools.lru_cache(maxsize=None)
def _fetch_kernels_for(device: int) -> tuple:
    from ..gpu import compile_module
    module = compile_module("replay_inputs.cu")
    return module.get_function("fetch_slot"), module.get_function("copy_current")
