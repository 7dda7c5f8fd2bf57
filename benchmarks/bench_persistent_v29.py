"""v29 benchmark: the fp32 split forward with its input projection in the kernel (W_ih's hi fragments in
shared memory times x as split_x_rows' row-scaled hi and lo rows, x_hi W_lo^T one fp16 GEMM before
the kernel; forced with IN_KERNEL_PROJECTION=True) against v28's (the fp16-split GEMM before the
kernel: "auto", rules.split_projection_pays never takes the projection). H=1024 B=8 is the control:
its 16-warp build spills with the projection and backs off to v28's plan. benchmarks/ab_alternate.py
alternates the two modes (whole forward by graph replay and the kernel alone); run as a script, the
pair bench (once per mode) adds fwd+bwd and cuDNN for TRAIN_ROWS.

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v29 --rounds 3 --name ab_alternate_v29
    python benchmarks/bench_persistent_v29.py OUT_DIR [--repeats N] [--rows N] [--v28-first]
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_modes  # noqa: E402

ROWS = [("float32", 1024, 4), ("float32", 1024, 8)]
MODES = {"in kernel": {"IN_KERNEL_PROJECTION": True}, "v28": {}}
TRAIN_ROWS = [("float32", 1024, 4)]
row, markdown, main = ab_modes.pair_bench(TRAIN_ROWS, MODES, ("in kernel", "v28"), "persistent_v29_bench", "--v28-first",
                                          "time the v28 mode first (order bias check)")

if __name__ == "__main__":
    main()
