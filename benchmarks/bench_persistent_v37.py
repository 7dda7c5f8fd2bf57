"""v37 benchmark: tagged forwards with the in-kernel projection issue the next step's first poll early (EARLY_POLL:
cp.async into shared memory once x_{t+1} has arrived, so its round trip overlaps the input product) against v12's
first poll after the input product (the ablation). The step clocks (diag_step_clocks_v37.py) put the projection
(~0.7-1.0 µs) and then one poll round trip (~0.6 µs) in series on the step's critical path.
(Calls 2 and 3 of v37 alternated ASYNC_X_STAGING "staged" / "top" / False here: both copies were slower.)
benchmarks/ab_alternate.py alternates the modes (whole forward by graph replay and the kernel alone).

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v37 --rounds 4 --name ab_alternate_v37
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_modes  # noqa: E402

# the cells with the projection in the kernel, then others of the projection rule (v12/v26/v30)
ROWS = [("float16", 1024, 8), ("float16", 1024, 16), ("bfloat16", 1024, 4), ("bfloat16", 1024, 16),
        ("float16", 512, 8), ("float16", 1024, 32), ("float16", 256, 16)]
MODES = {"v37": {}, "v36": {"EARLY_POLL": False}}
ALTERNATE_MODES = {"registers": {}, "shared": {"EARLY_POLL": "shared"}, "v36": {"EARLY_POLL": False}}
TRAIN_ROWS = [("float16", 1024, 8), ("float16", 1024, 16)]
row, markdown, main = ab_modes.pair_bench(TRAIN_ROWS, MODES, ("v37", "v36"), "persistent_v37_bench", "--v36-first",
                                          "time the v36 mode first (order bias check)")

if __name__ == "__main__":
    main()
