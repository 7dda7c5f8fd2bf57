"""v59: an inference graph's copy of h0 and c0 and its first exchange memset on a side branch beside the input
projection (persistent_graph.FRONT_BRANCH) against v58's graph, all in line; whole forwards alternated.

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v59 --rounds 6 --name ab_alternate_v59
"""
ROWS = [("float32", 1024, 8), ("float32", 1024, 4), ("float32", 512, 4), ("bfloat16", 1024, 4),
        ("float32", 1536, 4), ("float32", 256, 1), ("float16", 1024, 16), ("float16", 1024, 8)]
# call 2 timed the branch against v58; call 3 also FRONT_BRANCH="in line" (v59's compact copy node and the memset in
# one line: the fp32 gain is the overlap, not the smaller copy grid; the mode was removed in the review, code in
# dc9383b). Since call 4 the in-kernel projections (fp16
# B=8 and 16 here) capture no branch: their two modes are one graph (a control).
ALTERNATE_MODES = {
    "v59 (front branch)": {},
    "v58 (in line)": {"FRONT_BRANCH": False},
}
MODES = ALTERNATE_MODES
