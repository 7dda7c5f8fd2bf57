"""v48: the persistent engine's batch padding (v47) by one kernel launch (kernels/batch_pad.cu).

layouts.pad_columns pads one array by a strided 2-D memcpy and a fill of the added columns: two passes and, in a
captured graph, two nodes per array, six for a forward's x, h0 and c0 (v48's profile of a padded fp16 H=1024 B=13
replay: 30 µs per call more than the even batch's, 0.12 µs/step). Here every C-ordered CuPy array of the call
is padded by one launch, each row copied and zero-filled in one pass, and a replayed graph's x can be read where
the caller has it (the replay ring's fetched address), so it is copied once, not twice. The same kernel cuts the
outputs back to the caller's columns (first_columns_of), three arrays by one launch instead of a memcpy2D each.
"""
from __future__ import annotations

import functools

import numpy as np

from ..arrays import is_gpu_array, module_of
from ..layouts import first_columns, pad_columns
from ..flag_changes import count_assignments

PAD_BY_KERNEL = True   # False: layouts.pad_columns per array (v47; the ablation)
THREADS, MAX_BLOCKS = 256, 1024


def kernel_pads(a) -> bool:
    """Whether ``a`` is padded by the kernel: a C-ordered CuPy array [N, b, ...] of 2- or 4-byte elements."""
    return bool(PAD_BY_KERNEL) and is_gpu_array(a) and a.ndim >= 2 and a.flags.c_contiguous \
        and a.dtype.itemsize in (2, 4)


def pad_inputs(arrays, batch: int, x_at=None) -> tuple:
    """``arrays`` (1 to 3, each [N, b, ...]) with zero columns added up to ``batch`` columns, as new C-ordered
    arrays (layouts.pad_columns). Those the kernel takes go by one launch; ``x_at`` (the replay ring's fetched
    addresses, persistent_graph.input_reference) makes it read ``arrays[0]`` at the caller's x, so then that
    array must be one the kernel takes."""
    arrays = tuple(arrays)
    if not 1 <= len(arrays) <= 3:
        raise ValueError(f"pad_inputs: 1 to 3 arrays expected, got {len(arrays)}")
    for a in arrays:
        if batch < a.shape[1]:
            raise ValueError(f"pad_inputs: expected a batch of at least {a.shape[1]} columns, got {batch}")
    by_kernel = [kernel_pads(a) for a in arrays]
    if x_at is not None and not by_kernel[0]:
        raise ValueError("pad_inputs: x read at its fetched address must be a C-ordered CuPy array of 2- or "
                         f"4-byte elements, got {type(arrays[0]).__name__} {arrays[0].dtype}")
    out = [None if k else pad_columns(a, batch) for a, k in zip(arrays, by_kernel)]
    taken = [i for i, k in enumerate(by_kernel) if k]
    if taken:
        padded = _launch([arrays[i] for i in taken], batch, x_at if taken[0] == 0 else None)
        for i, p in zip(taken, padded):
            out[i] = p
    return tuple(out)


def first_columns_of(arrays, batch: int, outs=None) -> tuple:
    """The first ``batch`` columns of each of ``arrays`` (1 to 3, [N, B, ...]) as C-ordered arrays (``outs`` where
    given: views to fill; else new ones), layouts.first_columns: by one launch where every array and out is one
    the kernel takes, else array by array."""
    if outs is None:
        outs = [module_of(a).empty((a.shape[0], batch) + tuple(a.shape[2:]), a.dtype) for a in arrays]
    if all(kernel_pads(a) and kernel_pads(o) and a.dtype == o.dtype for a, o in zip(arrays, outs)):
        first_columns_into(outs, arrays)
    else:
        for a, o in zip(arrays, outs):
            first_columns(a, batch, out=o)
    return tuple(outs)


def first_columns_into(outs, arrays) -> None:
    """The first ``out.shape[1]`` columns of each of ``arrays`` (1 to 3, [N, B, ...]) into ``outs`` (C-ordered,
    [N, b, ...]; a replay's outputs cut to the caller's batch) by one launch: the kernel's rows copied, not padded,
    where the destination's rows are the shorter. Every array one the kernel takes (kernel_pads), of its out's dtype."""
    if not 1 <= len(arrays) <= 3 or len(outs) != len(arrays) or not all(
            kernel_pads(a) and kernel_pads(o) and a.dtype == o.dtype and a.shape[0] == o.shape[0]
            and a.shape[2:] == o.shape[2:] and o.shape[1] <= a.shape[1] for a, o in zip(arrays, outs)):
        raise ValueError("first_columns_into: 1 to 3 C-ordered CuPy arrays and outputs of one dtype and shape but a "
                         f"narrower batch expected, got {[(a.shape, a.dtype) for a in arrays]} into "
                         f"{[(o.shape, o.dtype) for o in outs]}")
    _rows(list(zip(arrays, outs)), None)


def _launch(arrays, batch: int, x_at) -> list:
    import cupy as cp
    outs = [cp.empty((a.shape[0], batch) + tuple(a.shape[2:]), a.dtype) for a in arrays]
    _rows(list(zip(arrays, outs)), x_at)
    return outs


def _rows(pairs, x_at) -> None:
    """kernels/batch_pad.cu over (source, destination) pairs: each destination row the source row's first bytes,
    zero past them."""
    import cupy as cp
    args = [x_at if x_at is not None else np.uint64(0)]
    for k in range(3):
        if k < len(pairs):
            a, o = pairs[k]
            rows = a.shape[0] if a.size else 0
            args += [o, a, np.int64(rows), np.int64(_row_bytes(a)), np.int64(_row_bytes(o))]
        else:
            args += [np.uint64(0), np.uint64(0), np.int64(0), np.int64(0), np.int64(0)]
    units = max(o.nbytes for _, o in pairs) // 16 + 1
    _kernel(cp.cuda.Device().id)((max(1, min(-(-units // THREADS), MAX_BLOCKS)),), (THREADS,), tuple(args))


def _row_bytes(a) -> int:
    """A C-ordered array's bytes per row of its first axis (its stride; strides[0] itself may differ where N = 1)."""
    return a.nbytes // a.shape[0] if a.shape[0] else 0


@functools.lru_cache(maxsize=None)
def _kernel(device: int):   # cached: compile_module hashes the source on every call
    from ..gpu import compile_module
    return compile_module("batch_pad.cu").get_function("pad_rows3")


count_assignments(__name__)   # v60: assignments to these flags counted (flag_changes)
