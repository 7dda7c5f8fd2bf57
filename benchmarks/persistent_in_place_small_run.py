"""Small replayed inference forwards whose kernels write their outputs into the caller's new buffer (v56,
persistent_graph.OUTPUTS_IN_PLACE) for compute-sanitizer runs: fp16 and fp32 single layer, bf16 two layers
bidirectional; each replayed with new inputs, bitwise the eager path; fails unless the graphs write in place."""
import cupy as cp
import numpy as np

from ecornn import LSTMConfig, init_weights
from ecornn.engines import persistent, persistent_graph
from ecornn.weights import LayerWeights


def _inputs(config, rng, dtype):
    return tuple(cp.asarray(rng.standard_normal(shape, dtype=np.float32) * scale).astype(dtype)
                 for shape, scale in ((config.input_shape, 1.0), (config.state_shape, 0.5), (config.state_shape, 0.5)))


for dtype, inp, hidden, layers, batch in (("float16", 64, 128, 1, 8), ("float32", 1024, 1024, 1, 4),
                                          ("bfloat16", 48, 64, 2, 4)):
    config = LSTMConfig(inp, hidden, layers, layers > 1, dtype, batch, 5)
    rng = np.random.default_rng(hidden + batch)
    host = init_weights(config, seed=hidden, scale=None)
    x_dtype = np.float32 if dtype == "float32" else (np.float16 if dtype == "float16" else None)
    if x_dtype is None:
        import ml_dtypes
        x_dtype = ml_dtypes.bfloat16
    weights = [LayerWeights(*(cp.asarray(np.asarray(a, np.float32)).astype(x_dtype) for a in w)) for w in host]
    prepared = persistent.prepare(config, weights)
    calls = [_inputs(config, rng, x_dtype) for _ in range(4)]
    outs = [persistent.forward(config, *c[:1], weights, *c[1:], prepared=prepared)[:3] for c in calls]
    (entry,) = prepared.graphs.values()
    assert entry.in_place, (dtype, entry.kind)
    persistent_graph.ENABLED = False
    eager = [persistent.forward(config, *c[:1], weights, *c[1:], prepared=prepared)[:3] for c in calls]
    persistent_graph.ENABLED = True
    for got, want in zip(outs, eager):
        for g, w in zip(got, want):
            assert bool((g.view(cp.uint8) == w.view(cp.uint8)).all()), dtype
print("in-place small run ok")
