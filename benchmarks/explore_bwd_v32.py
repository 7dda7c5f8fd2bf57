"""v32 exploration: fp32 training calls with the grid and rows backwards' next-step loads after
grid.sync (BWD_LATE_LOADS=True) against before it (v31's fp32 kernels), alternated in one process.
CELLS: the issue's rows (call 3; tagged grid backwards there load nothing late, the control);
--grid-sync: the grid backwards under grid.sync (call 4).

    python benchmarks/explore_bwd_v32.py OUT_DIR [--grid-sync] [--rounds N] [--repeats N]
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from explore_bwd_v31 import explore  # noqa: E402

CELLS = [("float32", h, b) for h, b in ((1024, 1), (1024, 4), (1024, 8), (512, 4), (512, 8), (256, 8))]
GRID_SYNC_CELLS = [("float32", h, b) for h, b in ((512, 8), (256, 16), (512, 16), (384, 8), (768, 8), (1536, 4))]
MODES = {"late loads": {"BWD_LATE_LOADS": True}, "v31": {"BWD_LATE_LOADS": False}}

if __name__ == "__main__":
    argv = sys.argv[1:]
    grid_sync = "--grid-sync" in argv
    explore([a for a in argv if a != "--grid-sync"], GRID_SYNC_CELLS if grid_sync else CELLS, MODES,
            "explore_bwd_v32_grid_sync" if grid_sync else "explore_bwd_v32")
