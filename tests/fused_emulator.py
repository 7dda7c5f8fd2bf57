"""Run the `fused` engine's schedule on the CPU: a stand-in for CuPy whose "device pointers" are
host addresses of NumPy buffers, with NumPy versions of the cuBLAS GEMM and the pointwise kernels.

It executes exactly the pointers, leading dimensions, offsets and stream/event calls the engine
issues, so indexing, layout and schedule bugs show up here without a GPU. Streams run in issue
order (one host thread), so it cannot find races. Graph capture records the operations and a
launch replays them, which checks that nothing a call changes is baked into a captured graph.
"""
from __future__ import annotations

import contextlib
import ctypes
from types import SimpleNamespace

import numpy as np
from numpy.lib.stride_tricks import as_strided


class FakeArray(np.ndarray):
    """A NumPy array that answers ``.data.ptr`` like a CuPy array."""

    @property
    def data(self):  # noqa: D401 - mimic cupy.ndarray.data
        return SimpleNamespace(ptr=self.ctypes.data)

    def set(self, host, stream=None):
        self[...] = host

    def get(self):
        return np.array(self)


def fake(a):
    return np.ascontiguousarray(a).view(FakeArray)


_capture = []   # while a capture is open: [list of recorded operations]


def _run_or_record(fn, *args, **kwargs):
    """Execute now, or record for a graph when a capture is open (as CUDA stream capture does)."""
    if _capture:
        _capture[-1].append(lambda: fn(*args, **kwargs))
    else:
        fn(*args, **kwargs)


class FakeGraph:
    def __init__(self, ops):
        self.ops = ops

    def launch(self, stream=None):
        for op in self.ops:
            op()


