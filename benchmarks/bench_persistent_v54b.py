"""v54 diagnostic (timing only: the sums are wrong): the 16-bit grouped forward's in-kernel input product over only
its first n k-tiles per warp (DIAG_IN_K_TILES_USED; the first 2 are the register tiles), an upper bound for any scheme
that reads fewer of W_ih's shared-memory tiles per step. v51's cluster pairing halves them; built as v54b's PAIR_INPUT
(commit 6c32348), it measured slower (notes_persistent.md, v54).

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v54b --rounds 3 --name ab_alternate_v54b
"""
ROWS = [("float16", 1024, 16), ("bfloat16", 1024, 16)]
ALTERNATE_MODES = {
    "v53 (8 k-tiles: 2 registers, 6 shared)": {},
    "5 used: 3 shared (diagnostic)": {"DIAG_IN_K_TILES_USED": 5},
    "4 used: 2 shared (diagnostic)": {"DIAG_IN_K_TILES_USED": 4},
    "2 used: registers only (diagnostic)": {"DIAG_IN_K_TILES_USED": 2},
}
MODES = ALTERNATE_MODES
