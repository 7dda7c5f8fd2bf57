"""v39: the medium-batch 16-bit cells that now run in more batch groups (rules.batch_group_counts), each through
bench_persistent.row (T=256, input = hidden): the persistent engine's whole forward and fwd+bwd, the fused engine's
forward, cuDNN's forward and fwd+bwd in the same process. benchmarks/planner_vs_measured.py reads the JSON.

    python benchmarks/bench_groups_v39.py OUT_DIR [--repeats N]
Writes OUT_DIR/bench_groups_v39.{json,md}.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import bench_args, bench_meta, markdown, row, save_rows  # noqa: E402

CELLS = [("float16", 256, 32), ("float16", 512, 32), ("bfloat16", 512, 32), ("float16", 768, 32),
         ("float16", 256, 64), ("float16", 512, 64), ("bfloat16", 384, 64), ("bfloat16", 512, 64),
         ("bfloat16", 256, 48), ("float16", 512, 48), ("float16", 128, 128), ("float16", 256, 128),
         ("float16", 1024, 24), ("float16", 1024, 32)]


def run(cells, name: str, argv=None):
    """Bench ``cells`` (dtype, hidden, batch) one row at a time, saving OUT_DIR/``name``.{json,md} after each."""
    args, out = bench_args(argv, repeats=10)
    meta, rows = bench_meta(), []
    for cell in cells:
        rows.append(row(*cell, repeats=args.repeats))
        print(markdown(rows[-1:]).splitlines()[-1], flush=True)
        save_rows(out, name, meta, rows, markdown(rows))


def main(argv=None):
    run(CELLS, "bench_groups_v39", argv)


if __name__ == "__main__":
    main()
