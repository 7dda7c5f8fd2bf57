"""`persistent` v48 on the GPU: the fp16 split of fp32 rows by one warp per row (gpu_blas.fp16_split3,
kernels/fp16_split.cu fp16_split3_warps) is bitwise v28's block-per-row kernel and NumPy's split, chunked or
not, either part order, rows of zeros and of extreme magnitudes, a source off 16-byte alignment read through
the ring's fetched address; shapes it cannot take (k or the chunk not a multiple of 4) go to the old kernel.
The fp32 forwards that split x (graph replays reading the caller's x, two layers bidirectional) are bitwise
the old kernel's and within fp32's 1e-5 of float64."""
import numpy as np
import pytest

from ecornn import LayerWeights, LSTMConfig, gpu_blas
from ecornn.engines import persistent, reference
from tests.helpers import random_problem, rel_err
from tests.test_persistent_gpu import FP32_TOL, _as64

pytestmark = pytest.mark.gpu


def _rows(rng, rows, k):
    """Random fp32 rows of very different scales, a row of zeros and one with a signed zero and a subnormal."""
    a = (rng.standard_normal((rows, k)) * np.exp2(rng.integers(-30, 30, (rows, 1)))).astype(np.float32)
    a[0] = 0.0
    if rows > 1:
        a[1, :2] = -0.0, 1e-41
    return a


def _split_both(a, lo_first, chunk, monkeypatch, a_at=None, source=None):
    """{by_warps: (out, row_exp) as NumPy} of the GPU split of ``source`` (default: ``a`` on the GPU)."""
    import cupy as cp
    results = {}
    for by_warps in (True, False):
        monkeypatch.setattr(gpu_blas, "SPLIT_BY_WARPS", by_warps)
        out, row_exp = gpu_blas.fp16_split3(cp.asarray(a) if source is None else source, lo_first, a_at, chunk)
        results[by_warps] = (cp.asnumpy(out), cp.asnumpy(row_exp))
    return results


@pytest.mark.parametrize("rows, k, chunk, lo_first", [
    (2048, 1024, None, False),   # fp32 H=1024 B=8's x: T B rows of the input size
    (1024, 1024, None, True),    # the weights' side (lo, hi, hi)
    (33, 100, None, False),      # rows not a multiple of the 8 warps per block; k not of 128
    (5, 4, None, True),
    (64, 1024, 256, False),      # v36's chunks
    (9, 1000, 300, True),        # a shorter last chunk (100)
    (40000, 8, None, False),     # more rows than one launch's 4096 blocks x 8 warps: grid-strided
])
def test_the_warp_split_is_bitwise_the_block_split_and_numpy(rng, monkeypatch, rows, k, chunk, lo_first):
    a = _rows(rng, rows, k)
    results = _split_both(a, lo_first, chunk, monkeypatch)
    want_out, want_exp = gpu_blas.fp16_split3(a, lo_first, chunk=chunk)
    for out, row_exp in results.values():
        assert np.array_equal(out.view(np.uint16), want_out.view(np.uint16))
        assert np.array_equal(row_exp, want_exp)
    assert (results[True][0][0] == 0).all()   # the zero row splits into zeros


def test_non_finite_values_split_alike(rng, monkeypatch):
    """NaN and inf (NumPy's maximum propagates NaN, the kernels' fmaxf skips it: the two kernels are compared)."""
    a = _rows(rng, 16, 64)
    a[2, 5], a[3, 0], a[4, 63] = np.nan, np.inf, -np.inf
    results = _split_both(a, False, None, monkeypatch)
    assert np.array_equal(results[True][0].view(np.uint16), results[False][0].view(np.uint16))
    assert np.array_equal(results[True][1], results[False][1])


