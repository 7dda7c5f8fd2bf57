"""v60 diagnostic: why the quick bench reads fp32 H=1024 B=8 higher than the alternated diagnostics.

The quick bench (bench_persistent.py --quick) times each cell's whole forward over 20 synchronised calls after 3
warm-up calls, right after the capture, with cuDNN's rows (torch) run in between cells; v60's diagnostics read the
same graph 0.05-0.1 µs/step lower over hundreds of calls. Here one problem's forward is timed in blocks, as the quick
bench times it: the first 20 after 3 warm-ups, 200 more, then after a cuDNN LSTM row (bench_persistent.cudnn_times),
20 and 200 again.

    python benchmarks/diag_bench_phase_v60.py OUT_DIR [--cells float32:1024:8,...]
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import STEPS, _median_ms, _problem, cudnn_times  # noqa: E402
from diag_host_layers_v60 import diag_main  # noqa: E402


def cell_row(dtype, hidden, batch) -> dict:
    from ecornn.engines import persistent
    config, weights, x, h0, c0 = _problem(dtype, hidden, batch)
    prepared = persistent.prepare(config, weights)
    fwd = lambda: persistent.forward(config, x, weights, h0, c0, prepared=prepared)  # noqa: E731
    us = lambda ms: ms * 1e3 / STEPS  # noqa: E731
    blocks = {"first 20 (as the quick bench)": us(_median_ms(fwd, 20, warmup=3)),
              "next 200": us(_median_ms(fwd, 200, warmup=0))}
    cudnn = cudnn_times(dtype, hidden, batch)[0]
    blocks["20 after a cuDNN row"] = us(_median_ms(fwd, 20, warmup=0))
    blocks["200 more"] = us(_median_ms(fwd, 200, warmup=0))
    return {"dtype": dtype, "hidden": hidden, "batch": batch, "us_per_step": blocks, "cudnn_us_per_step": cudnn}


def markdown(rows) -> str:
    names = list(rows[0]["us_per_step"])
    lines = ["| cell | " + " | ".join(names) + " | cuDNN |", "|---" * (len(names) + 2) + "|"]
    for r in rows:
        lines.append(f"| {r['dtype']} H={r['hidden']} B={r['batch']} | "
                     + " | ".join(f"{r['us_per_step'][n]:.3f}" for n in names) + f" | {r['cudnn_us_per_step']:.2f} |")
    return "\n".join(lines)


def main(argv=None):
    diag_main(argv, "diag_bench_phase_v60", lambda dtype, hidden, batch, *_: cell_row(dtype, hidden, batch), markdown,
              "float32:1024:8,float32:1024:4")


if __name__ == "__main__":
    main()
