"""v28 benchmark: the fp32 input projection before the kernel as one fp16 GEMM on row-scaled hi/lo halves
(persistent.FP32_GEMMS = "fp16split", gpu_blas.matmul_fp16_split3) against v25's one TF32 GEMM over a 3x
longer reduction ("onepass"). benchmarks/ab_alternate.py alternates the two modes (whole forward by graph
replay and the kernel alone); run as a script, the pair bench adds fwd+bwd and cuDNN for TRAIN_ROWS.

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v28_projection --rounds 3 --name ab_projection_v28
    python benchmarks/bench_persistent_v28_projection.py OUT_DIR [--repeats N] [--rows N] [--onepass-first]
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_modes  # noqa: E402

ROWS = [("float32", h, b) for h, b in ((1024, 4), (1024, 8), (512, 4), (1536, 4), (1024, 16), (512, 8))]
MODES = {"fp16split": {"FP32_GEMMS": "fp16split"}, "onepass": {"FP32_GEMMS": "onepass"}}
TRAIN_ROWS = [("float32", 1024, 4), ("float32", 1024, 8), ("float32", 512, 4)]
row, markdown, main = ab_modes.pair_bench(TRAIN_ROWS, MODES, ("fp16split", "onepass"), "persistent_v28_projection",
                                          "--onepass-first", "time the onepass mode first (order bias check)")

if __name__ == "__main__":
    main()
