"""v35: the fp32 backward's dX GEMM (dz W_ih, K = 4H) as strict SGEMM from K = 4096 (FP32_LONG_REDUCTION_FROM_K) against
v25's one-pass 3xTF32 everywhere (None): dx against float64 (norm-wise relative error, one draw per cell) and fwd+bwd
ms by graph replay, the modes alternated over rounds in one process (T=256, input = hidden).

    python benchmarks/bench_dx_v35.py OUT_DIR [--rounds N] [--repeats N]
Writes OUT_DIR/bench_dx_v35.{json,md}.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_modes  # noqa: E402
from bench_persistent import STEPS, bench_args, bench_meta, save_rows, training_call  # noqa: E402

CELLS = [(1536, 4), (1024, 8), (1024, 4), (768, 8)]
MODES = {"v35": {}, "one pass": {"FP32_LONG_REDUCTION_FROM_K": None}}


def _rel(got, want) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


def dx_errors(hidden, batch) -> dict:
    from ecornn import LayerWeights, LSTMConfig, init_weights, lstm_backward, lstm_forward
    config = LSTMConfig(hidden, hidden, 1, False, "float32", batch, STEPS)
    rng = np.random.default_rng(hidden + batch)
    weights = init_weights(config, seed=hidden)
    shapes = (config.input_shape, config.state_shape, config.state_shape, config.output_shape, config.state_shape,
              config.state_shape)
    x, h0, c0, dy, dh, dc = (rng.standard_normal(s).astype(np.float32) for s in shapes)
    f64 = lambda a: np.asarray(a, np.float64)  # noqa: E731
    ref = lstm_forward(f64(x), [LayerWeights(*map(f64, w)) for w in weights], f64(h0), f64(c0),
                       strategy="reference", training=True)
    want = lstm_backward(ref.reserve, f64(dy), f64(dh), f64(dc)).dx
    errors = {}
    for mode, flags in MODES.items():
        ab_modes.set_engine_flags(flags)
        try:
            out = lstm_forward(x, weights, h0, c0, strategy="persistent", training=True)
            errors[mode] = _rel(lstm_backward(out.reserve, dy, dh, dc).dx, want)
        finally:
            ab_modes.set_engine_flags({})
    return errors


def train_ms(hidden, batch, rounds, repeats) -> dict:
    return ab_modes.alternate_calls(MODES, lambda: training_call("float32", hidden, batch, seed=hidden + batch)[0],
                                    rounds, repeats)


def markdown(rows) -> str:
    return ab_modes.error_time_table(rows, MODES, {"H": "hidden", "B": "batch"}, "dx", "ms", "dx err", "fwd+bwd ms")


def main(argv=None):
    args, out = bench_args(argv, repeats=10, configure=lambda p: p.add_argument("--rounds", type=int, default=4))
    rows = []
    for hidden, batch in CELLS:
        rows.append({"hidden": hidden, "batch": batch, "dx": dx_errors(hidden, batch),
                     "ms": train_ms(hidden, batch, args.rounds, args.repeats)})
        save_rows(out, "bench_dx_v35", bench_meta(), rows, markdown(rows))
    print(markdown(rows))


if __name__ == "__main__":
    main()
