"""`persistent` v36 on the CPU: long fp32 reductions in chunks. v35 moved every fp32 GEMM whose reduction reaches
FP32_LONG_REDUCTION_FROM_K (backward) or FP32_PROJECTION_LONG_FROM_K (the forward's projection) to strict SGEMM,
because the tensor cores' accumulation error grew with the reduction's length. v36 keeps them on the tensor cores
(LONG_REDUCTIONS="chunked"): the split operands are laid out chunk by chunk of the reduction
(gpu_blas.split_chunks, kernels/split_chunks.cuh) and each chunk is a GEMM of its own adding to the sums before it
(gpu_blas.matmul_spans). Here: the layout, the spans and their betas, the rules, the GEMMs the emulated engine runs
and their accuracy (within fp32's 1e-5 of float64), the prepared weights and their refresh, the graph key.
tests/test_persistent_v36_gpu.py runs the kernels."""
import numpy as np
import pytest

from ecornn import LSTMConfig, gpu_blas
from ecornn.engines import persistent
from tests.helpers import random_problem, rel_err
from tests.test_gpu_blas_3xtf32 import _tf32_truncated
from tests.test_persistent_mma_emulated import cpu_engine  # noqa: F401 (fixture)
from tests.test_persistent_v22_cpu import _train, blas_engine  # noqa: F401 (fixture)
from tests.test_persistent_v32_cpu import _problem, _worst_error, split_engine  # noqa: F401 (fixture)

pytestmark = pytest.mark.usefixtures("unpadded_batches")   # v47: plans and internals at the batch named

FP32_TOL = 1e-5


@pytest.mark.parametrize("k, chunk, spans", [(11, 4, [(0, 4), (4, 4), (8, 3)]), (12, 4, [(0, 4), (4, 4), (8, 4)]),
                                             (11, None, [(0, 11)]), (11, 11, [(0, 11)]), (11, 40, [(0, 11)])])
def test_reduction_spans_cut_k_into_chunks(k, chunk, spans):
    assert gpu_blas.reduction_spans(k, chunk) == spans


@pytest.mark.parametrize("chunk", [0, -3, 2.5, True])
def test_a_bad_chunk_is_a_clear_error(chunk):
    with pytest.raises(ValueError, match="positive integer or None, got"):
        gpu_blas.reduction_spans(11, chunk)


def _chunked(parts, axis, chunk):
    """The layout written out: chunk j of every part, in part order, then chunk j + 1."""
    k = parts[0].shape[axis]
    pieces = [np.take(p, range(s, min(s + chunk, k)), axis=axis) for s in range(0, k, chunk) for p in parts]
    return np.concatenate(pieces, axis=axis)


def test_the_tf32_split_in_chunks_lies_chunk_by_chunk():
    rng = np.random.default_rng()
    a = rng.standard_normal((9, 23)).astype(np.float32)
    hi, lo = gpu_blas.tf32_parts(a)
    assert np.array_equal(gpu_blas.tf32_split3(a, 1, True, 8), _chunked((lo, hi, hi), 1, 8))
    assert np.array_equal(gpu_blas.tf32_split3(a, 0, False, 4), _chunked((hi, lo, hi), 0, 4))
    t = gpu_blas.tf32_split3(np.ascontiguousarray(a.T).T, 1, True, 8)   # through the base, along its rows
    assert np.array_equal(t, _chunked((lo, hi, hi), 1, 8)) and t.T.flags.c_contiguous
    assert np.array_equal(gpu_blas.tf32_split3(a, 1, True, 23), gpu_blas.tf32_split3(a, 1, True))   # one chunk


def test_the_fp16_split_in_chunks_lies_chunk_by_chunk_with_the_same_exponents():
    rng = np.random.default_rng()
    a = rng.standard_normal((7, 19)).astype(np.float32)
    whole, exponents = gpu_blas.fp16_split3(a, False)
    chunked, chunked_exponents = gpu_blas.fp16_split3(a, False, chunk=5)
    hi, lo, last = whole[:, :19], whole[:, 19:38], whole[:, 38:]
    assert np.array_equal(chunked, _chunked((hi, lo, last), 1, 5))
    assert np.array_equal(exponents, chunked_exponents)


