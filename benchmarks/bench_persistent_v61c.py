"""v61c: fp32 H=1024 B=8 on clusters of 2 (v42's rule, each block half of K and a DSMEM handoff of the partials)
against the unclustered split with the tagged exchange (each block all of K, 32 KB of h staged a step; v42 measured
it only against grid.sync), whole forwards alternated.

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v61c --rounds 6 --repeats 50 --name ab_alternate_v61c
"""
ROWS = [("float32", 1024, 8), ("float32", 1280, 8)]
ALTERNATE_MODES = {
    "clusters of 2 (rule)": {},
    "unclustered, tagged": {"CLUSTER_K": False, "TAGGED_EXCHANGE": True},
    "unclustered, tagged, 100 ns backoff": {"CLUSTER_K": False, "TAGGED_EXCHANGE": True, "POLL_BACKOFF_NS": 100},
}
MODES = ALTERNATE_MODES
