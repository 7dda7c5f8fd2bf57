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


# ---- part 2: batch padding by one launch (batch_pad), x padded where the caller has it, the cut at copy-out ----
def _padded_like(a, batch):
    return np.concatenate([a, np.zeros((a.shape[0], batch - a.shape[1]) + a.shape[2:], a.dtype)], axis=1)


@pytest.mark.parametrize("dtype, shapes, batch", [
    ("float16", [(256, 13, 1024), (1, 13, 1024), (1, 13, 1024)], 14),   # x, h0, c0 of fp16 H=1024 B=13
    ("float32", [(50, 7, 300), (2, 7, 300), (2, 7, 300)], 8),          # rows of 8400 bytes (16-byte units)
    ("float16", [(30, 3, 17)], 4),                                      # 102-byte rows: 2-byte units
    ("float32", [(0, 5, 8), (3, 5, 8)], 6),                             # an empty array beside one that is not
])
def test_pad_inputs_is_pad_columns(rng, dtype, shapes, batch):
    import cupy as cp
    from ecornn.engines import batch_pad
    arrays = [rng.standard_normal(s).astype(dtype) for s in shapes]
    got = batch_pad.pad_inputs([cp.asarray(a) for a in arrays], batch)
    for g, a in zip(got, arrays):
        assert g.flags.c_contiguous and g.shape == (a.shape[0], batch) + a.shape[2:]
        assert np.array_equal(cp.asnumpy(g), _padded_like(a, batch))


@pytest.mark.parametrize("dtype, shapes, batch", [
    ("float16", [(256, 14, 1024), (1, 14, 1024), (1, 14, 1024)], 13),   # y, hT, cT of fp16 H=1024 B=13 padded
    ("float32", [(30, 4, 17)], 3),                                      # 68-byte rows of the output: 2-byte units
])
def test_first_columns_of_is_first_columns(rng, dtype, shapes, batch):
    import cupy as cp
    from ecornn.engines import batch_pad
    from ecornn.layouts import first_columns
    arrays = [rng.standard_normal(s).astype(dtype) for s in shapes]
    got = batch_pad.first_columns_of([cp.asarray(a) for a in arrays], batch)
    for g, a in zip(got, arrays):
        assert g.flags.c_contiguous and np.array_equal(cp.asnumpy(g), first_columns(a, batch))


def test_pad_inputs_reads_x_at_its_fetched_address(rng):
    """{x, h0, c0, tag}: x read at the fetched address (aligned or not) on a matched tag, else from its buffer;
    arrays the kernel does not take (a strided view) go through layouts.pad_columns."""
    import cupy as cp
    from ecornn.engines import batch_pad
    x = rng.standard_normal((20, 5, 64)).astype(np.float16)
    buffer = cp.full(x.shape, 7.0, cp.float16)
    for offset in (0, 1):
        room = cp.zeros(x.size + 8, cp.float16)
        at = room[offset:offset + x.size].reshape(x.shape)
        at[...] = cp.asarray(x)
        for tag, want in ((1, x), (0, np.full(x.shape, 7.0, np.float16))):
            fetched = cp.asarray(np.array([at.data.ptr, 0, 0, tag], np.int64))
            (got,) = batch_pad.pad_inputs([buffer], 6, x_at=fetched)
            assert np.array_equal(cp.asnumpy(got), _padded_like(want, 6))
    strided = cp.asarray(rng.standard_normal((4, 6, 8)).astype(np.float32))[:, ::2]
    got = batch_pad.pad_inputs([buffer, strided], 6)
    assert np.array_equal(cp.asnumpy(got[1]), _padded_like(cp.asnumpy(strided), 6))
    with pytest.raises(ValueError, match="fetched address"):
        batch_pad.pad_inputs([strided], 6, x_at=fetched)


