"""16-bit GEMMs through cuBLASLt, with the algorithm chosen once per shape (v51).

Why: at the fp32 split projection's shapes (fp16 operands [T B, 3K] x [3K, 4H], fp32 out) cublasGemmEx ran
14-18% slower than cuBLASLt's heuristic choice as torch calls it (v51 probe on the H200: 101 vs 87.5 us at
H=1024 B=8, 65 vs 53 us at B=4). gpu_blas.gemm sends fp16/bf16 operands here where ``gpu_blas.LT_GEMMS`` is set.

Column-major semantics exactly as gpu_blas.gemm. A "plan" per (device, shape, leading dimensions, types,
operand alignments) holds the descriptors and the algorithm: cuBLASLt's first heuristic result
(``ALGO_CHOICE = "heuristic"``), or the fastest of its first ``TIMED_CANDIDATES`` timed once on the call's own
operands (``"timed"``: only where beta is 0, so the repeats rewrite the same output, and never under stream
capture, where the heuristic's first is taken). The workspace is gpu_blas's of the stream (one per stream, set
once), so nothing is allocated under capture. A shape cuBLASLt offers no algorithm for raises LtUnavailable,
and gpu_blas.gemm runs it through cublasGemmEx instead.
"""
from __future__ import annotations

import ctypes

ALGO_CHOICE = "heuristic"   # or "timed"
TIMED_CANDIDATES = 8
TIMED_REPEATS = 5

_TRANSA, _TRANSB = 3, 4                  # cublasLtMatmulDescAttributes_t
_PREF_MAX_WORKSPACE = 1                  # cublasLtMatmulPreferenceAttributes_t
_PREF_MIN_ALIGNMENT = (5, 6, 7, 8)       # A, B, C, D bytes
_SCALE_32F = 0                           # cudaDataType_t CUDA_R_32F

_lib: list = []
_handles: dict = {}   # device -> cublasLt handle
_plans: dict = {}     # plan key -> _Plan
choices: dict = {}    # plan key -> (candidate index, us per candidate or None): what was chosen, for the notes


class LtUnavailable(RuntimeError):
    """cuBLASLt has no algorithm for this GEMM (the caller falls back to cublasGemmEx)."""


class _Algo(ctypes.Structure):
    _fields_ = [("data", ctypes.c_uint64 * 8)]


class _Heuristic(ctypes.Structure):   # cublasLtMatmulHeuristicResult_t
    _fields_ = [("algo", _Algo), ("workspace_size", ctypes.c_size_t), ("state", ctypes.c_int),
                ("waves_count", ctypes.c_float), ("reserved", ctypes.c_int * 4)]


class _Plan:
    def __init__(self, desc, layouts, algo, workspace_size):
        self.desc, self.layouts, self.algo, self.workspace_size = desc, layouts, algo, workspace_size


def _liblt():
    """ctypes view of the libcublasLt that libcublas loaded (the same library instance)."""
    if not _lib:
        from .gpu_blas import _libcublas
        _libcublas()
        with open("/proc/self/maps") as maps:
            paths = sorted({line.split()[-1] for line in maps if "libcublasLt.so" in line})
        lib = ctypes.CDLL(paths[0] if paths else "libcublasLt.so")
        p, i, u64, i64, sz = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64, ctypes.c_int64, ctypes.c_size_t
        signatures = {
            "cublasLtCreate": [ctypes.POINTER(p)],
            "cublasLtMatmulDescCreate": [ctypes.POINTER(p), i, i],
            "cublasLtMatmulDescSetAttribute": [p, i, p, sz],
            "cublasLtMatrixLayoutCreate": [ctypes.POINTER(p), i, u64, u64, i64],
            "cublasLtMatmulPreferenceCreate": [ctypes.POINTER(p)],
            "cublasLtMatmulPreferenceSetAttribute": [p, i, p, sz],
            "cublasLtMatmulPreferenceDestroy": [p],
            "cublasLtMatmulAlgoGetHeuristic": [p, p, p, p, p, p, p, i, ctypes.POINTER(_Heuristic),
                                               ctypes.POINTER(i)],
            "cublasLtMatmul": [p, p, p, p, p, p, p, p, p, p, p, p, ctypes.POINTER(_Algo), p, sz, p],
        }
        for fn, args in signatures.items():
            getattr(lib, fn).argtypes = args
            getattr(lib, fn).restype = i
        _lib.append(lib)
    return _lib[0]


def _check(status: int, what: str) -> None:
    if status != 0:
        raise RuntimeError(f"cuBLASLt {what} failed with status {status}")


def _handle(device: int):
    if device not in _handles:
        raw = ctypes.c_void_p()
        _check(_liblt().cublasLtCreate(ctypes.byref(raw)), "create")
        _handles[device] = raw.value
    return _handles[device]


def alignment(ptr: int) -> int:
    """The largest power of two up to 256 that divides the address (what cuBLASLt's algorithms ask of it)."""
    return min(256, ptr & -ptr) if ptr else 256


def _u32(value: int):
    return ctypes.c_uint32(value)


