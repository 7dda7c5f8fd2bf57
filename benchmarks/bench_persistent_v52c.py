"""v52 benchmark, third set: the rule's register k-tiles ("auto") against none on issue 5's 16-bit cells, more rounds
(call 4's quick bench read fp16 H=1024 B=16 2.43 and bf16 H=1024 B=4 1.70 on a new machine start, above calls 1-2).

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v52c --rounds 6 --name ab_alternate_v52c
"""
ROWS = [("float16", 1024, 16), ("bfloat16", 1024, 4), ("float16", 1024, 8), ("bfloat16", 1024, 16)]
ALTERNATE_MODES = {"v52 rule": {}, "none in registers (v51)": {"INPUT_REG_K_TILES": 0}}
MODES = ALTERNATE_MODES
