"""`persistent` v3 cluster forward on the GPU (sm_90+): outputs and final states vs the float64
reference, bitwise reruns, a training forward feeding the v2 backward, NotSupported before launch.
Every call is checked to have run the cluster kernel (a spy counts its launches), so a silent
fallback to the grid kernel fails the test."""
import numpy as np
import pytest

from ecornn import LSTMConfig, LayerWeights, NotSupported, lstm_backward, lstm_forward
from ecornn.engines import persistent
from tests.helpers import random_problem, rel_err

pytestmark = pytest.mark.gpu

FP32_TOL = 1e-5
HALF_TOL = 1e-2


def spy_cluster_launches(monkeypatch) -> list:
    """The list that every cluster-kernel launch appends its plan to from now on."""
    launches = []
    real = persistent._launch_cluster

    def spy(plan, args):
        launches.append(plan)
        return real(plan, args)
    monkeypatch.setattr(persistent, "_launch_cluster", spy)
    return launches


@pytest.fixture
def cluster(monkeypatch):
    """CLUSTER_DEFAULT on and every cluster size allowed (so the functional API takes the cluster
    kernel wherever it fits); counts its launches."""
    monkeypatch.setattr(persistent, "CLUSTER_DEFAULT", True)
    monkeypatch.setattr(persistent, "AUTO_MAX_CLUSTER", persistent.MAX_CLUSTER)
    return spy_cluster_launches(monkeypatch)


def _as64(weights):
    return [LayerWeights(*(np.asarray(a, np.float64) for a in w)) for w in weights]


def _compare_forward(rng, config, tol, launches):
    weights, x, h0, c0 = random_problem(rng, config)
    got = lstm_forward(x, weights, h0, c0, bidirectional=config.bidirectional, strategy="persistent")
    assert len(launches) == config.num_layers, "the cluster kernel did not run"
    f64 = lambda a: np.asarray(a, np.float64)  # noqa: E731
    want = lstm_forward(f64(x), _as64(weights), f64(h0), f64(c0), bidirectional=config.bidirectional,
                        strategy="reference")
    errors = {n: rel_err(g, w) for n, g, w in zip(("y", "hT", "cT"), (got.y, got.h, got.c),
                                                  (want.y, want.h, want.c))}
    assert max(errors.values()) <= tol, errors
    return got


CONFIGS = [(h, b, 7) for h in (32, 100, 256) for b in (1, 3, 4)] + [
    (32, 4, 1), (100, 3, 300), (256, 1, 300), (256, 4, 300), (100, 1, 1)]


@pytest.mark.parametrize("hidden, batch, steps", CONFIGS)
def test_fp32_two_layer_bidirectional_matches_float64_reference(rng, cluster, hidden, batch, steps):
    config = LSTMConfig(24, hidden, 2, True, "float32", batch, steps)
    _compare_forward(rng, config, FP32_TOL, cluster)


@pytest.mark.parametrize("hidden, batch, steps, bidir", [(128, 1, 64, False), (512, 4, 40, False)])
def test_fp32_benchmark_shapes(rng, cluster, hidden, batch, steps, bidir):
    """The benchmark's rows; H=512 runs on a cluster of 16 (non-portable size)."""
    config = LSTMConfig(hidden, hidden, 1, bidir, "float32", batch, steps)
    _compare_forward(rng, config, FP32_TOL, cluster)
    assert cluster[0].cluster == (16 if hidden == 512 else 8)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16bit_storage_matches_reference(rng, cluster, dtype, monkeypatch):
    # "auto" runs 16-bit on the tensor-core kernel (v4); without it, inference takes the cluster kernel
    monkeypatch.setattr(persistent.capacity, "MMA_DTYPES", ())
    config = LSTMConfig(100, 100, 2, True, dtype, 3, 50)
    _compare_forward(rng, config, HALF_TOL, cluster)


def test_bitwise_identical_reruns_and_close_to_the_grid_kernel(rng, cluster, monkeypatch):
    config = LSTMConfig(40, 256, 2, True, "float32", 3, 100)
    weights, x, h0, c0 = random_problem(rng, config)
    runs = [lstm_forward(x, weights, h0, c0, bidirectional=True, strategy="persistent") for _ in range(2)]
    assert len(cluster) == 4
    for a, b in zip((runs[0].y, runs[0].h, runs[0].c), (runs[1].y, runs[1].h, runs[1].c)):
        assert np.array_equal(a, b)
    monkeypatch.setattr(persistent, "CLUSTER_DEFAULT", False)
    grid = lstm_forward(x, weights, h0, c0, bidirectional=True, strategy="persistent")
    assert len(cluster) == 4 and rel_err(runs[0].y, grid.y) <= FP32_TOL


def test_training_forward_on_the_cluster_feeds_the_v2_backward(rng, cluster):
    import cupy as cp
    config = LSTMConfig(30, 100, 2, True, "float32", 3, 20)
    weights, x, h0, c0 = random_problem(rng, config)
    dy = rng.standard_normal(config.output_shape).astype(np.float32)
    dh, dc = (rng.standard_normal(config.state_shape).astype(np.float32) for _ in range(2))
    dev = [LayerWeights(*(cp.asarray(a) for a in w)) for w in weights]
    y, h, c, reserve = persistent.forward(config, cp.asarray(x), dev, cp.asarray(h0), cp.asarray(c0),
                                          training=True, variant="cluster")
    assert len(cluster) == 2
    grads = persistent.backward(reserve, cp.asarray(dy), cp.asarray(dh), cp.asarray(dc))
    f64 = lambda a: np.asarray(a, np.float64)  # noqa: E731
    want = lstm_forward(f64(x), _as64(weights), f64(h0), f64(c0), bidirectional=True, strategy="reference",
                        training=True)
    want_grads = lstm_backward(want.reserve, f64(dy), f64(dh), f64(dc))
    got = [y, h, c, grads[0], grads[1], grads[2]] + [a for g in grads[3] for a in g]
    ref = [want.y, want.h, want.c, want_grads.dx, want_grads.dh0, want_grads.dc0] + \
          [a for g in want_grads.dweights for a in g]
    errors = [rel_err(cp.asnumpy(g), w) for g, w in zip(got, ref)]
    assert max(errors) <= FP32_TOL, errors


def test_too_large_for_a_cluster_raises_before_any_launch(rng, cluster):
    import cupy as cp
    config = LSTMConfig(8, 1024, 1, False, "float32", 4, 2)
    weights, x, h0, c0 = random_problem(rng, config)
    dev = [LayerWeights(*(cp.asarray(a) for a in w)) for w in weights]
    with pytest.raises(NotSupported, match="hidden_size=1024"):
        persistent.forward(config, cp.asarray(x), dev, cp.asarray(h0), cp.asarray(c0), variant="cluster")
    assert not cluster


def test_compiled_kernel_does_not_spill_and_clusters_are_resident():
    from ecornn.engines import persistent_capacity as cap
    from ecornn.gpu import device_properties
    plan = cap.plan_cluster(device_properties(), 256, 4, 2)
    report = persistent.cluster_kernel_report(plan)
    assert report["local_bytes"] == 0 and report["occupancy_per_sm"] >= 1
    assert report["max_active_clusters"] is None or report["max_active_clusters"] >= 2
