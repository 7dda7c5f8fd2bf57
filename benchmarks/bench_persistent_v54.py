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
    "input warps sleep 100 ns between signal reads, polls at once": {**AT_ONCE, "INPUT_WARPS_SLEEP_NS": 100},
    "the same, no input product (diagnostic)": {**AT_ONCE, "INPUT_WARPS_SLEEP_NS": 100, "DIAG_IN_K_TILES_USED": 0},
    "input warps sleep 100 ns, polls once x is staged": {**WAIT_X, "INPUT_WARPS_SLEEP_NS": 100},
    "input warps sleep 300 ns, polls at once": {**AT_ONCE, "INPUT_WARPS_SLEEP_NS": 300},
}
MODES = ALTERNATE_MODES
