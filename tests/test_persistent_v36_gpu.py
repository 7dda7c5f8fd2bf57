"""`persistent` v36 on the GPU: long fp32 reductions in chunks (LONG_REDUCTIONS="chunked"). (1) The split kernels
(kernels/tf32_split.cu, fp16_split.cu) lay their parts out chunk by chunk, bitwise NumPy's gpu_blas.split_chunks.
(2) The chunked GEMMs against float64: the one-pass 3xTF32 and the fp16-split products over K = 8192 read within
5e-6 in chunks of 1024 and worse in one GEMM (the accumulation error that made v35 fall back to SGEMM). (3) The
engine's long reductions (v35's cells: dX over 4H = 6144, dW over T B = 8000 rows, the projection over 16384 and
8192 inputs) in chunks: every output and gradient within fp32's 1e-5 of float64, with the chunked GEMMs seen to
run; a replayed forward that splits the caller's x in chunks bitwise the eager one."""
import numpy as np
import pytest

from ecornn import LSTMConfig, gpu_blas
from ecornn.engines import persistent
from ecornn.engines import reference
from tests.helpers import random_problem, rel_err
from tests.test_persistent_gpu import FP32_TOL, _as64, _compare
from tests.test_persistent_v21_gpu import assert_replays_read_x_by_reference
from tests.test_persistent_v35_gpu import _forward

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("rows, k, chunk", [(37, 3000, 1024), (5, 4096, 1024), (300, 70, 16), (8, 9, 4)])
def test_the_split_kernels_lay_chunks_out_as_numpy_does(rng, rows, k, chunk):
    import cupy as cp
    a = rng.standard_normal((rows, k)).astype(np.float32)
    for axis in (0, 1):
        for lo_first in (True, False):
            got = gpu_blas.tf32_split3(cp.asarray(a), axis, lo_first, chunk)
            assert np.array_equal(cp.asnumpy(got), gpu_blas.tf32_split3(a, axis, lo_first, chunk))
    t = gpu_blas.tf32_split3(cp.asarray(np.ascontiguousarray(a.T)).T, 1, True, chunk)
    assert np.array_equal(cp.asnumpy(t), gpu_blas.tf32_split3(a, 1, True, chunk))
    for lo_first in (True, False):
        got, got_exp = gpu_blas.fp16_split3(cp.asarray(a), lo_first, chunk=chunk)
        want, want_exp = gpu_blas.fp16_split3(a, lo_first, chunk=chunk)
        assert np.array_equal(cp.asnumpy(got), want) and np.array_equal(cp.asnumpy(got_exp), want_exp)


def _long_product(rng, m, k, n):
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    return a, b, a.astype(np.float64) @ b.astype(np.float64)


def test_one_pass_products_in_chunks_keep_their_accuracy_over_a_long_reduction(rng):
    """K = 8192 (dX at H = 2048): one GEMM over 3K loses what 8 GEMMs of 1024 keep."""
    import cupy as cp
    a, b, want = _long_product(rng, 512, 8192, 1024)
    errors = {}
    for chunk in (None, 1024):
        out = cp.empty((512, 1024), cp.float32)
        gpu_blas.matmul_3xtf32_onepass(cp.asarray(a), cp.asarray(b), out, chunk=chunk)
        errors[chunk] = rel_err(cp.asnumpy(out), want)
    assert errors[1024] <= 5e-6 and errors[1024] < errors[None], errors


def test_fp16_split_products_in_chunks_keep_their_accuracy_over_a_long_reduction(rng):
    import cupy as cp
    a, b, want = _long_product(rng, 512, 8192, 1024)
    errors = {}
    for chunk in (None, 1024):
        a3 = gpu_blas.fp16_split3(cp.asarray(a), False, chunk=chunk)
        b3 = gpu_blas.fp16_split3(cp.asarray(np.ascontiguousarray(b.T)), True, chunk=chunk)
        out = cp.empty((512, 1024), cp.float32)
        gpu_blas.matmul_fp16_split3(*a3, *b3, out, chunk=chunk)
        errors[chunk] = rel_err(cp.asnumpy(out), want)
    assert errors[1024] <= 5e-6 and errors[1024] < errors[None], errors


def _count_chunked_gemms(monkeypatch):
    calls = []
    spans = gpu_blas.matmul_spans
    monkeypatch.setattr(gpu_blas, "matmul_spans", lambda a, b, out, s, **kw: calls.append(len(s)) or spans(
        a, b, out, s, **kw))
    return calls


@pytest.mark.parametrize("inp, hidden, batch, steps", [
    (1536, 1536, 4, 40),   # dX over 4H = 6144 (one pass: 1.43e-5, results/persistent_v35 call 11)
    (512, 512, 8, 1000),   # dW_ih and dW_hh over T B = 8000 rows (1.24e-5, call 15)
    (1024, 1024, 8, 256),  # dX over 4096 (9.5e-6)
    (768, 768, 8, 256),    # dX over 3072, dW over 2048 rows: long from v36's 2048 (7.2e-6 in one GEMM, call 8)
])
def test_long_backward_reductions_in_chunks_keep_fp32_accuracy(rng, monkeypatch, inp, hidden, batch, steps):
    config = LSTMConfig(inp, hidden, 1, False, "float32", batch, steps)
    assert persistent.LONG_REDUCTIONS == "chunked" and persistent._reduction_on_3xtf32(max(4 * hidden, batch * steps))
    chunked = _count_chunked_gemms(monkeypatch)
    _compare(rng, config, FP32_TOL)
    assert any(n > 1 for n in chunked)


@pytest.mark.parametrize("inp, hidden, batch, steps", [(16384, 256, 4, 32), (8192, 1024, 8, 16), (4096, 512, 4, 32)])
def test_a_long_input_projection_in_chunks_keeps_fp32_accuracy(rng, monkeypatch, inp, hidden, batch, steps):
    """v35's strict projection from 8192 inputs, now the fp16-split GEMM in chunks of 1024 (from 4096 inputs)."""
    config = LSTMConfig(inp, hidden, 1, False, "float32", batch, steps)
    chunked = _count_chunked_gemms(monkeypatch)
    problem = random_problem(rng, config)
    got = _forward(config, problem)
    assert chunked and all(n == inp // persistent.LONG_REDUCTION_CHUNK for n in chunked)
    f64 = [np.asarray(a, np.float64) for a in problem[1:]]
    want = reference.forward(config.replace(dtype="float64"), f64[0], _as64(problem[0]), *f64[1:])
    for g, w in zip(got, want[:3]):
        assert rel_err(g, w) <= FP32_TOL


def test_replays_split_the_callers_x_in_chunks(rng, monkeypatch):
    """A replayed forward over 8192 inputs: the chunked split reads the caller's x (v35's by reference), every replay
    bitwise the eager path, the last within 1e-5 of float64, the same bits with x copied."""
    config = LSTMConfig(8192, 256, 1, False, "float32", 4, 32)
    assert persistent._projection_chunk(type("W", (), {"w_ih": np.zeros((1024, 8192), np.float32)})) == 1024
    assert_replays_read_x_by_reference(rng, monkeypatch, config,
                                       lambda x, prepared: persistent.split_reads_x(config, x, prepared=prepared),
                                       (persistent, "SPLIT_READS_X"))
