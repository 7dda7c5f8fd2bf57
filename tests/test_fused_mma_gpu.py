"""GPU tests of fused v3: one tensor-core kernel per step for fp16/bf16 (kernels/fused_step_mma.cu).

Against the float64 reference (every output and gradient, internal buffers NaN-poisoned, eager +
capture then replay: tests/test_fused_gpu.py's _check), epilogue on vs off, bitwise reproducibility,
and launch counts proving the mma step kernels really ran."""
from types import SimpleNamespace

import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.weights import LayerWeights, init_weights

from .helpers import rel_err
from .test_fused_gpu import _check, _host, _to_gpu, _to_host64

pytestmark = pytest.mark.gpu

DTYPES = ["float16", "bfloat16"]

CONFIGS = [  # odd H (unaligned 16-bit loads), T=1, deep bidirectional, the two target sizes
    dict(input_size=100, hidden_size=100, num_layers=3, bidirectional=True, batch=3, seq_len=1),
    dict(input_size=37, hidden_size=100, num_layers=3, bidirectional=True, batch=3, seq_len=9),
    dict(input_size=24, hidden_size=40, num_layers=2, bidirectional=False, batch=17, seq_len=7),
    dict(input_size=256, hidden_size=256, num_layers=1, bidirectional=False, batch=128, seq_len=12),
    dict(input_size=1024, hidden_size=1024, num_layers=1, bidirectional=False, batch=64, seq_len=6),
    dict(input_size=512, hidden_size=512, num_layers=2, bidirectional=True, batch=256, seq_len=5),
    # v3.1 row-split tile (64x4u, 2 row groups x 4 K-slices) with H % 16 != 0 (16-bit loads) and a
    # last batch tile of 6 rows (its second row group entirely past the batch)
    dict(input_size=30, hidden_size=244, num_layers=1, bidirectional=False, batch=70, seq_len=5),
]


def _fused():
    from ecornn.engines import fused
    return fused


def _ids(s):
    return "L{num_layers}{bd}H{hidden_size}B{batch}T{seq_len}".format(
        bd="bi" if s["bidirectional"] else "", **s)


@pytest.fixture
def counted(monkeypatch):
    """Counts launches of the mma step kernels (at issue time: eager and captured calls)."""
    fused = _fused()
    calls = {"fused_step_fwd": 0, "fused_step_bwd": 0}
    real = fused.mma_kernels

    def wrap(name, kernel):
        def launch(grid, block, args, shared_mem=0):
            calls[name] += 1
            return kernel(grid, block, args, shared_mem=shared_mem)
        return launch

    def counting(dtype, tile, device):
        k = real(dtype, tile, device)
        return SimpleNamespace(**{n: wrap(n, getattr(k, n)) for n in calls})

    monkeypatch.setattr(fused, "mma_kernels", counting)
    from ecornn.engines import fused_mma    # correctness of the kernel everywhere, not only where the
    monkeypatch.setattr(fused_mma, "MMA_MAX_STEP_GFLOP", 1e9)   # size rule picks it
    monkeypatch.setattr(fused_mma, "MMA_MAX_BATCH", 1 << 20)
    fused.clear_cache()
    yield calls
    fused.clear_cache()


@pytest.mark.parametrize("sizes", CONFIGS, ids=_ids)
@pytest.mark.parametrize("dtype", DTYPES)
def test_mma_step_matches_float64_reference(rng, counted, sizes, dtype):
    cfg = LSTMConfig(dtype=dtype, **sizes)
    _check(rng, cfg, prepared=cfg.batch == 128)  # prepared: packed once in prepare()
    assert _fused().last_step_kernel.startswith("mma step"), _fused().last_step_kernel
    chains = cfg.num_layers * cfg.num_directions
    assert counted["fused_step_fwd"] >= chains * cfg.seq_len  # first call: eager + captured
    assert counted["fused_step_bwd"] >= chains * (cfg.seq_len - 1)


def _problem(rng, cfg):
    weights = init_weights(cfg, seed=int(rng.integers(2**31)))
    w_gpu = [LayerWeights(*(_to_gpu(a, cfg.dtype) for a in w)) for w in weights]
    shapes = ((cfg.seq_len, cfg.batch, cfg.input_size), cfg.state_shape, cfg.state_shape,
              (cfg.seq_len, cfg.batch, cfg.num_directions * cfg.hidden_size))
    return w_gpu, [_to_gpu(_host(rng, s, cfg.dtype), cfg.dtype) for s in shapes]


def _run(cfg, w_gpu, arrays, **flags):
    """Inference y, then training y, hT, cT and every gradient, as host float64 arrays."""
    fused = _fused()
    x, h0, c0, dy = arrays
    with fused.using(**flags):
        outs = [fused.forward(cfg, x, w_gpu, h0, c0)[0]]
        y, h_t, c_t, res = fused.forward(cfg, x, w_gpu, h0, c0, training=True)
        dx, dh0, dc0, dw = fused.backward(res, dy, h0, c0)
    outs += [y, h_t, c_t, dx, dh0, dc0] + [g for slot in dw for g in slot]
    return [_to_host64(a, cfg.dtype) for a in outs], fused.last_step_kernel


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("sizes", [CONFIGS[1], CONFIGS[3]], ids=_ids)
def test_epilogue_on_matches_off(rng, dtype, sizes):
    cfg = LSTMConfig(dtype=dtype, **sizes)
    w_gpu, arrays = _problem(rng, cfg)
    on, kernel_on = _run(cfg, w_gpu, arrays)
    off, kernel_off = _run(cfg, w_gpu, arrays, epilogue=False)
    assert kernel_on.startswith("mma step") and "epilogue off" in kernel_off
    for index, (a, b) in enumerate(zip(on, off)):
        assert rel_err(a, b) <= 1e-2, f"output {index}: {rel_err(a, b):.2e}"


@pytest.mark.parametrize("dtype", DTYPES)
def test_two_runs_are_bitwise_identical(rng, dtype):
    cfg = LSTMConfig(dtype=dtype, **CONFIGS[3])
    w_gpu, arrays = _problem(rng, cfg)
    first, _ = _run(cfg, w_gpu, arrays)      # eager + capture
    second, _ = _run(cfg, w_gpu, arrays)     # graph replays
    third, _ = _run(cfg, w_gpu, arrays, graph=False)  # eager again
    for a, b, c in zip(first, second, third):
        assert np.array_equal(a, b) and np.array_equal(a, c)


def test_size_rule_keeps_large_steps_on_cublas(rng):
    from ecornn.engines.fused_mma import MMA_MAX_STEP_GFLOP, step_gflop
    cfg = LSTMConfig(input_size=64, hidden_size=2048, batch=256, seq_len=2, dtype="float16")
    assert step_gflop(cfg.batch, cfg.hidden_size) > MMA_MAX_STEP_GFLOP
    w_gpu, arrays = _problem(rng, cfg)
    _, kernel = _run(cfg, w_gpu, arrays)
    assert "cuBLAS" in kernel