def _fake_gemm(log):
    """gpu_blas.gemm on NumPy in float64 (rounded to fp32 per call, as the epilogue does), logging (k, beta)."""
    from tests.test_persistent_v22_cpu import _column_major

    def gemm(transa, transb, m, n, k, a, lda, b, ldb, c, ldc, *, beta=0.0, **kw):
        op_a, op_b = _column_major(a, lda, transa, m, k), _column_major(b, ldb, transb, k, n)
        product = (op_a.astype(np.float64) @ op_b.astype(np.float64)).T
        c[...] = (product if beta == 0 else beta * c + product).astype(np.float32)
        log.append((k, beta))
    return gemm


@pytest.mark.parametrize("a_t, b_t", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul_spans_runs_one_gemm_per_span_adding_to_the_sums_before(monkeypatch, a_t, b_t):
    """Every operand order (C-ordered or a transposed view): the spans' GEMMs read the right windows (the sum is
    a @ b + beta out), the first with the caller's beta, the rest with 1."""
    log = []
    monkeypatch.setattr(gpu_blas, "gemm", _fake_gemm(log))
    rng = np.random.default_rng()
    a, b = rng.standard_normal((6, 13)).astype(np.float32), rng.standard_normal((13, 5)).astype(np.float32)
    a_op = np.ascontiguousarray(a.T).T if a_t else a
    b_op = np.ascontiguousarray(b.T).T if b_t else b
    out = rng.standard_normal((6, 5)).astype(np.float32)
    want = a.astype(np.float64) @ b + 0.5 * out
    gpu_blas.matmul_spans(a_op, b_op, out, gpu_blas.reduction_spans(13, 4), beta=0.5)
    assert rel_err(out, want) <= 1e-6
    assert log == [(4, 0.5), (4, 1.0), (4, 1.0), (1, 1.0)]


def test_matmul_spans_rejects_spans_that_miss_the_reduction():
    a, b = np.zeros((3, 8), np.float32), np.zeros((8, 2), np.float32)
    with pytest.raises(ValueError, match="spans covering k"):
        gpu_blas.matmul_spans(a, b, np.zeros((3, 2), np.float32), [(0, 4), (4, 3)])


def test_matmul_spans_rejects_operands_of_another_element_size():
    a, b = np.zeros((3, 8), np.float64), np.zeros((8, 2), np.float32)
    with pytest.raises(ValueError, match="matmul_spans: operand a should hold float32 elements"):
        gpu_blas.matmul_spans(a, b, np.zeros((3, 2), np.float32), [(0, 4), (4, 4)])


def test_one_pass_products_in_chunks_are_a_times_b():
    """The chunked one-pass operands, TF32-truncated as a tensor core may read them, give a @ b chunk by chunk."""
    rng = np.random.default_rng()
    a, b = rng.standard_normal((17, 40)).astype(np.float32), rng.standard_normal((40, 9)).astype(np.float32)
    a3, b3 = gpu_blas.tf32_split3(a, 1, True, 16), gpu_blas.tf32_split3(b, 0, False, 16)
    got = sum(_tf32_truncated(a3[:, 3 * s:3 * (s + n)]).astype(np.float64)
              @ _tf32_truncated(b3[3 * s:3 * (s + n)]).astype(np.float64) for s, n in gpu_blas.reduction_spans(40, 16))
    assert rel_err(got, a.astype(np.float64) @ b) <= 1e-6
    mixed = _tf32_truncated(a3[:, :48]).astype(np.float64) @ _tf32_truncated(gpu_blas.tf32_split3(b, 0, False)[:48])
    assert rel_err(mixed, a.astype(np.float64) @ b) > 1e-3   # the mutation: operands split with different chunks


@pytest.mark.parametrize("k, long_from, mode, chunked, on_tf32", [
    (3072, 4096, "chunked", False, True), (4096, 4096, "chunked", True, True), (8000, 4096, "chunked", True, True),
    (4096, 4096, "strict", False, False), (8000, None, "chunked", False, True)])
def test_long_backward_reductions_run_in_chunks(monkeypatch, k, long_from, mode, chunked, on_tf32):
    monkeypatch.setattr(persistent, "FP32_LONG_REDUCTION_FROM_K", long_from)
    monkeypatch.setattr(persistent, "LONG_REDUCTIONS", mode)
    assert persistent._reduction_on_3xtf32(k) is on_tf32
    assert persistent._backward_chunk(k) == (persistent.LONG_REDUCTION_CHUNK if chunked else None)


def test_the_three_gemm_backward_stays_strict_on_long_reductions(monkeypatch):
    """Only the one-pass operands are laid out in chunks."""
    monkeypatch.setattr(persistent, "FP32_BACKWARD_GEMMS", "3xtf32")
    assert not persistent._reduction_on_3xtf32(8192) and persistent._reduction_on_3xtf32(1024)


def _tf32_chunks(log):
    return [size for kind, size in log if kind == "tf32"]


@pytest.mark.parametrize("inp, hidden, layers, bidir, batch, steps", [(24, 40, 1, False, 4, 6), (16, 24, 2, True, 3, 5)])
def test_a_chunked_backward_keeps_every_gemm_on_tf32_within_fp32_accuracy(blas_engine, rng, monkeypatch, inp, hidden,
                                                                          layers, bidir, batch, steps):
    """Every reduction long (threshold 8), chunks of 8: dX in ceil(4H / 8) GEMMs, dW_ih and dW_hh in ceil(T B / 8)
    each, none strict; within 1e-5 of float64. "strict" (v35) gives the SGEMMs back."""
    config = LSTMConfig(inp, hidden, layers, bidir, "float32", batch, steps)
    monkeypatch.setattr(persistent, "FP32_LONG_REDUCTION_FROM_K", 8)
    monkeypatch.setattr(persistent, "LONG_REDUCTION_CHUNK", 8)
    assert _train(blas_engine, rng, config) <= FP32_TOL
    per_direction = -(-4 * hidden // 8) + 2 * -(-steps * batch // 8)
    assert len(_tf32_chunks(blas_engine.gemm_log)) == per_direction * layers * config.num_directions
    blas_engine.gemm_log.clear()
    monkeypatch.setattr(persistent, "LONG_REDUCTIONS", "strict")
    assert _train(blas_engine, rng, config) <= FP32_TOL
    assert not _tf32_chunks(blas_engine.gemm_log)


def test_a_chunk_dropped_from_the_backward_fails(blas_engine, rng, monkeypatch):
    """The mutation: matmul_spans runs only its first span. The accuracy check sees it."""
    config = LSTMConfig(24, 40, 1, False, "float32", 4, 6)
    monkeypatch.setattr(persistent, "FP32_LONG_REDUCTION_FROM_K", 8)
    monkeypatch.setattr(persistent, "LONG_REDUCTION_CHUNK", 8)
    spans = gpu_blas.matmul_spans
    monkeypatch.setattr(gpu_blas, "matmul_spans", lambda a, b, out, s, **kw: spans(
        a[:, :s[0][1]], b[:s[0][1]], out, s[:1], **kw))
    assert _train(blas_engine, rng, config) > 1e-3


@pytest.mark.parametrize("inputs, long_from, mode, want", [
    (4096, 8192, "chunked", "fp16split"), (8192, 8192, "chunked", "fp16split"), (8192, 8192, "strict", "strict")])
def test_a_long_projection_stays_on_the_fp16_split(split_engine, monkeypatch, inputs, long_from, mode, want):
    from types import SimpleNamespace
    monkeypatch.setattr(persistent, "FP32_PROJECTION_LONG_FROM_K", long_from)
    monkeypatch.setattr(persistent, "LONG_REDUCTIONS", mode)
    prep = SimpleNamespace(w_ih=np.zeros((4 * 512, inputs), np.float32))
    assert persistent._fp32_projection_mode(256 * 4, prep, False) == want
    chunked = mode == "chunked" and inputs >= long_from
    assert persistent._projection_chunk(prep) == (persistent.LONG_REDUCTION_CHUNK if chunked else None)


def test_a_long_projection_on_three_tf32_gemms_stays_strict(split_engine, monkeypatch):
    from types import SimpleNamespace
    monkeypatch.setattr(persistent, "FP32_GEMMS", "3xtf32")
    prep = SimpleNamespace(w_ih=np.zeros((4 * 512, 8192), np.float32))
    assert persistent._fp32_projection_mode(256 * 4, prep, False) == "strict"


def test_a_chunked_projection_splits_x_in_chunks_within_fp32_accuracy(split_engine, rng, monkeypatch):
    """The threshold at the layer's 20 inputs, chunks of 8: x and W_ih split in chunks of 8, the projection's fp16
    GEMMs in three chunks (NumPy: fp32 sums chunk by chunk), xw left scaled for the kernel (v32); the forward
    within 1e-5 of float64."""
    config = LSTMConfig(20, 40, 1, False, "float32", 4, 6)
    monkeypatch.setattr(persistent, "FP32_PROJECTION_LONG_FROM_K", 20)
    monkeypatch.setattr(persistent, "LONG_REDUCTION_CHUNK", 8)
    chunks, gemm_chunks = [], []
    split, gemm = gpu_blas.fp16_split3, gpu_blas.matmul_fp16_split3
    monkeypatch.setattr(gpu_blas, "fp16_split3", lambda a, lo_first, a_at=None, chunk=None: chunks.append(chunk)
                        or split(a, lo_first, a_at, chunk))
    monkeypatch.setattr(gpu_blas, "matmul_fp16_split3", lambda *a, **kw: gemm_chunks.append(kw.get("chunk"))
                        or gemm(*a, **kw))
    problem = _problem(rng, config)
    weights, x, h0, c0 = problem[:4]
    got = split_engine.forward(config, x, weights, h0, c0, training=True)
    assert persistent.last_kinds["forward"] == "mma"
    assert chunks and set(chunks) == {8} and gemm_chunks == [8] and split_engine.unscales == [False]
    assert _worst_error(config, problem, got[:3]) <= FP32_TOL


def test_refresh_rewrites_the_chunked_weight_splits(blas_engine, rng, monkeypatch):
    """A prepared layer's chunked splits of W_ih (the projection's fp16 one, the one-pass ones) are rewritten by a
    refresh as a fresh prepare makes them, and they change what a graph depends on (derivatives)."""
    from ecornn.engines import persistent_refresh
    monkeypatch.setattr(persistent, "MIN_3XTF32_FLOPS", 0)
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", False)
    monkeypatch.setattr(persistent, "FP32_PROJECTION_LONG_FROM_K", 8)
    monkeypatch.setattr(persistent, "FP32_LONG_REDUCTION_FROM_K", 8)
    monkeypatch.setattr(persistent, "LONG_REDUCTION_CHUNK", 8)
    config = LSTMConfig(20, 24, 2, True, "float32", 3, 5)
    weights, x, h0, c0 = random_problem(rng, config)
    prepared = blas_engine.prepare(config, weights)
    before = persistent_refresh.derivatives(prepared)
    out = blas_engine.forward(config, x, weights, h0, c0, training=True, prepared=prepared)
    blas_engine.backward(out[3], *(rng.standard_normal(a.shape).astype(a.dtype) for a in out[:3]))
    assert all(set(s.w_ih_split16_chunked) == {8} and set(s.w_ih_split3_chunked) == {(False, 8)}
               for s in prepared.slots)
    assert all(s.w_ih_split16 is None and not s.w_ih_split3 for s in prepared.slots)   # no unchunked copies
    assert persistent_refresh.derivatives(prepared) != before
    new, _, _, _ = random_problem(rng, config)
    blas_engine.refresh(prepared, config, new)
    fresh = blas_engine.prepare(config, new)
    for old, made in zip(prepared.slots, fresh.slots):
        for got, want in zip(old.w_ih_split16_chunked[8], made.input_weight_split16(8)):
            np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(old.w_ih_split3_chunked[(False, 8)], made.input_weight_split3(False, 8))
        np.testing.assert_array_equal(old.input_weight_exponents16(), made.input_weight_split16()[1])


@pytest.mark.parametrize("flag, value", [("LONG_REDUCTIONS", "strict"), ("LONG_REDUCTION_CHUNK", 2048),
                                         ("FP32_LONG_REDUCTION_FROM_K", None), ("FP32_PROJECTION_LONG_FROM_K", None)])
def test_the_chunking_is_in_the_graph_key(monkeypatch, flag, value):
    before = persistent._graph_mode("auto")
    monkeypatch.setattr(persistent, flag, value)
    assert persistent._graph_mode("auto") != before
