"""v35 diagnostic: the fp32 backward's dx against float64 under each FP32_BACKWARD_GEMMS mode. Call 11 found dx at
1.43e-5 (norm-wise relative) for fp32 H=1536 B=4 T=40, over the 1e-5 target, with every other output and gradient
at ~1e-6: the dX GEMM (dz [T B, 4H] W_ih, a reduction over K = 4H = 6144) on v25's one-pass 3xTF32.

    python benchmarks/diag_backward_dx_v35.py OUT_DIR [--long]
Writes OUT_DIR/diag_backward_dx_v35.{json,md}.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import bench_args, bench_meta, save_rows  # noqa: E402

CELLS = [(1536, 4, 40), (1536, 4, 6), (1024, 4, 40), (1024, 8, 40), (512, 4, 40)]   # call 13
MODES = ("onepass", "3xtf32", "strict")
if "--long" in sys.argv:   # the weight gradients' reductions run over T B rows: long sequences (call 15)
    sys.argv.remove("--long")
    CELLS, MODES = [(512, 8, 1000), (256, 16, 1000), (1024, 8, 256)], ("onepass", "strict")
SEEDS = (1, 2)


def _rel(got, want) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


def measure(hidden, batch, steps, mode, seed) -> dict:
    from ecornn import LSTMConfig, LayerWeights, init_weights, lstm_backward, lstm_forward
    from ecornn.engines import persistent
    config = LSTMConfig(hidden, hidden, 1, False, "float32", batch, steps)
    rng = np.random.default_rng(seed)
    weights = init_weights(config, seed=seed)
    x, h0, c0 = (rng.standard_normal(s).astype(np.float32) for s in (config.input_shape, config.state_shape,
                                                                      config.state_shape))
    dy, dh, dc = (rng.standard_normal(s).astype(np.float32) for s in (config.output_shape, config.state_shape,
                                                                       config.state_shape))
    persistent.FP32_BACKWARD_GEMMS = mode
    try:
        out = lstm_forward(x, weights, h0, c0, strategy="persistent", training=True)
        got = lstm_backward(out.reserve, dy, dh, dc)
    finally:
        persistent.FP32_BACKWARD_GEMMS = "onepass"
    f64 = lambda a: np.asarray(a, np.float64)  # noqa: E731
    w64 = [LayerWeights(*map(f64, w)) for w in weights]
    ref = lstm_forward(f64(x), w64, f64(h0), f64(c0), strategy="reference", training=True)
    want = lstm_backward(ref.reserve, f64(dy), f64(dh), f64(dc))
    return {"hidden": hidden, "batch": batch, "steps": steps, "mode": mode, "seed": seed,
            "dx": _rel(got.dx, want.dx), "dh0": _rel(got.dh0, want.dh0),
            "dw_ih": _rel(got.dweights[0][0], want.dweights[0][0]), "dw_hh": _rel(got.dweights[0][1], want.dweights[0][1])}


def markdown(rows) -> str:
    lines = ["| H | B | T | mode | seed | dx | dh0 | dW_ih | dW_hh |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['hidden']} | {r['batch']} | {r['steps']} | {r['mode']} | {r['seed']} | {r['dx']:.2e} | "
                     f"{r['dh0']:.2e} | {r['dw_ih']:.2e} | {r['dw_hh']:.2e} |")
    return "\n".join(lines)


def main(argv=None):
    _, out = bench_args(argv)
    rows = []
    for hidden, batch, steps in CELLS:
        for mode in MODES:
            for seed in SEEDS:
                rows.append(measure(hidden, batch, steps, mode, seed))
        save_rows(out, "diag_backward_dx_v35", bench_meta(), rows, markdown(rows))
    print(markdown(rows))


if __name__ == "__main__":
    main()
