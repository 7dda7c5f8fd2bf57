"""A small cluster-kernel forward (2 layers, bidirectional, inference + training reserve) for
compute-sanitizer runs."""
import cupy as cp
import numpy as np

from ecornn import LSTMConfig
from ecornn.engines import persistent
from ecornn.weights import LayerWeights, init_weights

config = LSTMConfig(24, 40, 2, True, "float32", 3, 5)
rng = np.random.default_rng(0)
weights = [LayerWeights(*(cp.asarray(a, cp.float32) for a in w)) for w in init_weights(config, seed=1)]
x = cp.asarray(rng.standard_normal(config.input_shape).astype(np.float32))
h0, c0 = (cp.asarray(rng.standard_normal(config.state_shape).astype(np.float32)) for _ in range(2))
for training in (False, True):
    y, h, c, _ = persistent.forward(config, x, weights, h0, c0, training=training, variant="cluster")
    print("cluster small run ok", training, float(cp.abs(y).sum()), float(cp.abs(h).sum()))
