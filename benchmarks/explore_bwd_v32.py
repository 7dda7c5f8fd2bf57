"""v32 exploration: fp32 training calls with the grid and rows backwards' next-step loads after
grid.sync (BWD_LATE_LOADS=True) against before it (v31's fp32 kernels), alternated in one process.

    python benchmarks/explore_bwd_v32.py OUT_DIR [--rounds N] [--repeats N]
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from explore_bwd_v31 import explore  # noqa: E402

CELLS = [("float32", h, b) for h, b in ((1024, 1), (1024, 4), (1024, 8), (512, 4), (512, 8), (256, 8))]
MODES = {"late loads": {"BWD_LATE_LOADS": True}, "v31": {"BWD_LATE_LOADS": False}}

if __name__ == "__main__":
    explore(sys.argv[1:], CELLS, MODES, "explore_bwd_v32")
