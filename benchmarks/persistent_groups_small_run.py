"""A small 16-bit forward + backward in many batch groups (v39: groups of 8 columns) for compute-sanitizer runs:
2 layers, bidirectional, odd H, fp16 in 4 groups and bf16 in 8; fails unless the grouped mma kernels ran."""
import numpy as np

from ecornn import LSTMConfig, lstm_backward, lstm_forward
from ecornn.engines import persistent
from ecornn.weights import init_weights


def train_once(config, label: str, backward_kind: str = "mma") -> None:
    """One persistent training call of ``config`` (random x, h0, c0; dy of ones), the forward on the tensor cores,
    the backward on ``backward_kind``'s kernel."""
    dtype, batch = config.dtype, config.batch
    rng = np.random.default_rng(batch)
    x = rng.standard_normal(config.input_shape).astype(dtype)
    h0, c0 = (rng.standard_normal(config.state_shape).astype(dtype) for _ in range(2))
    out = lstm_forward(x, init_weights(config, seed=1), h0, c0, bidirectional=config.bidirectional,
                       strategy="persistent", training=True)
    grads = lstm_backward(out.reserve, np.ones(config.output_shape, dtype))
    assert persistent.last_kinds == {"forward": "mma", "backward": backward_kind}, persistent.last_kinds
    print(label, dtype, batch, float(np.abs(np.asarray(out.y, np.float32)).sum()),
          float(np.abs(np.asarray(grads.dx, np.float32)).sum()))


if __name__ == "__main__":
    for dtype, hidden, batch, groups in (("float16", 40, 32, 4), ("bfloat16", 24, 64, 8)):
        config = LSTMConfig(16, hidden, 2, True, dtype, batch, 5)
        plans = {k: persistent._final(p) for k, p in persistent.plans_for(config, True).items()}
        assert {p.batch_groups for p in plans.values()} == {groups}, plans
        train_once(config, f"groups small run ok ({groups} groups)")
