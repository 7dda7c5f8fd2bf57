"""Thin cuBLAS wrapper for CuPy arrays: GEMMs into preallocated outputs on a given stream.

Column-major semantics, as cuBLAS: ``C[m,n] = alpha * op(A)[m,k] @ op(B)[k,n] + beta * C``, with
``lda/ldb/ldc`` the leading dimensions in elements. A row-major array ``R[r, c]`` (row stride ``ld``)
is the column-major matrix ``R^T`` (c x r, leading dimension ``ld``); engines use that identity.

Precision: fp32 inputs run with CUBLAS_COMPUTE_32F and the default math mode, so no TF32 unless
``tf32=True`` asks for it (strict by default); fp16/bf16 inputs run cublasGemmEx with fp32 compute
and an fp32 or 16-bit output. ``matmul_3xtf32`` gets fp32 accuracy out of TF32 tensor cores by
splitting each operand into a TF32 part and a remainder (three TF32 GEMMs). Operands are CuPy arrays (views are fine) or raw device pointers
(int); the element types come from ``a_type`` / ``c_type`` ("float32", "float16", "bfloat16").

The calls go straight to the libcublas that CuPy loaded, through ctypes: CuPy's own wrappers rebind
the handle to CuPy's *current* stream before every call and refuse to run under stream capture,
and both break a multi-stream schedule captured into a CUDA graph. Each stream gets its own handle,
bound once, with its own workspace set once (cublasSetWorkspace): nothing is allocated later, not
under capture either, and two streams never share a workspace.
"""
from __future__ import annotations

import ctypes
import functools

import numpy as np
from .flag_changes import count_assignments

OP_N, OP_T = 0, 1
_CUDA_TYPES = {"float32": 0, "float64": 1, "float16": 2, "bfloat16": 14}
_COMPUTE_32F, _COMPUTE_32F_FAST_TF32, _COMPUTE_64F = 68, 77, 70
_GEMM_DEFAULT = -1
_DEFAULT_MATH = 0
WORKSPACE_BYTES = 32 << 20

_handles: dict = {}      # (device, stream ptr) -> handle
_workspaces: dict = {}   # handle -> CuPy buffer given to cublasSetWorkspace (kept alive)
# alpha/beta live in host memory (pointer mode HOST); cuBLAS reads them at enqueue time.
_SCALARS = {}
_lib = []


def _libcublas():
    """ctypes view of the libcublas CuPy loaded (the same file, so the same library instance)."""
    if not _lib:
        from cupy_backends.cuda.libs import cublas  # noqa: F401  (loads libcublas)
        with open("/proc/self/maps") as maps:
            paths = sorted({line.split()[-1] for line in maps
                            if "libcublas.so" in line and "libcublasLt" not in line})
        lib = ctypes.CDLL(paths[0] if paths else "libcublas.so")
        p, i, ll = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong
        signatures = {
            "cublasCreate_v2": [ctypes.POINTER(p)],
            "cublasSetStream_v2": [p, p],
            "cublasSetMathMode": [p, i],
            "cublasSetWorkspace_v2": [p, p, ctypes.c_size_t],
            "cublasGemmEx": [p, i, i, i, i, i, p, p, i, i, p, i, i, p, p, i, i, i, i],
            "cublasGemmStridedBatchedEx": [p, i, i, i, i, i, p, p, i, i, ll, p, i, i, ll, p, p, i, i,
                                           ll, i, i, i],
        }
        for fn, args in signatures.items():
            getattr(lib, fn).argtypes = args
            getattr(lib, fn).restype = i
        _lib.append(lib)
    return _lib[0]


def _check(status: int, what: str) -> None:
    if status != 0:
        raise RuntimeError(f"cuBLAS {what} failed with status {status}")


def _scalar(value: float, compute: int):
    dtype = np.float64 if compute == _COMPUTE_64F else np.float32
    key = (float(value), dtype)
    if key not in _SCALARS:
        _SCALARS[key] = np.array([value], dtype=dtype)
    return _SCALARS[key].ctypes.data


