"""v45: why fp32 H=1024 B=7 is slower than B=6 and B=8 (v43: forward 2.95 vs 2.67 / 2.70 µs/step, fwd+bwd 14.8 vs 11.7 /
11.9 µs/step): every kernel of a graph-replayed forward (profile_replay_kernels_v33.profile) and of an eager training
call (profile_training_kernels.profile_row), by CUPTI, at B = 6, 7, 8, so the kernel or GEMM that grows at B=7 shows.

    python benchmarks/profile_batch7_v45.py OUT_DIR [--repeats N]
Writes OUT_DIR/profile_batch7_v45.{json,md}.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import profile_replay_kernels_v33 as replay  # noqa: E402
import profile_training_kernels as training  # noqa: E402
from bench_persistent import bench_args, bench_meta, measure_rows  # noqa: E402

ROWS = [("float32", 1024, b) for b in (6, 7, 8)]


def _row(dtype, hidden, batch, repeats):
    row = {"forward": replay._row(dtype, hidden, batch, repeats)}
    try:
        row["training"] = training.profile_row(dtype, hidden, batch, max(2, repeats // 2))
    except Exception as exc:   # recorded, never hidden
        row["training_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    return {"dtype": dtype, "hidden": hidden, "batch": batch, **row}


def markdown(rows) -> str:
    parts = []
    for r in rows:
        parts.append(replay.markdown([r["forward"]]))
        parts.append(training.markdown([r["training"]]) if "training" in r else r.get("training_error", ""))
    return "\n".join(parts)


def main(argv=None):
    args, out = bench_args(argv, repeats=10)
    measure_rows(out, "profile_batch7_v45", bench_meta(), ROWS, lambda d, h, b: _row(d, h, b, args.repeats), markdown)


if __name__ == "__main__":
    main()
