"""Small training calls through the v57 prologue for compute-sanitizer runs (run from the repository root, on its
PYTHONPATH): the fp32 split's h0 exponents by 16-byte loads (H=1024 B=4, ungrouped; h0 columns of very different
scales) and by single loads (H=130 in groups), fp16 H=256 B=16 in groups, bf16 two layers bidirectional; every
forward and backward checked against float64 (fp32 1e-5, 16-bit 1e-2)."""
import numpy as np

from ecornn import LSTMConfig, LayerWeights, init_weights, lstm_backward, lstm_forward
from ecornn.engines import persistent
from tests.helpers import rel_err


def run(config, rng):
    weights = init_weights(config, seed=int(rng.integers(2**31)))
    x = rng.standard_normal(config.input_shape).astype(config.dtype)
    h0 = rng.standard_normal(config.state_shape).astype(np.float32)
    h0 *= np.asarray([0.0, 1e-3, 1e3] + [1.0] * (config.batch - 3), np.float32)[None, :, None]
    h0, c0 = h0.astype(config.dtype), rng.standard_normal(config.state_shape).astype(config.dtype)
    seeds = [rng.standard_normal(s).astype(config.dtype) for s in (config.output_shape, config.state_shape,
                                                                   config.state_shape)]
    results = []
    for strategy, cast in (("persistent", lambda a: a), ("reference", lambda a: np.asarray(a, np.float64))):
        w = [LayerWeights(*(cast(a) for a in lw)) for lw in weights]
        out = lstm_forward(cast(x), w, cast(h0), cast(c0), bidirectional=config.bidirectional, strategy=strategy,
                           training=True)
        grads = lstm_backward(out.reserve, *(cast(s) for s in seeds))
        results.append([out.y, out.h, out.c, grads.dx, grads.dh0, grads.dc0])
    tol = 1e-5 if config.dtype == "float32" else 1e-2
    for got, want in zip(*results):
        assert rel_err(got, want) <= tol, (config, rel_err(got, want))


rng = np.random.default_rng(57)
wide = LSTMConfig(1024, 1024, 1, False, "float32", 4, 4)
assert persistent.plans_for(wide, True)["forward"].batch_groups == 1   # the wide loads' plans: ungrouped
for config in (wide, LSTMConfig(130, 130, 1, False, "float32", 8, 4), LSTMConfig(256, 256, 1, False, "float16", 16, 4),
               LSTMConfig(64, 64, 2, True, "bfloat16", 4, 4)):
    run(config, rng)
print("prologue small run ok")
