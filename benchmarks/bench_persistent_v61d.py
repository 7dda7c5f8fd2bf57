"""v61d diagnostic (timing only: builds that spill are kept): fp16 and bf16 H=1024 B=16 in batch groups with 3 and 4
W_ih k-tiles per warp in registers instead of the rule's 2. Those builds spill a little (nvcc 13: 16 and 80 bytes),
so the engine's back-off ran them as 1 and 2 in v52's measurement; here `DIAG_SPILL_BYTES_ACCEPTED` keeps them as
built, to see whether more W_ih in registers would pay at all (v61b's probe: a shared-memory k-tile costs ~2x one in
registers).

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v61d --rounds 6 --repeats 50 --name ab_alternate_v61d
    python benchmarks/bench_persistent_v61d.py   # each mode's build: registers, local memory, register k-tiles
"""
ROWS = [("float16", 1024, 16), ("bfloat16", 1024, 16)]
ALTERNATE_MODES = {
    "2 (rule)": {},
    "3, spill kept": {"INPUT_REG_K_TILES": 3, "DIAG_SPILL_BYTES_ACCEPTED": 512},
    "4, spill kept": {"INPUT_REG_K_TILES": 4, "DIAG_SPILL_BYTES_ACCEPTED": 512},
}
MODES = ALTERNATE_MODES


def reports() -> list:
    """Per row and mode, the forward's build as the engine keeps it."""
    import ab_modes
    import bench_persistent as bp
    from ecornn.engines import persistent
    out = []
    for cell in ROWS:
        config = bp._problem(*cell)[0]
        for mode, flags in ALTERNATE_MODES.items():
            ab_modes.set_engine_flags(flags)
            try:
                plan = persistent.built_plans(config, False)["forward"]
                report = persistent.kernel_report(plan)
                out.append((cell, mode, {k: report[k] for k in ("registers", "local_bytes")},
                            persistent._final(plan).input_reg_k_tiles))
            finally:
                ab_modes.set_engine_flags({})
    return out


if __name__ == "__main__":
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    for row in reports():
        print(*row)
