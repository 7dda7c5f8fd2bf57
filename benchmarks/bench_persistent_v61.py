"""v61: a replay's graph found by the key of the call before (persistent_graph.LOOKUP_MEMO) against v60's key built and
hashed per call (the ablation), whole forwards alternated in one process.

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v61 --rounds 8 --repeats 100 --name ab_alternate_v61
"""
ROWS = [("float32", 1024, 8), ("float32", 1024, 4), ("float16", 1024, 16), ("bfloat16", 1024, 4)]
ALTERNATE_MODES = {
    "v60 (key per call)": {"LOOKUP_MEMO": False},
    "v61 (key remembered)": {},
}
MODES = ALTERNATE_MODES
