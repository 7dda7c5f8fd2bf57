"""v57: the fp32 split forward's prologue reading h0 for its exponents by 16-byte loads, all in flight
(persistent.H0_WIDE_LOADS) against v56's rounds of 4 single loads (the ablation), whole forwards alternated. (Call 6
alternated a cp.async copy of the shared-memory tiles as well: slower for fp32, removed.)

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v57 --rounds 6 --name ab_alternate_v57
"""
ROWS = [("float32", 1024, 8), ("float32", 1024, 4), ("float32", 512, 4), ("float32", 1536, 4),
        ("float16", 1024, 16)]
ALTERNATE_MODES = {
    "v56 (h0 by single loads)": {"H0_WIDE_LOADS": False},
    "v57 (h0 by 16-byte loads)": {},
}
MODES = ALTERNATE_MODES
