"""v31 exploration: a training call (bench_persistent_v31.training_ms) under engine-flag modes alternated
in one process (ab_modes.alternate_rounds): v31's plans ("auto": late loads and the 16-bit dy where
rules.late_loads_pay), late loads nowhere (the 16-bit gradients alone), and v30's backward I/O. Calls 5-7 ran the
exploration's earlier modes (flags since folded into the plans; results/persistent_v31/README.md).

    python benchmarks/explore_bwd_v31.py OUT_DIR [--rounds N] [--repeats N]
"""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ab_modes import alternate_rounds  # noqa: E402
from bench_persistent import bench_args, bench_meta, save_rows  # noqa: E402
from bench_persistent_v31 import training_ms  # noqa: E402

CELLS = [("float16", 1024, 16), ("float16", 1024, 8), ("float16", 256, 32), ("bfloat16", 1024, 4),
         ("float16", 512, 16), ("bfloat16", 256, 8), ("bfloat16", 512, 32), ("float16", 1536, 8)]
MODES = {"v31": {}, "no late loads": {"BWD_LATE_LOADS": False},
         "v30": {"BWD_LATE_LOADS": False, "BACKWARD_16BIT_DY": False, "BACKWARD_16BIT_GRADS": False}}


def explore(argv, cells, modes, name):
    """Training calls of ``cells`` under ``modes`` alternated (the first round dropped); table and JSON
    under OUT_DIR/``name``."""
    def configure(parser):
        parser.add_argument("--rounds", type=int, default=3)
    args, out = bench_args(argv, repeats=15, configure=configure)
    meta = bench_meta()
    measure = lambda: {f"{d} H={h} B={b}": training_ms(d, h, b, args.repeats) for d, h, b in cells}  # noqa: E731
    times = alternate_rounds(modes, args.rounds, measure)
    lines = ["| cell | " + " | ".join(modes) + " |", "|---|" + "---|" * len(modes)]
    for d, h, b in cells:
        key = f"{d} H={h} B={b}"
        lines.append(f"| {key} | " + " | ".join(f"{np.median(times[m][key]):.3f} ({' / '.join(f'{v:.3f}' for v in times[m][key])})"
                                               for m in modes) + " |")
    table = "\n".join(lines)
    save_rows(out, name, meta, [times], table)
    print(table)


def main(argv=None):
    explore(argv, CELLS, MODES, "explore_bwd_v31")


if __name__ == "__main__":
    main()