class FakeStream:
    def __init__(self, non_blocking=False):
        self.ptr = id(self)

    def begin_capture(self):
        _capture.append([])

    def end_capture(self):
        return FakeGraph(_capture.pop())

    def synchronize(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def record(self, event=None):
        return event or FakeEvent()

    def wait_event(self, event):
        pass


class FakeEvent:
    def __init__(self, *args, **kwargs):
        pass


_null = FakeStream()


def _memcpy(dst, src, nbytes, kind, stream):
    ctypes.memmove(dst, src, nbytes)


cupy = SimpleNamespace(
    empty=lambda shape, dtype=np.float32: np.empty(shape, dtype=dtype).view(FakeArray),
    ascontiguousarray=lambda a: np.ascontiguousarray(a).view(FakeArray),
    cuda=SimpleNamespace(Device=lambda *a: SimpleNamespace(id=0), Stream=FakeStream, Event=FakeEvent,
                         get_current_stream=lambda: _null,
                         runtime=SimpleNamespace(memcpyAsync=_memcpy)),
)


# ---- memory views ---------------------------------------------------------------------------

def _address(p):
    if isinstance(p, np.ndarray):
        return p.ctypes.data
    return int(p)


def _flat(ptr, dtype, count):
    dtype = np.dtype(dtype)
    buf = (ctypes.c_byte * (count * dtype.itemsize)).from_address(_address(ptr))
    return np.frombuffer(buf, dtype=dtype)


def _matrix(ptr, dtype, rows, cols, ld):
    """Column-major rows x cols matrix at ptr with leading dimension ld (a writable view)."""
    flat = _flat(ptr, dtype, (cols - 1) * ld + rows)
    size = flat.itemsize
    return as_strided(flat, shape=(rows, cols), strides=(size, ld * size))


_STORE = {"float32": np.float32, "float16": np.float16, "bfloat16": np.uint16}


def _load(a, kind):
    if kind == "bfloat16":
        return (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return a.astype(np.float64)


def _bf16_bits(v):
    u = np.asarray(v, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def _encoded(values, kind):
    """values in the storage encoding of ``kind`` (bf16 as raw bits)."""
    return _bf16_bits(values) if kind == "bfloat16" else np.asarray(values).astype(_STORE[kind])


def _save(dst, values, kind):
    dst[...] = _encoded(values, kind)


def gemm(*args, **kwargs):
    _run_or_record(_gemm, *args, **kwargs)


def _gemm(transa, transb, m, n, k, a, lda, b, ldb, c, ldc, *, alpha=1.0, beta=0.0,
         a_type="float32", c_type="float32", tf32=False, stream=None):
    st = _STORE[a_type]
    op_a = _load(_matrix(a, st, k, m, lda), a_type).T if transa else _load(_matrix(a, st, m, k, lda), a_type)
    op_b = _load(_matrix(b, st, n, k, ldb), a_type).T if transb else _load(_matrix(b, st, k, n, ldb), a_type)
    out = _matrix(c, _STORE[c_type], m, n, ldc)
    result = alpha * (op_a @ op_b)
    if beta != 0.0:
        result = result + beta * _load(out, c_type)
    _save(out, result.astype(np.float32), c_type)


# ---- pointwise kernels ----------------------------------------------------------------------

def _sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))


class EmulatedKernels:
    def __init__(self, dtype: str, interleaved: bool):
        self.kind, self.interleaved = dtype, interleaved
        self.st = _STORE[dtype]
        for name in ("lstm_forward_step", "lstm_backward_step", "storage_to_f32", "f32_to_storage",
                     "mask_storage", "mask_f32"):
            setattr(self, name, self._launcher(getattr(self, "_" + name)))

    @staticmethod
    def _launcher(fn):
        return lambda grid, block, args: _run_or_record(fn, *args)

    def _gate_index(self, q, hidden):
        j = np.arange(hidden)
        return 4 * j + q if self.interleaved else q * hidden + j

    def _gates(self, rows):  # rows [B, 4H] -> four [B, H]
        hidden = rows.shape[1] // 4
        return [rows[:, self._gate_index(q, hidden)] for q in range(4)]

    def _rows(self, ptr, dtype, batch, cols, ld):
        return _matrix(ptr, dtype, cols, batch, ld).T  # row-major [batch, cols], row stride ld

    def _lstm_forward_step(self, z, bias, c_prev, c_out, h_out, h_ld, h_final, c_final, save,
                           batch, hidden):
        batch, hidden, h_ld = int(batch), int(hidden), int(h_ld)
        zr = self._rows(z, np.float32, batch, 4 * hidden, 4 * hidden)
        pre = [g.astype(np.float64) + bq for g, bq in zip(self._gates(zr), self._gates(
            _flat(bias, np.float32, 4 * hidden).reshape(1, -1).astype(np.float64)))]
        i, f, g, o = _sigmoid(pre[0]), _sigmoid(pre[1]), np.tanh(pre[2]), _sigmoid(pre[3])
        c = f * self._rows(c_prev, np.float32, batch, hidden, hidden) + i * g
        h = o * np.tanh(c)
        self._rows(c_out, np.float32, batch, hidden, hidden)[...] = c
        _save(self._rows(h_out, self.st, batch, hidden, h_ld), h, self.kind)
        if int(save):
            for q, a in enumerate((i, f, g, o)):
                zr[:, self._gate_index(q, hidden)] = a
        if int(h_final):
            _save(self._rows(h_final, self.st, batch, hidden, hidden), h, self.kind)
            _save(self._rows(c_final, self.st, batch, hidden, hidden), c, self.kind)

    def _lstm_backward_step(self, gates, c_cur, c_prev, dy, dy_ld, dh_rec, dc, dz, batch, hidden):
        batch, hidden = int(batch), int(hidden)
        rows = lambda p, dt=np.float32, ld=hidden: self._rows(p, dt, batch, hidden, ld)  # noqa: E731
        i, f, g, o = (a.astype(np.float64) for a in self._gates(
            self._rows(gates, np.float32, batch, 4 * hidden, 4 * hidden)))
        tanh_c = np.tanh(rows(c_cur))
        dh = rows(dy, np.float32, int(dy_ld)) + rows(dh_rec)
        dcell = dh * o * (1 - tanh_c ** 2) + rows(dc)
        dzr = self._rows(dz, self.st, batch, 4 * hidden, 4 * hidden)
        grads = (dcell * g * i * (1 - i), dcell * rows(c_prev) * f * (1 - f), dcell * i * (1 - g * g),
                 dh * tanh_c * o * (1 - o))
        for q, a in enumerate(grads):
            dzr[:, self._gate_index(q, hidden)] = _encoded(a, self.kind)
        rows(dc)[...] = dcell * f

    def _storage_to_f32(self, src, src_ld, dst, dst_ld, rows, cols):
        rows, cols = int(rows), int(cols)
        values = _load(self._rows(src, self.st, rows, cols, int(src_ld)), self.kind)
        self._rows(dst, np.float32, rows, cols, int(dst_ld))[...] = values

    def _f32_to_storage(self, src, src_ld, dst, dst_ld, rows, cols):
        rows, cols = int(rows), int(cols)
        values = self._rows(src, np.float32, rows, cols, int(src_ld)).astype(np.float64)
        _save(self._rows(dst, self.st, rows, cols, int(dst_ld)), values, self.kind)

    def _mask_storage(self, src, mask, dst, n):
        n = int(n)
        _save(_flat(dst, self.st, n), _load(_flat(src, self.st, n), self.kind) * _flat(mask, np.float32, n),
              self.kind)

    def _mask_f32(self, g, mask, n):
        n = int(n)
        _flat(g, np.float32, n)[...] *= _flat(mask, np.float32, n)


class EmulatedMmaKernels:
    """fused_step_mma.cu's kernels: the product from the PACKED weights (decoded through
    fused_mma.unpack_fragments, so the packing the engine did is what gets multiplied), then the
    pointwise kernels above: checks the pointers and the dh chain of the one-kernel-per-step path."""

    def __init__(self, dtype: str, tile):
        self.base, self.tile = EmulatedKernels(dtype, True), tile
        self.fused_step_fwd = self._launcher(self._fwd)
        self.fused_step_bwd = self._launcher(self._bwd)
        self.launches = 0

    def _launcher(self, fn):
        def launch(grid, block, args, shared_mem=0):
            assert tuple(grid) == self.tile.grid(int(args[-2]), int(args[-1])), (grid, self.tile)
            assert block == (self.tile.threads,) and shared_mem == self.tile.smem_bytes()
            self.launches += 1
            _run_or_record(fn, *args)
        return launch

    def _operand(self, packed, k, n):
        from ecornn.engines.fused_mma import unpack_fragments
        words = np.ascontiguousarray(unpack_fragments(np.asarray(packed), k, n))
        return _load(words.view(self.base.st), self.base.kind)

    def _fwd(self, packed, h_prev, h_ld, aligned, z, bias, c_prev, c_out, h_out, y_ld, h_final,
             c_final, save, batch, hidden):
        batch, hidden = int(batch), int(hidden)
        h = _load(self.base._rows(h_prev, self.base.st, batch, hidden, int(h_ld)), self.base.kind)
        zr = self.base._rows(z, np.float32, batch, 4 * hidden, 4 * hidden)
        zr[...] = zr + h @ self._operand(packed, hidden, 4 * hidden)  # as the GEMM with beta=1
        self.base._lstm_forward_step(z, bias, c_prev, c_out, h_out, y_ld, h_final, c_final, save,
                                     batch, hidden)

    def _bwd(self, packed, dz_next, aligned, gates, c_cur, c_prev, dy, dy_ld, dc, dz, batch, hidden):
        batch, hidden = int(batch), int(hidden)
        dzn = _load(self.base._rows(dz_next, self.base.st, batch, 4 * hidden, 4 * hidden), self.base.kind)
        dh_rec = np.ascontiguousarray(dzn @ self._operand(packed, 4 * hidden, hidden), dtype=np.float32)
        self.base._lstm_backward_step(gates, c_cur, c_prev, dy, dy_ld, dh_rec, dc, dz, batch, hidden)


mma_launches = []  # the EmulatedMmaKernels made while emulated (tests count their launches)


def _emulated_mma(dtype, tile, device):
    mma_launches.append(EmulatedMmaKernels(dtype, tile))
    return mma_launches[-1]


@contextlib.contextmanager
def emulated(monkeypatch, graph=False):
    """Patch the fused engine onto the emulator for the duration of a test."""
    from ecornn.engines import fused, fused_schedule
    monkeypatch.setattr(fused, "_cupy", lambda: cupy)
    monkeypatch.setattr(fused, "kernels", lambda dtype, interleaved, dev: EmulatedKernels(dtype, interleaved))
    monkeypatch.setattr(fused, "shared_stream", lambda key: FakeStream())
    monkeypatch.setattr(fused, "mma_kernels", _emulated_mma)
    mma_launches.clear()
    monkeypatch.setattr(fused_schedule, "gemm", gemm)
    fused.bf16_array_dtype.cache_clear()
    fused.clear_cache()
    with fused.using(graph=graph):
        yield fused
    fused.clear_cache()
    fused.bf16_array_dtype.cache_clear()
