"""v34 benchmark: the fp32 split forward taking h0 into its step-0 product (H0_IN_PRODUCT, scaled per batch
column) against the host's strict-fp32 W_hh h0 GEMV added at step 0 (v32/v33, the ablation).
benchmarks/ab_alternate.py alternates the modes (whole forward by graph replay and the kernel alone: the kernel
alone has no GEMV in either mode, so it shows what the prologue's h0 reduction costs).

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v34 --rounds 3 --name ab_alternate_v34
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_modes  # noqa: E402

ROWS = [("float32", h, b) for h, b in ((1024, 4), (1024, 8), (1536, 4), (1024, 16), (512, 16))]
MODES = {"v34": {}, "gemv": {"H0_IN_PRODUCT": False}}
TRAIN_ROWS = [("float32", 1024, 8)]
row, markdown, main = ab_modes.pair_bench(TRAIN_ROWS, MODES, ("v34", "gemv"), "persistent_v34_bench", "--gemv-first",
                                          "time the gemv mode first (order bias check)")

if __name__ == "__main__":
    main()
