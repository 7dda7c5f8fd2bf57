"""v55: x of several steps staged at once by cp.async (X_STEPS) against one step at a time, whole forward and kernel
alone, alternated in one process. The rule (rules.x_steps) takes 4 in batch groups from H=768; the ungrouped fp16
H=1024 B=8 row is forced (its diagnostic read slower without x's staging).

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v55b --rounds 3 --name ab_alternate_v55b
"""
ROWS = [("float16", 1024, 16), ("bfloat16", 1024, 16), ("float16", 1024, 12), ("float16", 768, 16),
        ("float16", 1024, 8)]
ALTERNATE_MODES = {
    "one step (v53)": {"X_STEPS": 1},
    "2 steps": {"X_STEPS": 2},
    "4 steps": {"X_STEPS": 4},
}
MODES = ALTERNATE_MODES
