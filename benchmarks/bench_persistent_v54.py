"""v54 benchmark: the 16-bit forward's in-kernel input projection on warps of its own (INPUT_WARPS), with the input
warps' registers set by setmaxnreg (INPUT_WARP_REGS, sm_90a) where the recurrent warps need more than an even share,
against v53's plans (the projection on the recurrent warps, between a block's publish and its next poll).

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v54 --rounds 4 --name ab_alternate_v54
"""
ROWS = [("float16", 1024, 16), ("float16", 1024, 8)]
WARPS = {"INPUT_WARPS": 4, "INPUT_WARP_REGS": 96}
AT_ONCE = {**WARPS, "INPUT_WARPS_WAIT_X": False}
WAIT_X = {**WARPS, "INPUT_WARPS_WAIT_SLEEP_NS": 50}
ALTERNATE_MODES = {
    "v53": {},
    "input warps, polls once x is staged (50 ns sleeps)": WAIT_X,
    "the same, no input product (diagnostic: wrong sums)": {**WAIT_X, "DIAG_IN_K_TILES_USED": 0},
    "polls at once, no input product (diagnostic)": {**AT_ONCE, "DIAG_IN_K_TILES_USED": 0},
}
MODES = ALTERNATE_MODES
