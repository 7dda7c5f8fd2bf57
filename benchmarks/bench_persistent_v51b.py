"""v51 benchmark, second set: the in-kernel projection over half of the inputs and a GEMM over the rest
(persistent.INPUT_PART_K_TILES="half") against v50's plan at small batches, where call 8 measured bf16 H=1024 B=4
1.670 vs 1.769 us/step (fp16 B=8 and B=16 lost: the GEMM's share costs more than the kernel saves there).

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v51b --rounds 4 --name ab_alternate_v51b
"""
ROWS = [("bfloat16", 1024, 4), ("float16", 1024, 4), ("float16", 1024, 5), ("float16", 1024, 6),
        ("bfloat16", 512, 4), ("float16", 768, 4), ("bfloat16", 256, 4), ("float16", 512, 8)]
ALTERNATE_MODES = {"v50 (all in the kernel)": {}, "half in the kernel": {"INPUT_PART_K_TILES": "half"}}
MODES = ALTERNATE_MODES
