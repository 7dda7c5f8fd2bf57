"""Both GPU strategies on the cells the planner's fp32 constants are fitted on (v50): forward µs/step and
forward+backward ms of `persistent` and `fused` through the functional API on prepared weights, and cuDNN
(torch.nn.LSTM, PyTorch defaults) in the same process. T=256, 1 layer, input = hidden, random inputs.

    python benchmarks/sweep_strategies_v50.py OUT_DIR [--cells fp32|fp16|all] [--repeats N]
Writes OUT_DIR/sweep_strategies_v50.json after every cell (rows in bench_persistent's format, plus
fused_train_ms), so a run cut short keeps what it measured; planner_vs_measured.py reads it.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import STEPS, _median_ms, _problem, add_cudnn, bench_meta  # noqa: E402

CELLS = {
    "fp32": [("float32", h, b) for h in (256, 512, 1024) for b in (8, 16, 32, 64, 128)],
    "fp16": [("float16", 1024, b) for b in (32, 64, 128)],
}


def strategy_times(strategy: str, dtype: str, hidden: int, batch: int, repeats: int) -> tuple:
    """(forward µs/step, forward+backward ms) of ``strategy`` on prepared weights."""
    import cupy as cp
    import numpy as np
    from ecornn import lstm_backward, lstm_forward, prepare_weights
    config, weights, x, h0, c0 = _problem(dtype, hidden, batch)
    prepared = prepare_weights(weights, strategy=strategy)
    forward_ms = _median_ms(lambda: lstm_forward(x, prepared, h0, c0, strategy=strategy), repeats)
    dy = cp.asarray(np.random.default_rng(1).standard_normal(config.output_shape, dtype=np.float32)).astype(x.dtype)

    def train():
        out = lstm_forward(x, prepared, h0, c0, strategy=strategy, training=True)
        lstm_backward(out.reserve, dy)
    return forward_ms * 1e3 / STEPS, _median_ms(train, max(5, repeats // 2))


def cell(dtype: str, hidden: int, batch: int, repeats: int) -> dict:
    entry = {"dtype": dtype, "hidden": hidden, "batch": batch, "steps": STEPS}
    for strategy in ("persistent", "fused"):
        try:
            entry[f"{strategy}_us"], entry[f"{strategy}_train_ms"] = strategy_times(
                strategy, dtype, hidden, batch, repeats)
        except Exception as exc:  # NotSupported or a failure: recorded, never hidden
            entry[f"{strategy}_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    add_cudnn(entry, dtype, hidden, batch, repeats, strict=False)
    return entry


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--cells", choices=("fp32", "fp16", "all"), default="all")
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    cells = CELLS["fp32"] + CELLS["fp16"] if args.cells == "all" else CELLS[args.cells]
    meta, rows = bench_meta(), []
    for dtype, hidden, batch in cells:
        start = time.perf_counter()
        rows.append(cell(dtype, hidden, batch, args.repeats))
        r = rows[-1]
        print(f"{dtype} H={hidden} B={batch}: persistent {r.get('persistent_us', '-')} / "
              f"{r.get('persistent_train_ms', '-')} ms, fused {r.get('fused_us', '-')} / "
              f"{r.get('fused_train_ms', '-')} ms, cudnn {r.get('cudnn_us', '-')} "
              f"({time.perf_counter() - start:.0f} s) {r.get('persistent_error', '')}", flush=True)
        (args.out / "sweep_strategies_v50.json").write_text(
            json.dumps({"meta": meta, "rows": rows}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