def handle_for(stream) -> int:
    """The cuBLAS handle bound to ``stream``, with its own workspace (created once per stream)."""
    import cupy
    key = (cupy.cuda.Device().id, stream.ptr)
    handle = _handles.get(key)
    if handle is None:
        lib = _libcublas()
        raw = ctypes.c_void_p()
        _check(lib.cublasCreate_v2(ctypes.byref(raw)), "create")
        handle = raw.value
        _check(lib.cublasSetMathMode(handle, _DEFAULT_MATH), "setMathMode")
        _check(lib.cublasSetStream_v2(handle, stream.ptr or None), "setStream")
        workspace = cupy.empty(WORKSPACE_BYTES, dtype=np.uint8)
        _check(lib.cublasSetWorkspace_v2(handle, workspace.data.ptr, WORKSPACE_BYTES), "setWorkspace")
        _workspaces[handle] = workspace
        _handles[key] = handle
    return handle


def workspace_status() -> dict:
    """How many cuBLAS handles (one per device and stream) and workspaces exist (device logs)."""
    return {"handles": len(_handles), "workspaces": len(_workspaces)}


def _ptr(a) -> int:
    return a if isinstance(a, int) else a.data.ptr


def _compute_type(a_type: str, tf32: bool) -> int:
    if a_type == "float64":
        return _COMPUTE_64F
    if a_type == "float32" and tf32:
        return _COMPUTE_32F_FAST_TF32
    return _COMPUTE_32F


def gemm(transa: int, transb: int, m: int, n: int, k: int, a, lda: int, b, ldb: int, c, ldc: int,
         *, alpha=1.0, beta=0.0, a_type="float32", c_type="float32", tf32=False, stream=None):
    """C = alpha op(A) op(B) + beta C (column-major) on ``stream`` (default: CuPy's current)."""
    import cupy
    stream = stream or cupy.cuda.get_current_stream()
    compute = _compute_type(a_type, tf32)
    at, ct = _CUDA_TYPES[a_type], _CUDA_TYPES[c_type]
    _check(_libcublas().cublasGemmEx(handle_for(stream), transa, transb, m, n, k, _scalar(alpha, compute),
                                     _ptr(a), at, lda, _ptr(b), at, ldb, _scalar(beta, compute), _ptr(c),
                                     ct, ldc, compute, _GEMM_DEFAULT), "GemmEx")


def gemm_strided_batched(transa: int, transb: int, m: int, n: int, k: int, a, lda: int, stride_a: int,
                         b, ldb: int, stride_b: int, c, ldc: int, stride_c: int, batch: int, *,
                         alpha=1.0, beta=0.0, a_type="float32", c_type="float32", tf32=False,
                         stream=None):
    """``batch`` independent GEMMs whose operands sit ``stride_*`` elements apart."""
    import cupy
    stream = stream or cupy.cuda.get_current_stream()
    compute = _compute_type(a_type, tf32)
    at, ct = _CUDA_TYPES[a_type], _CUDA_TYPES[c_type]
    _check(_libcublas().cublasGemmStridedBatchedEx(
        handle_for(stream), transa, transb, m, n, k, _scalar(alpha, compute), _ptr(a), at, lda, stride_a,
        _ptr(b), at, ldb, stride_b, _scalar(beta, compute), _ptr(c), ct, ldc, stride_c, batch, compute,
        _GEMM_DEFAULT), "GemmStridedBatchedEx")


def matmul_rows(a, b_t, c, *, rows: int, cols: int, inner: int, lda: int, ldb: int, ldc: int,
                alpha=1.0, beta=0.0, a_type="float32", c_type="float32", tf32=False, stream=None):
    """Row-major ``C[rows, cols] = alpha * A[rows, inner] @ B_t[cols, inner]^T + beta * C``.

    The common LSTM shape (activations times a [out, in] weight matrix): in cuBLAS terms
    C^T = B_t^T-op(T) applied to A^T, a plain "TN" GEMM with m=cols, n=rows.
    """
    gemm(OP_T, OP_N, cols, rows, inner, b_t, ldb, a, lda, c, ldc, alpha=alpha, beta=beta,
         a_type=a_type, c_type=c_type, tf32=tf32, stream=stream)


