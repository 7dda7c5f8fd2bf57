"""v53 benchmark, third set: the fp32 forwards' first-poll wait around its measured values. fp32 H=1024 B=4 (the paired
split, __nanosleep(400), which PTX bounds only by [0, 800] ns) and B=8 (the clustered split, a spin of 800 cycles, whose
500 and 1100 lost 0.12-0.22 us/step in call 2) under spins of 600-1300 cycles.

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v53c --rounds 4 --name ab_alternate_v53c
"""
ROWS = [("float32", 1024, 4), ("float32", 1024, 8)]
ALTERNATE_MODES = {"rules (B=4 sleep 400, B=8 spin 800)": {}, "spin 600": {"POLL_SPIN_CYCLES": 600},
                   "spin 700": {"POLL_SPIN_CYCLES": 700}, "spin 900": {"POLL_SPIN_CYCLES": 900},
                   "spin 1000": {"POLL_SPIN_CYCLES": 1000}, "spin 1300": {"POLL_SPIN_CYCLES": 1300}}
MODES = ALTERNATE_MODES
