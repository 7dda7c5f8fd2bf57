"""profile_training_kernels.py for fp16 H=1024 B=16 under BATCH_GROUPS=True and False (v30), one
table each: OUT_DIR/profile_training_grouped.* and profile_training_v29.*.

    python benchmarks/profile_training_v30.py OUT_DIR [--iterations N]
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import profile_training_kernels as ptk  # noqa: E402
from bench_persistent import bench_args, bench_meta, measure_rows  # noqa: E402

from ecornn.engines import persistent  # noqa: E402


def main(argv=None):
    args, out = bench_args(argv, configure=lambda parser: parser.add_argument("--iterations", type=int, default=5))
    for name, grouped in (("grouped", True), ("v29", False)):
        persistent.BATCH_GROUPS = grouped
        measure_rows(out, f"profile_training_{name}", bench_meta(), [("float16", 1024, 16)],
                     lambda dtype, hidden, batch: ptk.profile_row(dtype, hidden, batch, args.iterations), ptk.markdown)


if __name__ == "__main__":
    main()