@pytest.mark.parametrize("dtype, hidden, layers, bidir, batch, steps", [
    ("float16", 1024, 1, False, 13, 256),   # two groups of 7: the kernel reads the padded x
    ("bfloat16", 1000, 2, True, 9, 60),     # odd hidden size, both directions of layer 0 read the padded x
    ("float32", 256, 1, False, 7, 120),     # the fp32 split in four groups of 2: the split reads the padded x
])
def test_padded_replays_pad_the_callers_x(rng, monkeypatch, dtype, hidden, layers, bidir, batch, steps):
    """Queued replays of a padded forward, x padded from the caller's array: each bitwise the eager path on its
    own inputs, the last within tolerance of float64; PAD_READS_X off (x copied, then padded): the same bits."""
    from tests.test_persistent_v21_gpu import assert_replays_read_x_by_reference
    config = LSTMConfig(hidden, hidden, layers, bidir, dtype, batch, steps)
    assert persistent.run_config(config, False).batch == batch + 1
    assert_replays_read_x_by_reference(rng, monkeypatch, config,
                                       lambda x, prepared: persistent.pad_reads_x(config, x),
                                       (persistent, "PAD_READS_X"))


def test_padded_replays_cut_their_outputs_as_they_copy_them_out(rng, monkeypatch):
    """The graph keeps the padded outputs (CutOutputs); the returned arrays have the caller's columns, are the
    caller's own (not views of the graph's buffer) and lie packed in one buffer."""
    import cupy as cp
    from ecornn.engines import persistent_graph
    from tests.test_persistent_v17_gpu import _prepared
    from tests.test_persistent_v5_gpu import _gpu_inputs
    config = LSTMConfig(512, 512, 1, False, "float16", 13, 40)
    _, gpu_weights, prepared = _prepared(rng, config)
    calls = [_gpu_inputs(rng, config) for _ in range(3)]
    outs = [persistent.forward(config, x, gpu_weights, h0, c0, prepared=prepared)[:3] for x, h0, c0 in calls]
    (entry,) = prepared.graphs.values()
    assert isinstance(entry.outputs, persistent_graph.CutOutputs) and entry.outputs.batch == 13
    assert next(iter(entry.outputs)).shape[1] == 14
    y, hT, cT = outs[-1]
    assert y.shape == config.output_shape and hT.shape == cT.shape == config.state_shape
    assert hT.data.ptr > y.data.ptr and cT.data.ptr > hT.data.ptr and y.data.mem is hT.data.mem is cT.data.mem
    for a, b in zip(outs[-1], entry.outputs):
        assert not cp.shares_memory(a, b)
    monkeypatch.setattr(persistent, "CUT_AT_COPY_OUT", False)   # v47: the graph cuts them; the same bits
    again = [persistent.forward(config, x, gpu_weights, h0, c0, prepared=prepared)[:3] for x, h0, c0 in calls]
    others = [e for e in prepared.graphs.values() if e is not entry]
    assert len(others) == 1 and isinstance(others[0].outputs, persistent_graph.PackedOutputs)
    for got, want in zip(again[1:], outs[1:]):
        for g, w in zip(got, want):
            assert cp.array_equal(g.view(cp.uint16), w.view(cp.uint16))


def test_a_padded_launch_around_the_ring_gives_nan(rng, monkeypatch):
    """A bare graph.launch fetches no address: x's buffer is NaN-filled and padded from there, so every caller
    column of the outputs is NaN (the added column, zeros throughout, is cut off)."""
    import cupy as cp
    from ecornn.engines import persistent_graph
    from tests.test_persistent_v17_gpu import _prepared
    from tests.test_persistent_v5_gpu import _gpu_inputs
    monkeypatch.setattr(persistent_graph, "capture_errors", {})
    config = LSTMConfig(256, 256, 1, False, "bfloat16", 9, 30)
    _, gpu_weights, prepared = _prepared(rng, config)
    for x, h0, c0 in [_gpu_inputs(rng, config) for _ in range(2)]:
        persistent.forward(config, x, gpu_weights, h0, c0, prepared=prepared)
    (entry,) = prepared.graphs.values()
    assert entry.ring.by_reference[0] and entry.ring.referenced[0]
    stream = cp.cuda.get_current_stream()
    entry.graph.launch(stream=stream)
    stream.synchronize()
    assert all(bool(cp.isnan(a[:, :9].astype(cp.float32)).all()) for a in entry.outputs)


def test_padded_training_pads_by_the_kernel_and_matches_float64(rng):
    """A padded training call: x, h0, c0 and then dy, dhT, dcT padded by batch_pad; every output and gradient
    within 1e-2 of float64 (fp16 H=768 B=13, two groups of 7)."""
    from tests.test_persistent_gpu import HALF_TOL, _compare
    config = LSTMConfig(768, 768, 1, False, "float16", 13, 50)
    assert persistent.run_config(config, True).batch == 14
    _compare(rng, config, HALF_TOL)