def _set(setter, obj, attr: int, value) -> None:
    _check(setter(obj, attr, ctypes.byref(value), ctypes.sizeof(value)), f"set attribute {attr}")


def _descriptors(transa, transb, m, n, k, lda, ldb, ldc, at, ct, compute):
    """(matmul descriptor, layouts of A, B, C) of a column-major GEMM."""
    lib = _liblt()
    desc = ctypes.c_void_p()
    _check(lib.cublasLtMatmulDescCreate(ctypes.byref(desc), compute, _SCALE_32F), "matmul descriptor")
    _set(lib.cublasLtMatmulDescSetAttribute, desc, _TRANSA, ctypes.c_int32(transa))
    _set(lib.cublasLtMatmulDescSetAttribute, desc, _TRANSB, ctypes.c_int32(transb))
    shapes = ((at, (m, k) if transa == 0 else (k, m), lda), (at, (k, n) if transb == 0 else (n, k), ldb),
              (ct, (m, n), ldc))
    layouts = []
    for dtype, (rows, cols), ld in shapes:
        layout = ctypes.c_void_p()
        _check(lib.cublasLtMatrixLayoutCreate(ctypes.byref(layout), dtype, rows, cols, ld), "matrix layout")
        layouts.append(layout)
    return desc, tuple(layouts)


def _heuristics(device, desc, layouts, aligns, workspace_bytes, count: int) -> list:
    lib = _liblt()
    pref = ctypes.c_void_p()
    _check(lib.cublasLtMatmulPreferenceCreate(ctypes.byref(pref)), "preference")
    try:
        _set(lib.cublasLtMatmulPreferenceSetAttribute, pref, _PREF_MAX_WORKSPACE, ctypes.c_uint64(workspace_bytes))
        for attr, align in zip(_PREF_MIN_ALIGNMENT, aligns):
            _set(lib.cublasLtMatmulPreferenceSetAttribute, pref, attr, _u32(align))
        results = (_Heuristic * count)()
        found = ctypes.c_int(0)
        a, b, c = layouts
        status = lib.cublasLtMatmulAlgoGetHeuristic(_handle(device), desc, a, b, c, c, pref, count, results,
                                                    ctypes.byref(found))
    finally:
        lib.cublasLtMatmulPreferenceDestroy(pref)
    usable = [r for r in results[:found.value] if r.state == 0] if status == 0 else []
    if not usable:
        raise LtUnavailable(f"cuBLASLt found no algorithm (status {status})")
    return usable


def _run(device, plan, algo, alpha, a, b, beta, c, workspace, stream_ptr) -> None:
    la, lb, lc = plan.layouts
    _check(_liblt().cublasLtMatmul(_handle(device), plan.desc, alpha, a, la, b, lb, beta, c, lc, c, lc,
                                   ctypes.byref(algo), workspace, plan.workspace_size, stream_ptr), "matmul")


def _timed_choice(device, plan, candidates, args, stream) -> tuple:
    """(index, us of each candidate) of the fastest candidate on the call's own operands (beta 0)."""
    import cupy
    times = []
    for cand in candidates:
        plan.workspace_size = cand.workspace_size
        _run(device, plan, cand.algo, *args, stream.ptr)   # warm
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record(stream)
        for _ in range(TIMED_REPEATS):
            _run(device, plan, cand.algo, *args, stream.ptr)
        stop.record(stream)
        stop.synchronize()
        times.append(1e3 * cupy.cuda.get_elapsed_time(start, stop) / TIMED_REPEATS)
    best = min(range(len(times)), key=times.__getitem__)
    return best, times


def gemm(transa, transb, m, n, k, a, lda, b, ldb, c, ldc, *, alpha_ptr, beta_ptr, beta_is_zero: bool,
         at: int, ct: int, compute: int, stream, workspace: int, workspace_bytes: int) -> None:
    """C = alpha op(A) op(B) + beta C (column-major) by cuBLASLt on ``stream``; a, b, c device pointers."""
    import cupy
    device = cupy.cuda.runtime.getDevice()
    aligns = (alignment(a), alignment(b), alignment(c), alignment(c))
    key = (device, transa, transb, m, n, k, lda, ldb, ldc, at, ct, compute, aligns, ALGO_CHOICE)
    plan = _plans.get(key)
    args = (alpha_ptr, a, b, beta_ptr, c, workspace)
    if plan is None:
        desc, layouts = _descriptors(transa, transb, m, n, k, lda, ldb, ldc, at, ct, compute)
        timed = ALGO_CHOICE == "timed" and beta_is_zero and not stream.is_capturing()
        candidates = _heuristics(device, desc, layouts, aligns, workspace_bytes, TIMED_CANDIDATES if timed else 1)
        plan = _Plan(desc, layouts, None, 0)
        best, times = _timed_choice(device, plan, candidates, args, stream) if timed and len(candidates) > 1 \
            else (0, None)
        plan.algo, plan.workspace_size = candidates[best].algo, candidates[best].workspace_size
        _plans[key] = plan
        choices[key] = (best, times)
    _run(device, plan, plan.algo, *args, stream.ptr)
