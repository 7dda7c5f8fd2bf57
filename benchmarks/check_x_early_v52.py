"""v52 experiment check: forwards with X_EARLY_COPY are bitwise the default's (fp16 B=16 in groups, bf16 B=4 split,
fp16 H=1000 B=8, two layers bidirectional); prints one line per config and exits non-zero on a difference."""
import sys

import cupy as cp
import numpy as np

from ecornn import LSTMConfig, init_weights
from ecornn.engines import persistent
from ecornn.weights import LayerWeights

bad = 0
for inp, hidden, layers, bidir, dtype, batch in [(1024, 1024, 1, False, "float16", 16), (1024, 1024, 1, False, "bfloat16", 4),
                                                 (1000, 1000, 1, False, "float16", 8), (256, 256, 2, True, "float16", 16)]:
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, 37)
    rng = np.random.default_rng(hidden + batch)
    cpd = {"float16": np.float16, "bfloat16": __import__("ml_dtypes").bfloat16}[dtype]
    weights = [LayerWeights(*(cp.asarray(np.asarray(a, np.float32)).astype(cpd) for a in w))
               for w in init_weights(config, seed=3)]
    x = cp.asarray(rng.standard_normal(config.input_shape, dtype=np.float32)).astype(cpd)
    h0 = cp.asarray(rng.standard_normal(config.state_shape, dtype=np.float32) * 0.5).astype(cpd)
    outs = []
    for early in (False, True):
        persistent.X_EARLY_COPY = early
        outs.append([cp.asnumpy(a).astype(np.float32) for a in persistent.forward(config, x, weights, h0, h0)[:3]])
        outs[-1].append(persistent._final(persistent.plans_for(config)["forward"]).describe())
    same = all(np.array_equal(a, b) for a, b in zip(outs[0][:3], outs[1][:3]))
    bad += not same
    print(dtype, hidden, batch, layers, bidir, "bitwise" if same else "DIFFERENT", "|", outs[1][3])
sys.exit(1 if bad else 0)
