"""v57 diagnostic: the forward kernel's time apart from its steps, with its inputs in L2 or not.

diag_intercept_v57 found the fp32 H=1024 B=8 forward kernel at ~11 µs + 2.20 µs/step inside its graph (after the
input projection's GEMM) against ~1.7 µs + 2.19 µs/step for fp16 B=16's (no GEMM before it). Here the kernel runs
alone (bench_persistent.kernel_launcher) at two sequence lengths, each launch after a sync, either right after the
previous launch (`warm`: its register tiles and xw still in L2) or after a 256 MB write that evicts L2 (`flushed`).
CUPTI gives the kernel's own device time; a line through the two lengths its per-call part.

    python benchmarks/diag_prologue_v57.py OUT_DIR [--repeats N] [--cells ...] [--steps 16,256]
Writes OUT_DIR/diag_prologue_v57.{json,md}.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_persistent  # noqa: E402
from bench_persistent import _problem, kernel_launcher  # noqa: E402
from diag_intercept_v57 import line, main_over_steps  # noqa: E402
from diag_replay_span_v56 import cupti_parts  # noqa: E402

FLUSH_BYTES = 256 << 20


def kernel_us(launch, flush, repeats) -> float:
    """Median CUPTI µs of the forward kernel (the longest node of each call)."""
    fn = (lambda: (flush(), launch())) if flush else launch
    parts = cupti_parts(fn, repeats)
    if "error" in parts:
        return float("nan")
    return max(t for name, t in parts["nodes"] if "persistent" in name)


def cell_row(dtype, hidden, batch, repeats, steps) -> dict:
    import cupy as cp
    from ecornn.engines import persistent
    junk = cp.empty(FLUSH_BYTES // 4, cp.float32)
    flush = lambda: junk.fill(1.0)  # noqa: E731
    row = {"dtype": dtype, "hidden": hidden, "batch": batch, "runs": []}
    for t in steps:
        bench_persistent.STEPS = t   # _problem's T and the launcher's y
        config, weights, x, h0, c0 = _problem(dtype, hidden, batch, seed=hidden + batch + t)
        prepared = persistent.prepare(config, weights)
        plan = persistent._built_plans(persistent.run_config(config), False, "auto")["forward"]
        launch = kernel_launcher(config, prepared, x, h0, c0, plan)
        for _ in range(3):
            launch()
        row["runs"].append({"steps": t, "kind": plan.kind, "warm": kernel_us(launch, None, repeats),
                            "flushed": kernel_us(launch, flush, repeats)})
    ts = [r["steps"] for r in row["runs"]]
    row["fits"] = {mode: line(ts, [r[mode] for r in row["runs"]]) for mode in ("warm", "flushed")}
    return row


def markdown(rows) -> str:
    lines = ["| cell | kernel µs per T (warm / flushed) | warm a + b T | flushed a + b T |", "|---|---|---|---|"]
    for r in rows:
        runs = ", ".join(f"T={x['steps']}: {x['warm']:.1f} / {x['flushed']:.1f}" for x in r["runs"])
        (aw, bw), (af, bf) = r["fits"]["warm"], r["fits"]["flushed"]
        lines.append(f"| {r['dtype']} H={r['hidden']} B={r['batch']} | {runs} | {aw:.1f} + {bw:.4f} T | "
                     f"{af:.1f} + {bf:.4f} T |")
    return "\n".join(lines)


def main(argv=None):
    main_over_steps(argv, "diag_prologue_v57", "16,256", cell_row, markdown)


if __name__ == "__main__":
    main()
