"""v52 benchmark, fourth set: x_{t+1} copied into shared memory by cp.async right after step t's recurrent product
(X_EARLY_COPY) against the copy after the publish, under v52's rule (v37 measured a similar copy a tie at fp16 B=16 and
slower at B <= 8, when the product after the publish was longer).

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v52d --rounds 4 --name ab_alternate_v52d
"""
ROWS = [("float16", 1024, 16), ("bfloat16", 1024, 16), ("float16", 1024, 8), ("bfloat16", 1024, 4)]
ALTERNATE_MODES = {"v52 rule": {}, "x copied early": {"X_EARLY_COPY": True},
                   "x copied early, 1 register k-tile": {"X_EARLY_COPY": True, "INPUT_REG_K_TILES": 1}}
MODES = ALTERNATE_MODES
