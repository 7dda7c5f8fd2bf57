"""v58: fp32 H=1024 B=16's forward on clusters again (v44's split in 2 batch groups, 2 register k-tiles, plain output
stores: OUT_DELTA=0, a replay copies its outputs out) against the unclustered groups it fell back to in v51-v57
(CLUSTER_K False), whole forwards alternated; fp32 B=8 (clusters, the delta kept) as the control.

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v58 --rounds 4 --name ab_alternate_v58
"""
ROWS = [("float32", 1024, 16), ("float32", 896, 16), ("float32", 1024, 8)]
ALTERNATE_MODES = {
    "v58 (auto: clusters where they pay)": {},
    "no clusters (v51-v57's fallback at B=16)": {"CLUSTER_K": False},
}
MODES = ALTERNATE_MODES
