"""v35: the tagged split's first-poll delay as __nanosleep(400) (v28) against a clock64() spin of fixed SM cycles
(POLL_SPIN_CYCLES; ~1.98 GHz: 600 ≈ 300 ns, 800 ≈ 400, 1000 ≈ 500). PTX bounds a
nanosleep only by [0, 2 t]; the placement diagnostic (diag_placement_v35) showed the fp32 H=1024 B=4 kernel
alone moving between ~2.0 and ~1.8 µs/step with time in one process, whatever its buffers' placement.

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v35_spin --rounds 8 --name ab_spin_v35
"""
ROWS = [("float32", 1536, 4), ("float32", 1024, 4), ("float32", 1280, 4)]
ALTERNATE_MODES = {"auto": {}, "nanosleep": {"POLL_SPIN_CYCLES": 0}, "spin 800": {"POLL_SPIN_CYCLES": 800}}
MODES = ALTERNATE_MODES
# call 9 (8 rounds, H=1024 and H=1536 first; the modes then: nanosleep / spin 600 / 800 / 1000), kernel alone H=1024
# 1.842 / 2.012 / 1.897 / 1.979, H=1536 3.214 / 3.209 / 2.997 / 3.116; call 10 (10 rounds: nanosleep / spin 700 / 800
# / 900): H=1536 3.188 / 3.243 / 3.006 / 3.036, H=1024 1.940 / 2.028 / 1.989 / 1.966, H=1280 2.858 / 2.824 / 2.732 /
# 2.751. v35's rule (rules.poll_spin_cycles): 800 cycles with 3 m-tiles ("auto" above), the sleep otherwise.
