"""v51 benchmark: the whole forward with the 16-bit GEMMs by cublasGemmEx (v50) and by cuBLASLt (gpu_blas_lt: its
first heuristic, or the fastest of its first candidates timed once), alternated in one process
(benchmarks/ab_alternate.py). The fp32 split forwards run their input projection as one fp16 GEMM; fp16 H=1024
B=16 (the projection in the kernel, no GEMM) is the control.

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v51 --rounds 6 --name ab_alternate_v51
"""
ROWS = [("float32", 1024, 4), ("float32", 1024, 8), ("float32", 512, 4), ("float32", 256, 1), ("float16", 1024, 16)]
ALTERNATE_MODES = {"GemmEx (v50)": {"LT_GEMMS": False}, "Lt heuristic": {"LT_GEMMS": True, "ALGO_CHOICE": "heuristic"},
                   "Lt timed": {"LT_GEMMS": True, "ALGO_CHOICE": "timed"}}
MODES = ALTERNATE_MODES
