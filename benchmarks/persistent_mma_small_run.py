"""A small tensor-core (v4/v5/v11/v12/v13) forward + backward for compute-sanitizer runs: 2 layers, bidirectional,
odd sizes (H=40: odd 16-row padding, unaligned rows), fp16 and bf16; fails unless the mma kernel ran."""
import numpy as np

from ecornn import LSTMConfig, lstm_backward, lstm_forward
from ecornn.engines import persistent
from ecornn.weights import init_weights

# Both exchanges: tagged (this size's default) and grid.sync with packed 16-bit vectors (forced).
for dtype, exchange in (("float16", "auto"), ("bfloat16", "auto"), ("float16", False), ("bfloat16", False)):
    persistent.TAGGED_EXCHANGE = exchange
    config = LSTMConfig(24, 42, 2, True, dtype, 3, 5)
    rng = np.random.default_rng(0)
    weights = init_weights(config, seed=1)
    x = rng.standard_normal(config.input_shape).astype(dtype)
    h0, c0 = (rng.standard_normal(config.state_shape).astype(dtype) for _ in range(2))
    out = lstm_forward(x, weights, h0, c0, bidirectional=True, strategy="persistent", training=True)
    grads = lstm_backward(out.reserve, np.ones(config.output_shape, dtype))
    assert persistent.last_kinds == {"forward": "mma", "backward": "mma"}, persistent.last_kinds
    print("mma small run ok", dtype, exchange, float(np.abs(np.asarray(out.y, np.float32)).sum()),
          float(np.abs(np.asarray(grads.dx, np.float32)).sum()))
persistent.TAGGED_EXCHANGE = "auto"

# v11: 8 units per block (H=1024), where the grid.sync passes run their pointwise threads units
# fastest; the forward forced to grid.sync as well.
for exchange in ("auto", False):
    persistent.TAGGED_EXCHANGE = exchange
    config = LSTMConfig(16, 1024, 1, False, "float16", 3, 4)
    rng = np.random.default_rng(4)
    x = rng.standard_normal(config.input_shape).astype("float16")
    out = lstm_forward(x, init_weights(config, seed=5), strategy="persistent", training=True)
    grads = lstm_backward(out.reserve, np.ones(config.output_shape, "float16"))
    assert persistent.last_kinds == {"forward": "mma", "backward": "mma"}, persistent.last_kinds
    print("mma H=1024 run ok", exchange, float(np.abs(np.asarray(grads.dx, np.float32)).sum()))
persistent.TAGGED_EXCHANGE = "auto"

# v12: the input projection inside the forward kernel (forced at B=3; every input size a multiple
# of 8), both exchanges (grid.sync: the split barrier), 2 layers bidirectional.
persistent.IN_KERNEL_PROJECTION = True
for dtype, exchange in (("float16", "auto"), ("bfloat16", False)):
    persistent.TAGGED_EXCHANGE = exchange
    config = LSTMConfig(24, 40, 2, True, dtype, 3, 5)
    assert persistent._final(persistent.plans_for(config, True)["forward"]).input_k_tiles > 0
    rng = np.random.default_rng(6)
    x = rng.standard_normal(config.input_shape).astype(dtype)
    out = lstm_forward(x, init_weights(config, seed=7), bidirectional=True, strategy="persistent", training=True)
    grads = lstm_backward(out.reserve, np.ones(config.output_shape, dtype))
    assert persistent.last_kinds == {"forward": "mma", "backward": "mma"}, persistent.last_kinds
    print("mma in-kernel projection run ok", dtype, exchange, float(np.abs(np.asarray(grads.dx, np.float32)).sum()))
persistent.TAGGED_EXCHANGE = "auto"
persistent.IN_KERNEL_PROJECTION = "auto"

# v13: fp32 forwards split into fp16 halves (forced at this size), both exchanges; fp32 backward.
# v14: B=2 and B=4 run the paired split (hi and lo rows in one mma N tile), B=3 the 3-mma one.
persistent.FP32_TENSOR_CORES = True
for exchange, batch in (("auto", 3), (False, 3), ("auto", 4), (False, 2)):
    persistent.TAGGED_EXCHANGE = exchange
    config = LSTMConfig(24, 42, 2, True, "float32", batch, 5)
    rng = np.random.default_rng(8)
    x = rng.standard_normal(config.input_shape).astype("float32")
    h0, c0 = (rng.standard_normal(config.state_shape).astype("float32") for _ in range(2))
    out = lstm_forward(x, init_weights(config, seed=9), h0, c0, bidirectional=True, strategy="persistent",
                       training=True)
    grads = lstm_backward(out.reserve, np.ones(config.output_shape, "float32"))
    assert persistent.last_kinds["forward"] == "mma", persistent.last_kinds
    print("fp32 split run ok", exchange, batch, float(np.abs(np.asarray(grads.dx, np.float32)).sum()))
persistent.TAGGED_EXCHANGE = "auto"
persistent.FP32_TENSOR_CORES = "auto"

# v5: inference with prepared weights replays a CUDA graph from the second call on.
from ecornn import prepare_weights  # noqa: E402
from ecornn.engines import persistent_graph  # noqa: E402
for dtype in ("float16", "bfloat16"):   # H=41: h0 and c0 of 984 bytes, a tail past the copy kernel's 16-byte words (v17)
    config = LSTMConfig(24, 41, 2, True, dtype, 3, 5)
    rng = np.random.default_rng(2)
    prepared = prepare_weights(init_weights(config, seed=3), strategy="persistent", bidirectional=True)
    x = rng.standard_normal(config.input_shape).astype(dtype)
    h0, c0 = (rng.standard_normal(config.state_shape).astype(dtype) for _ in range(2))
    ys = [np.asarray(lstm_forward(x, prepared, h0, c0, bidirectional=True, strategy="persistent").y, np.float32)
          for _ in range(3)]
    assert not persistent_graph.capture_errors, persistent_graph.capture_errors
    assert all(np.array_equal(ys[0], y) for y in ys[1:])
    print("graph replay ok", dtype, float(np.abs(ys[-1]).sum()))
