"""Small training calls through the v57 prologue for compute-sanitizer runs: the fp32 split's h0 exponents by 16-byte
loads (H=256 B=8, h0 columns of very different scales) and by single loads (H=130), the 16-bit projection's W_ih
tiles copied into shared memory by cp.async (fp16 H=256 B=16 in groups), bf16 two layers bidirectional; every
forward and backward checked against float64 (fp32 1e-5, 16-bit 1e-2)."""
import numpy as np

from ecornn import LSTMConfig, LayerWeights, init_weights, lstm_backward, lstm_forward


def rel_err(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))


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
for hidden, layers, dtype, batch in ((256, 1, "float32", 8), (130, 1, "float32", 8), (256, 1, "float16", 16),
                                     (64, 2, "bfloat16", 4)):
    run(LSTMConfig(hidden, hidden, layers, layers > 1, dtype, batch, 4), rng)
print("prologue small run ok")
