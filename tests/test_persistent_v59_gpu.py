"""`persistent` v59 on the GPU: an inference graph's copy of h0 and c0 and its first exchange memset run on a side
branch beside the input projection (persistent_graph.FrontBranch), joined before their first reader. Replays with new
x, h0 and c0 every call match float64 and give the eager path's bits and the ablation's (FRONT_BRANCH=False), on every
path that reads the states first: the kernel (split, FFMA, cluster, 16-bit groups), the padding, a cast to fp32 and the
split's h0 product."""
import numpy as np
import pytest

from ecornn import LSTMConfig, lstm_forward
from ecornn.engines import persistent, persistent_graph
from tests.helpers import random_problem, rel_err
from tests.test_persistent_gpu import FP32_TOL, HALF_TOL, _as64
from tests.test_persistent_v17_gpu import _prepared

pytestmark = pytest.mark.gpu

CASES = {   # name: (config, variant, engine flags)
    "fp32 split on clusters": (LSTMConfig(1024, 1024, 1, False, "float32", 8, 40), "auto", {}),
    "fp32 paired split": (LSTMConfig(1024, 1024, 1, False, "float32", 4, 40), "auto", {}),
    "fp32 split, h0 product outside": (LSTMConfig(512, 512, 1, False, "float32", 8, 30), "auto",
                                       {"H0_IN_PRODUCT": False}),
    "fp32 FFMA": (LSTMConfig(256, 256, 1, False, "float32", 1, 40), "auto", {}),
    "fp32 two layers bidirectional": (LSTMConfig(100, 100, 2, True, "float32", 3, 30), "auto", {}),
    "fp16 groups": (LSTMConfig(1024, 1024, 1, False, "float16", 16, 40), "auto", {}),   # in-kernel projection
    "bf16 part GEMM": (LSTMConfig(1024, 1024, 1, False, "bfloat16", 4, 40), "auto", {}),  # v51: half in a GEMM
    "fp16 padded": (LSTMConfig(512, 512, 1, False, "float16", 13, 30), "auto", {}),
    "bf16 two layers bidirectional": (LSTMConfig(200, 256, 2, True, "bfloat16", 4, 30), "auto", {}),
    "fp16 grid, states cast": (LSTMConfig(256, 256, 1, False, "float16", 4, 30), "grid", {}),
}


def _forks(monkeypatch) -> list:
    """Every FrontBranch fork from now on, recorded."""
    forks, fork = [], persistent_graph.FrontBranch.fork
    monkeypatch.setattr(persistent_graph.FrontBranch, "fork", lambda self: (forks.append(self), fork(self))[1])
    return forks


def _call(config, gpu_weights, prepared, variant, inputs):
    import cupy as cp
    x, h0, c0 = inputs
    out = persistent.forward(config, x, gpu_weights, h0, c0, prepared=prepared, variant=variant)
    return [cp.asnumpy(a) for a in out[:3]]


def _eager(config, gpu_weights, prepared, variant, inputs):
    import cupy as cp
    x, h0, c0 = inputs
    out = persistent._forward_eager(config, x, gpu_weights, h0, c0, prepared=prepared, variant=variant)
    return [cp.asnumpy(a) for a in out[:3]]


@pytest.mark.parametrize("name", list(CASES))
def test_replays_with_new_states_match_float64_the_eager_bits_and_the_ablation(rng, monkeypatch, name):
    import cupy as cp
    config, variant, flags = CASES[name]
    for flag, value in flags.items():
        monkeypatch.setattr(persistent, flag, value)
    if name == "fp16 padded":
        assert persistent.run_config(config).batch > config.batch
    forks = _forks(monkeypatch)
    weights, gpu_weights, prepared = _prepared(rng, config)
    tol = FP32_TOL if config.dtype == "float32" else HALF_TOL
    f64 = lambda a: np.asarray(a, np.float64)  # noqa: E731
    ablation = {}
    for call in range(4):   # eager (and the capture), then replays, each with new inputs
        _, x, h0, c0 = random_problem(rng, config)
        inputs = tuple(cp.asarray(a) for a in (x, h0, c0))
        got = _call(config, gpu_weights, prepared, variant, inputs)
        want = lstm_forward(f64(x), _as64(weights), f64(h0), f64(c0), bidirectional=config.bidirectional,
                            strategy="reference")
        for g, w, what in zip(got, (want.y, want.h, want.c), ("y", "hT", "cT")):
            assert rel_err(g.astype(np.float64), w) <= tol, f"call {call}: {what}"
        for g, e in zip(got, _eager(config, gpu_weights, prepared, variant, inputs)):
            np.testing.assert_array_equal(g, e)
        if call:
            monkeypatch.setattr(persistent_graph, "FRONT_BRANCH", False)
            ablation[call] = _call(config, gpu_weights, prepared, variant, inputs)
            ablation[call] = _call(config, gpu_weights, prepared, variant, inputs)   # replayed
            monkeypatch.setattr(persistent_graph, "FRONT_BRANCH", True)
            for g, a in zip(got, ablation[call]):
                np.testing.assert_array_equal(g, a)
    assert not persistent_graph.capture_errors
    assert len(prepared.graphs) == 2   # the branch's graph and the ablation's
    # a capture forks its front branch where a projection precedes the kernel (not an in-kernel one), and joins it
    in_kernel = persistent.kernel_reads_x(config, inputs[0], variant)
    assert len(forks) == (0 if in_kernel else 1) and not any(f.open for f in forks)


def test_a_launch_around_the_ring_reads_nan_from_the_referenced_buffers(rng):
    """x read by reference has no copy node any more: its buffer holds NaN from the ring's making, so a launch that
    finds no slot of its own (a bare graph.launch) still computes NaN, never another call's inputs."""
    import cupy as cp
    config = LSTMConfig(1024, 1024, 1, False, "float16", 16, 20)
    weights, gpu_weights, prepared = _prepared(rng, config)
    for _ in range(2):
        _, x, h0, c0 = random_problem(rng, config)
        persistent.forward(config, cp.asarray(x), gpu_weights, cp.asarray(h0), cp.asarray(c0), prepared=prepared)
    entry = next(iter(prepared.graphs.values()))
    assert entry.ring.by_reference[0]
    assert bool(cp.isnan(entry.inputs[0].astype(cp.float32)).all())
    entry.graph.launch(stream=cp.cuda.get_current_stream())   # around the ring: no slot published for it
    cp.cuda.get_current_stream().synchronize()
    assert bool(cp.isnan(entry.outputs.buffer.astype(cp.float32)).any())
    assert int(entry.ring.done[1]) > 0
