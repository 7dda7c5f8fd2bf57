"""v57: the tensor-core kernels' prologue with its loads in flight together (persistent.ASYNC_PROLOGUE: the fp32
split's h0 exponents by 16-byte loads, shared-memory fragment tiles by cp.async) against v56's round trips (the
ablation), whole forwards alternated.

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v57 --rounds 6 --name ab_alternate_v57
"""
ROWS = [("float32", 1024, 8), ("float32", 1024, 4), ("float16", 1024, 16), ("float16", 1024, 8),
        ("bfloat16", 1024, 4)]
ALTERNATE_MODES = {
    "v56 (prologue in round trips)": {"ASYNC_PROLOGUE": 0},
    "h0 exponents by 16-byte loads": {"ASYNC_PROLOGUE": 1},
    "shared tiles by cp.async": {"ASYNC_PROLOGUE": 2},
    "v57 (both)": {},
}
MODES = ALTERNATE_MODES