def _row_major_operand(a):
    """(cuBLAS op, leading dimension, C-contiguous array) of a row-major matrix ``a``: as given, or
    as the transpose of a C-contiguous one (a ``.T`` view costs no copy)."""
    if a.flags.c_contiguous:
        return OP_N, a.shape[1], a
    if a.T.flags.c_contiguous:
        return OP_T, a.shape[0], a.T
    a = a.copy(order="C")
    return OP_N, a.shape[1], a


_ITEMSIZE = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2}


def matmul(a, b, out, *, beta=0.0, tf32=False, a_type="float32", stream=None):
    """Row-major ``out = a @ b + beta * out`` into ``out`` (C-contiguous; ``a`` and ``b``
    C-contiguous or transposed views of such): column-major ``out^T = b^T a^T``. ``a_type`` is the
    element type of both operands; 16-bit ones may be raw 16-bit words (bf16 as uint16). ``out`` is
    fp32, or with 16-bit operands (v31) of their type: fp32 accumulation, rounded once at the end."""
    _check_element_size("matmul", a, b, a_type)
    op_b, ld_b, b_c = _row_major_operand(b)
    op_a, ld_a, a_c = _row_major_operand(a)
    gemm(op_b, op_a, b.shape[1], a.shape[0], a.shape[1], b_c, ld_b, a_c, ld_a, out, out.shape[1],
         beta=beta, a_type=a_type, c_type=_out_type(out, a_type), tf32=tf32, stream=stream)
    return out


def _check_element_size(what: str, a, b, a_type: str) -> None:
    for operand, name in ((a, "a"), (b, "b")):
        if operand.dtype.itemsize != _ITEMSIZE[a_type]:
            raise ValueError(f"{what}: operand {name} should hold {a_type} elements "
                             f"({_ITEMSIZE[a_type]} bytes), got {operand.dtype}")


def _out_type(out, a_type: str) -> str:
    """matmul's C type: fp32, or a 16-bit ``out`` holding ``a_type`` (fp16; bf16, or its uint16 words)."""
    name = str(out.dtype)
    if name == "float32":
        return "float32"
    if a_type != "float32" and name in (a_type, "uint16" if a_type == "bfloat16" else a_type):
        return a_type
    want = "float32" if a_type == "float32" else f"float32 or {a_type}"
    raise ValueError(f"matmul: out should be {want}, got {out.dtype}")


# ---- fp32-accurate GEMMs on TF32 tensor cores ("3xTF32") ----------------------------------------
_TF32_KEEP = np.uint32(0xFFFFE000)   # sign, exponent and the 10 mantissa bits TF32 holds
_TF32_HALF = np.uint32(0x00001000)   # half a TF32 unit in the last place: rounds to nearest


def tf32_parts(a):
    """(hi, lo) with ``a == hi + lo`` exactly: hi is ``a`` rounded to TF32 (10 mantissa bits, so a
    TF32 GEMM reads it without loss), lo the remainder (|lo| <= 2^-11 |a|). NumPy or CuPy; a
    transposed view of a contiguous array is split through its base, so the GEMM keeps its op."""
    from .arrays import module_of
    xp = module_of(a)
    if not a.flags.c_contiguous and a.T.flags.c_contiguous:
        hi, lo = tf32_parts(a.T)
        return hi.T, lo.T
    a = xp.ascontiguousarray(a, dtype=xp.float32)
    if xp is not np:   # v22: one pass on the GPU (the NumPy lines below take three)
        hi, lo = xp.empty_like(a), xp.empty_like(a)
        _tf32_split_kernel()(a, hi, lo)
        return hi, lo
    hi = ((a.view(xp.uint32) + _TF32_HALF) & _TF32_KEEP).view(xp.float32)
    return hi, a - hi


