"""Small replayed forwards (v49: the ring's fetch and its few copies as one node, fetch_and_copy) for compute-sanitizer
runs: fp32 with x read where it lies by the split (H=1024 B=4) and with x copied (H=64 B=3), fp16 with x read by the
kernel; each replay checked bitwise against the eager call; fails unless the one node ran."""
import cupy as cp
import numpy as np

from ecornn import LSTMConfig, init_weights
from ecornn.engines import persistent, persistent_graph
from ecornn.weights import LayerWeights

rng = np.random.default_rng(49)
for dtype, hidden, batch in (("float32", 1024, 4), ("float32", 64, 3), ("float16", 256, 8)):
    config = LSTMConfig(hidden, hidden, 1, False, dtype, batch, 6)
    weights = [LayerWeights(*(cp.asarray(np.asarray(a, np.float32)).astype(dtype) for a in w))
               for w in init_weights(config, seed=1, scale=None)]
    prepared = persistent.prepare(config, weights)
    calls = [tuple(cp.asarray(rng.standard_normal(shape, dtype=np.float32)).astype(dtype)
                   for shape in (config.input_shape, config.state_shape, config.state_shape)) for _ in range(4)]
    replays = [persistent.forward(config, c[0], weights, c[1], c[2], prepared=prepared)[:3] for c in calls]
    (entry,) = prepared.graphs.values()
    assert entry.ring.copies_in_one_block() and entry.ring.issued == 3, dtype
    persistent_graph.ENABLED = False
    eager = [persistent.forward(config, c[0], weights, c[1], c[2], prepared=prepared)[:3] for c in calls]
    persistent_graph.ENABLED = True
    for got, want in zip(replays, eager):
        assert all(bool(cp.array_equal(g, w)) for g, w in zip(got, want)), dtype
print("replay small run ok")
