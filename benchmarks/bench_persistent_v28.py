"""v28 benchmark: the fp32 forwards with v28 (split words in the B=4 split's tagged exchange, first poll
after 400 ns; the fp32 kernels' gates on MUFU.EX2 / MUFU.RCP; the projection as one fp16 GEMM on
row-scaled halves) against v27's (SPLIT_WORDS and FAST_FP32_GATES off, FP32_GEMMS "onepass": v13's
hi and lo rows, v26's 1200 ns, expf / tanhf, one-pass 3xTF32). 8_ ran it before the projection and
with a 300 ns delay (v27 mode without the FP32_GEMMS entry). benchmarks/ab_alternate.py
alternates the two modes (whole forward by graph replay and the kernel alone); run as a script, the
pair bench (once per mode) adds fwd+bwd and cuDNN for TRAIN_ROWS.

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v28 --rounds 3 --name ab_alternate_v28
    python benchmarks/bench_persistent_v28.py OUT_DIR [--repeats N] [--rows N] [--v27-first]
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_modes  # noqa: E402

ROWS = [("float32", h, b) for h, b in ((1024, 4), (1024, 8), (512, 4), (256, 1), (1536, 4), (1024, 1),
                                       (512, 8), (1024, 16), (256, 8), (384, 16))]
MODES = {"v28": {}, "v27": {"SPLIT_WORDS": False, "FAST_FP32_GATES": False, "FP32_GEMMS": "onepass"}}
TRAIN_ROWS = [("float32", 1024, 4), ("float32", 1024, 8), ("float32", 512, 4), ("float32", 1536, 4)]
row, markdown, main = ab_modes.pair_bench(TRAIN_ROWS, MODES, ("v28", "v27"), "persistent_v28_bench", "--v27-first",
                                          "time the v27 mode first (order bias check)")

if __name__ == "__main__":
    main()
