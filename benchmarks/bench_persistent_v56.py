"""v56: a replayed forward's outputs written by its kernels into the caller's new buffer (persistent_graph.
OUTPUTS_IN_PLACE) against v55's copy of the graph's outputs out (the ablation), whole forwards alternated.

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v56 --rounds 6 --name ab_alternate_v56
"""
ROWS = [("float32", 1024, 8), ("float32", 1024, 4), ("float16", 1024, 16), ("float16", 1024, 8),
        ("bfloat16", 1024, 4)]
ALTERNATE_MODES = {
    "v55 (outputs copied out)": {"OUTPUTS_IN_PLACE": False},
    "v56 (outputs in place)": {},
}
MODES = ALTERNATE_MODES
