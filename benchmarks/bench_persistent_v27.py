"""v27 benchmark: the fp32 split on the tensor cores (v13) below FP32_SPLIT_MIN_HIDDEN, where the
cluster kernel no longer runs (rules.cluster_pays) and the FFMA grid kernel does: FP32_TENSOR_CORES
True (the split wherever it fits) against False (FFMA: v26's plan below H=512; 8_ ran it against
the v26 rule, which is FFMA at every row but the last). benchmarks/ab_alternate.py alternates
the two modes (whole forward by graph replay and the kernel alone); run as a script, the pair bench
(once per mode) adds fwd+bwd and cuDNN for TRAIN_ROWS.

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v27 --rounds 3 --name ab_split_small_h
    python benchmarks/bench_persistent_v27.py OUT_DIR [--repeats N] [--rows N] [--ffma-first]
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_modes  # noqa: E402

ROWS = [("float32", h, b) for h, b in ((128, 16), (128, 32), (192, 16), (192, 32), (256, 8), (256, 16), (256, 32),
                                       (320, 8), (320, 16), (384, 8), (384, 16), (384, 32), (448, 8), (448, 16),
                                       (512, 16))]   # the last: the split since v13 (a reference point)
MODES = {"split": {"FP32_TENSOR_CORES": True}, "ffma": {"FP32_TENSOR_CORES": False}}   # "ffma": v26's plan below H=512
TRAIN_ROWS = [("float32", 384, 16), ("float32", 256, 32), ("float32", 320, 16), ("float32", 192, 32)]
row, markdown, main = ab_modes.pair_bench(TRAIN_ROWS, MODES, ("split", "ffma"), "persistent_v27_bench", "--ffma-first",
                                          "time the FFMA mode first (order bias check)")

if __name__ == "__main__":
    main()
