"""v51 benchmark: 16-bit forwards in batch groups with the input projection as the GEMM before the kernel (no W_ih
tiles read from shared memory each step) and a first-poll wait in its place, against v30's plan (the projection in
the kernel), alternated in one process (benchmarks/ab_alternate.py).

Why: the v51 diagnostic (DIAG_IN_K_TILES_USED, results/persistent_v51 call 4) put fp16 H=1024 B=16's step at 2273 ns
with the in-kernel input product, 1887 with half its k-tiles and 1751 without it (x still loaded): the product's
W_ih reads from shared memory (128 KB per block per step) sit on every block's own loop.

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v51 --rounds 4 --name ab_alternate_v51
"""
ROWS = [("float16", 1024, 16), ("bfloat16", 1024, 16), ("float16", 768, 16)]
_GEMM = {"IN_KERNEL_PROJECTION": False, "TAGGED_EXCHANGE": True}
ALTERNATE_MODES = {"v50 (projection in the kernel)": {}, "GEMM, grid.sync": {"IN_KERNEL_PROJECTION": False},
                   "GEMM, tagged, no wait": _GEMM,
                   "GEMM, tagged, 400 ns sleep": {**_GEMM, "GROUPED_GEMM_POLL_DELAY_NS": 400, "POLL_SPIN_CYCLES": 0},
                   "GEMM, tagged, 800-cycle spin": {**_GEMM, "GROUPED_GEMM_POLL_DELAY_NS": 400, "POLL_SPIN_CYCLES": 800},
                   "GEMM, tagged, 1400-cycle spin": {**_GEMM, "GROUPED_GEMM_POLL_DELAY_NS": 700,
                                                     "POLL_SPIN_CYCLES": 1400}}
MODES = ALTERNATE_MODES
