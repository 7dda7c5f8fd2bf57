"""v37 benchmark: the in-kernel projection's x_{t+1} copied to shared memory by cp.async in step t once the warp
has staged h (ASYNC_X_STAGING "staged"), at step t's top ("top"), against v12's loads after the step's publish
(the ablation). The step clocks (v37, diag_step_clocks_v37.py) put those loads, ~0.4 µs of L2 round trip, on the
tagged forwards' critical path: a block polls for step t+1 only after its input product, which waited for them.
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
MODES = {"v37": {}, "v36": {"ASYNC_X_STAGING": False}}
ALTERNATE_MODES = {"v37": {}, "top": {"ASYNC_X_STAGING": "top"}, "v36": {"ASYNC_X_STAGING": False}}
TRAIN_ROWS = [("float16", 1024, 8), ("float16", 1024, 16)]
row, markdown, main = ab_modes.pair_bench(TRAIN_ROWS, MODES, ("v37", "v36"), "persistent_v37_bench", "--v36-first",
                                          "time the v36 mode first (order bias check)")

if __name__ == "__main__":
    main()
