"""v35 diagnostic: the fp32 forward's accuracy against float64 as the input projection's reduction (K = input size)
grows, with the fp16-split projection GEMM (FP32_GEMMS "fp16split", the default) and strict SGEMM. The backward's
3xTF32 GEMMs lost accuracy with K (calls 13, 15: 1.4e-5 at K = 6144); the forward's projection reduces over the input
size, which v35's tests covered only up to 1536.

    python benchmarks/diag_forward_projection_v35.py OUT_DIR
Writes OUT_DIR/diag_forward_projection_v35.{json,md}.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import bench_args, bench_meta, save_rows  # noqa: E402

CELLS = [(1024, 512, 4, 64), (4096, 512, 4, 64), (8192, 512, 4, 64), (8192, 1024, 8, 32)]   # (input, H, B, T)
MODES = {"fp16split": {"FP32_PROJECTION_LONG_FROM_K": None}, "strict": {"MIN_3XTF32_FLOPS": 1e30}}


def _rel(got, want) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


def measure(inp, hidden, batch, steps) -> dict:
    from ecornn import LSTMConfig, LayerWeights, init_weights, lstm_forward
    from ecornn.engines import persistent
    config = LSTMConfig(inp, hidden, 1, False, "float32", batch, steps)
    rng = np.random.default_rng(inp + hidden)
    weights = init_weights(config, seed=hidden)
    x, h0, c0 = (rng.standard_normal(s).astype(np.float32) for s in (config.input_shape, config.state_shape,
                                                                      config.state_shape))
    f64 = lambda a: np.asarray(a, np.float64)  # noqa: E731
    want = lstm_forward(f64(x), [LayerWeights(*map(f64, w)) for w in weights], f64(h0), f64(c0), strategy="reference")
    row = {"input": inp, "hidden": hidden, "batch": batch, "steps": steps}
    for mode, flags in MODES.items():
        saved = {k: getattr(persistent, k) for k in flags}
        for k, v in flags.items():
            setattr(persistent, k, v)
        try:
            got = lstm_forward(x, weights, h0, c0, strategy="persistent")
            row[mode] = {"y": _rel(got.y, want.y), "hT": _rel(got.h, want.h), "cT": _rel(got.c, want.c),
                         "kind": persistent.last_kinds.get("forward")}
        finally:
            for k, v in saved.items():
                setattr(persistent, k, v)
    return row


def markdown(rows) -> str:
    lines = ["| input | H | B | T | " + " | ".join(f"y / cT {m}" for m in MODES) + " |", "|---|---|---|---|" + "---|" * len(MODES)]
    for r in rows:
        cells = " | ".join(f"{r[m]['y']:.2e} / {r[m]['cT']:.2e} ({r[m]['kind']})" for m in MODES)
        lines.append(f"| {r['input']} | {r['hidden']} | {r['batch']} | {r['steps']} | {cells} |")
    return "\n".join(lines)


def main(argv=None):
    _, out = bench_args(argv)
    rows = []
    for cell in CELLS:
        rows.append(measure(*cell))
        save_rows(out, "diag_forward_projection_v35", bench_meta(), rows, markdown(rows))
    print(markdown(rows))


if __name__ == "__main__":
    main()