@pytest.mark.parametrize("k, chunk, launched", [(1024, None, 4), (1001, None, 0), (1024, 254, 0), (1024, 256, 4)])
def test_the_kernel_launched(monkeypatch, k, chunk, launched):
    """The warp kernel where k and the chunk are multiples of 4, v28's kernel otherwise."""
    import cupy as cp
    got = []
    kernels = gpu_blas._fp16_split_kernels(cp.cuda.Device().id)
    monkeypatch.setattr(gpu_blas, "_fp16_split_kernels", lambda device: tuple(
        (lambda f, i: (lambda *a: got.append(i) or f(*a)))(f, i) for i, f in enumerate(kernels)))
    gpu_blas.fp16_split3(cp.ones((16, k), cp.float32), False, chunk=chunk)
    assert got == [launched]


@pytest.mark.parametrize("offset_floats", [0, 1, 2])
def test_a_source_read_by_its_fetched_address(rng, monkeypatch, offset_floats):
    """a_at = {x, h0, c0, tag matched}: the rows are read at x (4 or 8 bytes off 16-byte alignment: value by
    value); with the tag unmatched the buffer itself is read."""
    import cupy as cp
    a = _rows(rng, 40, 512)
    room = cp.zeros(a.size + 4, cp.float32)
    at = room[offset_floats:offset_floats + a.size].reshape(a.shape)
    at[...] = cp.asarray(a)
    buffer = cp.full(a.shape, 3.0, cp.float32)
    matched = cp.asarray(np.array([at.data.ptr, 0, 0, 1], np.int64))
    got = _split_both(a, False, None, monkeypatch, a_at=matched, source=buffer)
    want = gpu_blas.fp16_split3(a, False)
    for out, row_exp in got.values():
        assert np.array_equal(out.view(np.uint16), want[0].view(np.uint16)) and np.array_equal(row_exp, want[1])
    unmatched = cp.asarray(np.array([at.data.ptr, 0, 0, 0], np.int64))
    got = _split_both(a, False, None, monkeypatch, a_at=unmatched, source=buffer)
    want = gpu_blas.fp16_split3(np.full(a.shape, 3.0, np.float32), False)
    assert np.array_equal(got[True][0].view(np.uint16), want[0].view(np.uint16))


def _calls(rng, config, n):
    import cupy as cp
    return [tuple(cp.asarray(a) for a in random_problem(rng, config)[1:]) for _ in range(n)]


@pytest.mark.parametrize("hidden, layers, bidir, batch, steps", [
    (1024, 1, False, 8, 256),   # the fp32 B=8 row: x split by reference in the replays
    (1024, 1, False, 4, 100),
    (300, 2, True, 3, 50),      # odd sizes; layer 1 splits y
])
def test_fp32_forwards_are_bitwise_the_block_split(rng, monkeypatch, hidden, layers, bidir, batch, steps):
    """Eager and three replays (x read by reference where the split is its reader) under each kernel: the same
    bits, and within 1e-5 of float64."""
    import cupy as cp
    config = LSTMConfig(hidden, hidden, layers, bidir, "float32", batch, steps)
    weights, _, _, _ = random_problem(rng, config)
    gpu_weights = [LayerWeights(*(cp.asarray(a) for a in w)) for w in weights]
    calls = _calls(rng, config, 4)
    outs = {}
    for by_warps in (True, False):
        monkeypatch.setattr(gpu_blas, "SPLIT_BY_WARPS", by_warps)
        prepared = persistent.prepare(config, gpu_weights)
        outs[by_warps] = [[cp.asnumpy(a) for a in persistent.forward(config, x, gpu_weights, h0, c0,
                                                                      prepared=prepared)[:3]] for x, h0, c0 in calls]
        assert prepared.graphs   # the last calls replayed
    for got, want in zip(outs[True], outs[False]):
        for g, w in zip(got, want):
            assert np.array_equal(g.view(np.uint32), w.view(np.uint32))
    x, h0, c0 = (cp.asnumpy(a) for a in calls[-1])
    ref = reference.forward(config.replace(dtype="float64"), x.astype(np.float64), _as64(weights),
                            h0.astype(np.float64), c0.astype(np.float64))
    for got, want in zip(outs[True][-1], ref[:3]):
        assert rel_err(got, want) <= FP32_TOL
