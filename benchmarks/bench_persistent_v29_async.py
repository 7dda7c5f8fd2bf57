"""v29's second change alone: the in-kernel projection's x_{t+1} rows copied to shared memory by
cp.async at step t's start (X_ASYNC) against v12-v28's staging by the product itself (an L2 round
trip inside the block's wait), on every plan that projects x in the kernel: the fp32 split (v29),
bf16 H=1024 B=4 (v12) and fp16 H=1024 B=8 (v26).

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v29_async --rounds 3 --name ab_x_async
"""
ROWS = [("float32", 1024, 4), ("bfloat16", 1024, 4), ("float16", 1024, 8), ("bfloat16", 2048, 4)]
MODES = {"x async": {}, "x staged": {"X_ASYNC": False}}
