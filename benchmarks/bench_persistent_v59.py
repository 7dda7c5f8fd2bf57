"""v59: an inference graph's copy of h0 and c0 and its first exchange memset on a side branch beside the input
projection (persistent_graph.FRONT_BRANCH) against v58's graph, all in line; whole forwards alternated.

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v59 --rounds 6 --name ab_alternate_v59
"""
ROWS = [("float32", 1024, 8), ("float32", 1024, 4), ("float16", 1024, 16), ("bfloat16", 1024, 4),
        ("float16", 1024, 8), ("float32", 512, 4)]
# call 2 timed the branch against v58; "in line" (v59's compact copy node and the memset in one line, call 3) asks
# what the branch's join costs where the copy node's grid alone is smaller. Since call 4 the in-kernel projections
# (fp16 B=8 and 16 here) capture no branch: their two modes are one graph.
ALTERNATE_MODES = {
    "v59 (front branch)": {},
    "v59's nodes in line": {"FRONT_BRANCH": "in line"},
    "v58 (in line)": {"FRONT_BRANCH": False},
}
MODES = ALTERNATE_MODES