@functools.lru_cache(maxsize=None)
def _tf32_split_kernel():
    """tf32_parts' arithmetic as one CuPy elementwise kernel: bitwise the NumPy lines."""
    import cupy
    return cupy.ElementwiseKernel(
        "float32 a", "float32 hi, float32 lo",
        "hi = __uint_as_float((__float_as_uint(a) + 0x1000u) & 0xFFFFE000u); lo = a - hi;",
        "ecornn_tf32_split")


# v36: long reductions in chunks. The tensor cores' fp32 accumulation loses more the longer a GEMM's
# reduction runs (fp32 backward: one-pass dX 9.5e-6 of float64 at K=4096, 1.4e-5 at 6144; results/
# persistent_v35): a split operand is laid out chunk by chunk of its reduction, and each chunk is a GEMM
# of its own that adds its sums to the ones before (beta = 1: cuBLAS's epilogue, rounded to nearest).
def reduction_spans(k: int, chunk=None) -> list:
    """[(start, length)] of a reduction over ``k`` cut into ``chunk``-long pieces (the last shorter);
    one span for ``chunk`` None or >= k."""
    if chunk is None or _checked_chunk(chunk) >= k:
        return [(0, k)]
    return [(start, min(chunk, k - start)) for start in range(0, k, chunk)]


def _checked_chunk(chunk) -> int:
    if isinstance(chunk, bool) or int(chunk) != chunk or chunk < 1:
        raise ValueError(f"a reduction chunk should be a positive integer or None, got {chunk!r}")
    return int(chunk)


def split_chunks(parts, axis: int, chunk=None):
    """NumPy: three equally shaped parts concatenated along ``axis``, chunk by chunk of it:
    [p0_0 | p1_0 | p2_0 | p0_1 | ...] (kernels/split_chunks.cuh; one chunk: [p0 | p1 | p2])."""
    pieces = []
    for start, length in reduction_spans(parts[0].shape[axis], chunk):
        window = tuple(slice(start, start + length) if i == axis else slice(None) for i in range(2))
        pieces += [p[window] for p in parts]
    return np.concatenate(pieces, axis=axis)


def _kernel_chunk(k: int, chunk) -> int:
    """The split kernels' chunk argument: ``chunk`` (checked), or k (one chunk) for None."""
    return max(1, k) if chunk is None else _checked_chunk(chunk)


def matmul_spans(a, b, out, spans, *, beta=0.0, tf32=False, a_type="float32", stream=None):
    """matmul (row-major ``out = a @ b + beta * out``) as one GEMM per span (start, length) of the
    reduction, each adding to the sums before it; one span: exactly matmul."""
    if len(spans) == 1:
        return matmul(a, b, out, beta=beta, tf32=tf32, a_type=a_type, stream=stream)
    if a.shape[1] != b.shape[0] or sum(length for _, length in spans) != a.shape[1]:
        raise ValueError(f"matmul_spans: a [m, k], b [k, n] and spans covering k expected, got "
                         f"{tuple(a.shape)}, {tuple(b.shape)}, {spans}")
    _check_element_size("matmul_spans", a, b, a_type)
    op_b, ld_b, b_c = _row_major_operand(b)
    op_a, ld_a, a_c = _row_major_operand(a)
    for i, (start, length) in enumerate(spans):
        # views of the span (their leading dimensions stay the whole operands')
        a_span = _span_of(a_c, start, length, by_rows=op_a != OP_N)   # a [m, k] reduces along its columns
        b_span = _span_of(b_c, start, length, by_rows=op_b == OP_N)   # b [k, n] along its rows
        gemm(op_b, op_a, b.shape[1], a.shape[0], length, b_span, ld_b, a_span, ld_a, out, out.shape[1],
             beta=beta if i == 0 else 1.0, a_type=a_type, c_type=_out_type(out, a_type), tf32=tf32,
             stream=stream)
    return out


