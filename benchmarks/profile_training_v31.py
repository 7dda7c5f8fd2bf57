"""profile_training_kernels.py on v31's cells (fp16 H=1024 B=16 and B=8, H=256 B=32): every kernel of
one training call and cuDNN's in the same process. The ecornn imported is whichever is on PYTHONPATH
first (run it against v30's tree for the "before" table).

    python benchmarks/profile_training_v31.py OUT_DIR [--iterations N] [--name NAME]
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import profile_training_kernels as ptk  # noqa: E402
from bench_persistent import bench_args, bench_meta, measure_rows  # noqa: E402

ROWS = [("float16", 1024, 16), ("float16", 1024, 8), ("float16", 256, 32)]


def main(argv=None):
    def configure(parser):
        parser.add_argument("--iterations", type=int, default=5)
        parser.add_argument("--name", default="profile_training_v31")
    args, out = bench_args(argv, configure=configure)
    measure_rows(out, args.name, bench_meta(), ROWS,
                 lambda dtype, hidden, batch: ptk.profile_row(dtype, hidden, batch, args.iterations), ptk.markdown)


if __name__ == "__main__":
    main()
