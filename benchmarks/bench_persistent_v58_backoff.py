"""v58: fp32 H=1280 B=3's grid forward (and H=1536 B=3's: 22 of 23 columns, against the split v57 fell back to), which NVRTC spills by 8 bytes at the model's 37 register columns, backed off one
column a retry (33 build) against v57's 8 a retry (29), whole forwards alternated. Training's near misses: ab_train_v52
--set v58.

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v58_backoff --rounds 4 --name ab_alternate_v58_backoff
"""
ROWS = [("float32", 1536, 3), ("float32", 1280, 3)]   # H=1536 B=3: v57 fell back to the split
ALTERNATE_MODES = {
    "v58 (a near miss moves 1 column)": {},
    "v57 (8 columns a retry)": {"FINE_BACKOFF_BYTES": 0},
}
MODES = ALTERNATE_MODES