def _span_of(base, start: int, length: int, by_rows: bool):
    """Rows or columns [start, start + length) of a C-ordered operand: a view whose first element is where cuBLAS
    reads the span from."""
    return base[start:start + length] if by_rows else base[:, start:start + length]


# v25: 3xTF32's three products as one TF32 GEMM over a 3x longer reduction,
# [a_lo | a_hi | a_hi] . [b_hi ; b_lo ; b_hi]: one launch instead of three and no beta passes over
# out (H100, T=256 projections: 1.6-2.3x faster than matmul_3xtf32, benchmarks/notes_persistent.md).
# cuBLAS runs the reduction in order, so the small terms still accumulate first.
def tf32_split3(a, reduce_axis: int, lo_first: bool, chunk=None):
    """The one-pass operand of a 2-D fp32 ``a`` whose GEMM reduces along ``reduce_axis``: a's
    tf32_parts concatenated three times along that axis, (lo, hi, hi) for the left operand
    (``lo_first``), (hi, lo, hi) for the right; v36, with ``chunk``: chunk by chunk of the reduction
    (split_chunks, for a GEMM per chunk). NumPy or CuPy (one kernel, kernels/tf32_split.cu); a
    transposed view of a contiguous array is split through its base and comes back transposed."""
    from .arrays import module_of
    xp = module_of(a)
    if a.ndim != 2 or reduce_axis not in (0, 1):
        raise ValueError(f"tf32_split3: a 2-D array and reduce_axis 0 or 1 expected, got shape "
                         f"{tuple(a.shape)} and reduce_axis {reduce_axis!r}")
    if not a.flags.c_contiguous and a.T.flags.c_contiguous:
        return tf32_split3(a.T, 1 - reduce_axis, lo_first, chunk).T
    a = xp.ascontiguousarray(a, dtype=xp.float32)
    if xp is np:
        hi, lo = tf32_parts(a)
        return split_chunks((lo, hi, hi) if lo_first else (hi, lo, hi), reduce_axis, chunk)
    rows, k = a.shape
    out = xp.empty((rows, 3 * k) if reduce_axis == 1 else (3 * rows, k), xp.float32)
    threads = 256
    grid = (min((k + threads - 1) // threads, 64), min(rows, 65535))
    chunk = _kernel_chunk(a.shape[reduce_axis], chunk)
    _tf32_split3_kernel(xp.cuda.Device().id)(grid, (threads,), (a, np.int32(rows), np.int32(k),
                                            np.int32(reduce_axis == 0), np.int32(chunk), np.int32(lo_first), out))
    return out


@functools.lru_cache(maxsize=None)
def _tf32_split3_kernel(device: int):   # cached: compile_module hashes the source on every call
    from .gpu import compile_module
    return compile_module("tf32_split.cu").get_function("tf32_split3")


def matmul_3xtf32_onepass(a, b, out, *, beta=0.0, a3=None, b3=None, stream=None, chunk=None):
    """Row-major fp32 ``out = a @ b + beta * out`` to 3xTF32's accuracy (matmul_3xtf32) in one TF32
    GEMM: a3 = tf32_split3(a, 1, True) and b3 = tf32_split3(b, 0, False), either made before
    (prepared weights) or here. v36, ``chunk``: one GEMM per chunk of the reduction, the operands split
    with the same chunk."""
    a3 = tf32_split3(a, 1, True, chunk) if a3 is None else a3
    b3 = tf32_split3(b, 0, False, chunk) if b3 is None else b3
    expected = ((a.shape[0], 3 * a.shape[1]), (3 * b.shape[0], b.shape[1]))
    if a.shape[1] != b.shape[0] or (tuple(a3.shape), tuple(b3.shape)) != expected:
        raise ValueError(f"matmul_3xtf32_onepass: a [m, k], b [k, n], a3 [m, 3k], b3 [3k, n] expected, got "
                         f"{tuple(a.shape)}, {tuple(b.shape)}, {tuple(a3.shape)}, {tuple(b3.shape)}")
    return matmul_spans(a3, b3, out, _split_spans(a.shape[1], chunk), beta=beta, tf32=True, stream=stream)


def _split_spans(k: int, chunk) -> list:
    """The spans of a three-part split operand (3k long) whose reduction over k was split in ``chunk``s."""
    return [(3 * start, 3 * length) for start, length in reduction_spans(k, chunk)]


# v28: fp32-accurate GEMMs on the fp16 tensor cores (kernels/fp16_split.cu): every row of both operands
# (the right one's rows are the result's columns) scaled by a power of two and split into fp16 hi and lo,
# three products in one fp16 GEMM over a 3x longer reduction, then the scales undone. ~22 significant
# bits relative to each row's largest value, where 3xTF32 keeps them relative to every element; twice
# 3xTF32's tensor-core rate.
SPLIT16_TOP = 14   # a scaled row's largest |value| lies in [2^(TOP-1), 2^TOP): far from fp16's 65504


def split16_exponents(row_max):
    """The powers of two that bring each row maximum (> 0, finite) into [2^13, 2^14); 0 otherwise."""
    m = np.asarray(row_max, np.float32)
    ok = np.isfinite(m) & (m > 0)
    return np.where(ok, SPLIT16_TOP - np.frexp(np.where(ok, m, 1.0))[1], 0).astype(np.int32)


def _row_scaled_halves(rows, lo_scale: float) -> tuple:
    """NumPy's (hi, lo, e) of the fp32 rows [n, k] as kernels/fp16_split.cu splits them: each row times
    2^e (split16_exponents), hi = fp16(that), lo = fp16((that - hi) * lo_scale)."""
    e = split16_exponents(np.abs(rows).max(axis=1, initial=0.0))
    scaled = np.ldexp(rows, e[:, None]).astype(np.float32)
    hi = scaled.astype(np.float16)
    return hi, ((scaled - hi.astype(np.float32)) * np.float32(lo_scale)).astype(np.float16), e


def fp16_split3(a, lo_first: bool, a_at=None, chunk=None):
    """(out [rows, 3k] fp16, row_exp [rows] int32) of a 2-D fp32 ``a`` (kernels/fp16_split.cu): parts
    (hi, lo, hi) or, ``lo_first``, (lo, hi, hi) of every row scaled by its power of two, 2^-row_exp;
    v36, with ``chunk``: chunk by chunk of the columns (split_chunks). NumPy or CuPy (one kernel).
    ``a_at`` (v35, in a replayed graph's capture): the replay ring's fetched addresses; the kernel then
    reads the caller's x there, ``a`` being its (unfilled) buffer."""
    from .arrays import module_of
    xp = module_of(a)
    if a.ndim != 2:
        raise ValueError(f"fp16_split3: a 2-D array expected, got shape {tuple(a.shape)}")
    if a_at is not None and not (a.dtype == xp.float32 and a.flags.c_contiguous):
        raise ValueError(f"fp16_split3: a read by reference must be its C-ordered fp32 buffer, got {a.dtype}"
                         f"{'' if a.flags.c_contiguous else ' (not C-ordered)'}")
    a = xp.ascontiguousarray(a, dtype=xp.float32)
    rows, k = a.shape
    if xp is np:
        hi, lo, e = _row_scaled_halves(a, 1.0)
        return split_chunks((lo, hi, hi) if lo_first else (hi, lo, hi), 1, chunk), (-e).astype(np.int32)
    out, row_exp = xp.empty((rows, 3 * k), xp.float16), xp.empty((rows,), xp.int32)
    kernels, kernel_chunk = _fp16_split_kernels(xp.cuda.Device().id), _kernel_chunk(k, chunk)
    args = (a, np.int32(rows), np.int32(k), np.int32(kernel_chunk), np.int32(lo_first), out, row_exp,
            a_at if a_at is not None else np.uint64(0))
    if splits_by_warps(k, kernel_chunk):
        kernels[4]((max(1, min(-(-rows // 8), 4096)),), (256,), args)
    else:
        kernels[0]((min(rows, 4096),), (256,), args)
    return out, row_exp


SPLIT_BY_WARPS = True   # v48: fp16_split3_warps where k and the chunk are multiples of 4; False: v28's kernel


def splits_by_warps(k: int, kernel_chunk: int) -> bool:
    """v48: whether fp16_split3 runs a warp per row, four values per lane (SPLIT_BY_WARPS; every chunk then
    starts and ends on a multiple of 4, so four values land together in each part), else v28's block per row."""
    return bool(SPLIT_BY_WARPS) and k % 4 == 0 and kernel_chunk % 4 == 0


@functools.lru_cache(maxsize=None)
def _fp16_split_kernels(device: int):   # cached: compile_module hashes the source on every call
    from .gpu import compile_module
    module = compile_module("fp16_split.cu")
    return (module.get_function("fp16_split3"), module.get_function("unscale_rows_cols"),
            module.get_function("split_x_rows"), module.get_function("unscale_rows_cols4"),
            module.get_function("fp16_split3_warps"))


def split_x_rows(x, batch: int, tail_floats: int = 0):
    """v29: the fp32 layer input ``x`` [T, B, k] (or [T * B, k]) as the split kernel's in-kernel
    projection reads it (kernels/fp16_split.cu, split_x_rows): one flat fp16 array of the hi rows
    [T * B, k], the lo rows [T * B, k] (lo = (x 2^e - hi) 2^11), the rows' factors 2^-e [T * B] as fp32
    (padded to 4, 16-byte aligned), then ``tail_floats`` fp32 left for the caller (split_x_parts).
    NumPy or CuPy (one kernel)."""
    from .arrays import module_of
    xp = module_of(x)
    k = x.shape[-1]
    if x.ndim not in (2, 3) or x.size % (batch * k) or (x.ndim == 3 and x.shape[1] != batch):
        raise ValueError(f"split_x_rows: x [T, B={batch}, k] or [T * B, k] expected, got shape {tuple(x.shape)}")
    rows = xp.ascontiguousarray(x, dtype=xp.float32).reshape(-1, k)
    n = rows.shape[0]
    out = xp.empty(2 * n * k + 2 * (-(-n // 4) * 4 + tail_floats), xp.float16)
    if xp is np:
        hi, lo, e = _row_scaled_halves(rows, 2048.0)   # lo as the split kernel's h: times 2^11
        out[:2 * n * k] = np.concatenate((hi.reshape(-1), lo.reshape(-1)))
        out[2 * n * k:2 * n * (k + 1)] = np.ldexp(np.float32(1.0), -e).astype(np.float32).view(np.float16)
        return out
    _fp16_split_kernels(xp.cuda.Device().id)[2]((min(n, 4096),), (256,), (rows, np.int32(n), np.int32(k), out))
    return out


def split_x_parts(split, rows: int, k: int) -> tuple:
    """Views of split_x_rows' output for ``rows`` rows of ``k`` values: (hi [rows, k], lo [rows, k] fp16,
    factors [rows] fp32, the tail fp32)."""
    from .arrays import module_of
    xp = module_of(split)
    values = rows * k
    floats = split[2 * values:].view(xp.float32)
    padded = -(-rows // 4) * 4
    return (split[:values].reshape(rows, k), split[values:2 * values].reshape(rows, k), floats[:rows],
            floats[padded:])


def matmul_fp16_split3(a3, a_exp, b3_t, b_exp, out, *, stream=None, unscale=True, chunk=None):
    """Row-major fp32 ``out = a @ b`` from (a3, a_exp) = fp16_split3(a, False) and (b3_t, b_exp)
    = fp16_split3(b.T, True) (prepared weights): one fp16 GEMM, then every element times 2 to its row's
    a_exp plus its column's b_exp (``unscale=False``: left to the caller, out in the scaled units).
    v36, ``chunk``: one GEMM per chunk of the reduction, both operands split with that chunk."""
    rows, k3 = a3.shape
    if b3_t.shape[1] != k3 or out.shape != (rows, b3_t.shape[0]) or a_exp.shape != (rows,) \
            or b_exp.shape != (b3_t.shape[0],):
        raise ValueError(f"matmul_fp16_split3: a3 [m, 3k], a_exp [m], b3_t [n, 3k], b_exp [n], out [m, n] "
                         f"expected, got {tuple(a3.shape)}, {tuple(a_exp.shape)}, {tuple(b3_t.shape)}, "
                         f"{tuple(b_exp.shape)}, {tuple(out.shape)}")
    from .arrays import module_of
    xp = module_of(out)
    spans = _split_spans(k3 // 3, chunk)
    if xp is np:   # fp32 sums, chunk by chunk
        product = np.zeros(out.shape, np.float32)
        for start, length in spans:
            part = slice(start, start + length)
            product += a3[:, part].astype(np.float32) @ b3_t[:, part].astype(np.float32).T
        out[...] = np.ldexp(product, a_exp[:, None] + b_exp[None, :]) if unscale else product
        return out
    matmul_spans(a3, b3_t.T, out, spans, a_type="float16", stream=stream)
    if unscale:
        unscale_rows_cols(out, a_exp, b_exp)
    return out


UNSCALE_BY_FOURS = True   # v35: unscale_rows_cols4 where the layout allows; False: v28's flat pass (the ablation)


def unscale_rows_cols(out, row_exp, col_exp) -> None:
    """``out`` [rows, n] (C-ordered fp32 on the GPU) times 2^(row_exp[r] + col_exp[c]) in place: one
    kernel, four columns per thread where n % 4 == 0 and out and col_exp are 16-byte aligned (v35),
    else one element per thread (the same values bitwise)."""
    from .arrays import data_address
    rows, n = out.shape
    kernels = _fp16_split_kernels(out.device.id)
    aligned = data_address(out) % 16 == 0 and data_address(col_exp) % 16 == 0
    if UNSCALE_BY_FOURS and n % 4 == 0 and out.flags.c_contiguous and aligned:
        threads = min(256, -(-n // 4))
        across = -(-n // (4 * threads))
        kernels[3]((across, max(1, min(rows, 4096 // across))), (threads,),
                   (out, np.int32(rows), np.int32(n), row_exp, col_exp))
        return
    blocks = min(-(-rows * n // 256), 8 * 1024)
    kernels[1]((blocks,), (256,), (out, np.int64(rows), np.int32(n), row_exp, col_exp))


def matmul_3xtf32(a, b, out, *, beta=0.0, a_parts=None, b_parts=None, stream=None):
    """Row-major fp32 ``out = a @ b + beta * out`` to fp32 accuracy on TF32 tensor cores:
    a_lo b_hi + a_hi b_lo + a_hi b_hi, the small terms first. What is lost: a_lo b_lo and TF32's
    rounding of the lo parts, each <= 2^-21 of a product (strict fp32 rounds at 2^-24 per
    operation). ``a_parts`` / ``b_parts``: tf32_parts computed before (prepared weights)."""
    a_hi, a_lo = a_parts or tf32_parts(a)
    b_hi, b_lo = b_parts or tf32_parts(b)
    matmul(a_lo, b_hi, out, beta=beta, tf32=True, stream=stream)
    matmul(a_hi, b_lo, out, beta=1.0, tf32=True, stream=stream)
    return matmul(a_hi, b_hi, out, beta=1.0, tf32=True, stream=stream)


count_assignments(__name__)   # v60: assignments to these flags counted (flag_changes)
