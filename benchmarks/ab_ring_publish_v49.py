"""v49 benchmark: the replay ring as v48 had it and as v49 has it, alternated in one process on one prepared forward
per cell: the whole forward (graph replay, synchronised calls as bench_persistent) µs/step per round, after a warm-up
round not kept. Modes: v49; v48's publish (InputRing.publish, before each replayed launch and so on the benches'
span). (Call 5 also alternated a one-node fetch_and_copy, commit 3308f14: slower or tied, removed.)

v48's publish is restated here (its attribute reads: NumPy scalar reads of the host words, CuPy's ``flags`` object,
``data_address``'s NumPy probe, a slot view per write) and patched onto the ring class for its rounds.

    python benchmarks/ab_ring_publish_v49.py OUT_DIR [--rounds N] [--repeats N]
Writes OUT_DIR/ab_ring_publish_v49.md and .json.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import STEPS, _median_ms, _problem, bench_args, bench_meta, save_rows  # noqa: E402

from ecornn.engines import persistent_replay_ring as ring_module  # noqa: E402

CELLS = [("float32", 1024, 4), ("float32", 1024, 8), ("bfloat16", 1024, 4), ("float16", 1024, 16)]

V49_PUBLISH = ring_module.InputRing.publish


def v48_publish(ring, inputs, wait_for_fetches):
    """The ring's publish as v48 made it."""
    from ecornn.arrays import data_address, is_gpu_array

    def as_buffer_like(src, dst, aligned):
        if is_gpu_array(src) and src.dtype == dst.dtype and src.nbytes == dst.nbytes and src.flags.c_contiguous \
                and not (aligned and data_address(src) % 16):
            return src
        raise AssertionError("the benchmark's inputs are read as they are")

    if ring.done[1]:
        raise AssertionError("ring mismatch")
    if ring.issued - int(ring.done[0]) >= ring.slots:
        wait_for_fetches()
    kept = [as_buffer_like(src, dst, by_ref) for src, dst, by_ref in zip(inputs, ring.buffers, ring.by_reference)]
    ring.last_sources = tuple(data_address(a) for a in kept)
    slot = ring.slot_words[ring.issued % ring.slots]
    slot[1], slot[2], slot[3] = ring.last_sources
    slot[0] = ring.issued
    return kept


MODES = {"v49": {}, "v48 publish": {"publish": v48_publish}}


def set_mode(flags) -> None:
    ring_module.InputRing.publish = flags.get("publish", V49_PUBLISH)


def cell_rounds(dtype, hidden, batch, rounds, repeats) -> dict:
    from ecornn.engines import persistent
    config, weights, x, h0, c0 = _problem(dtype, hidden, batch, seed=hidden + batch)
    prepared = persistent.prepare(config, weights)
    fwd = lambda: persistent.forward(config, x, weights, h0, c0, prepared=prepared)  # noqa: E731
    out = {m: [] for m in MODES}
    try:
        for r in range(rounds + 1):
            for mode in (list(MODES) if r % 2 == 0 else list(reversed(MODES))):
                set_mode(MODES[mode])
                us = _median_ms(fwd, repeats) * 1e3 / STEPS
                if r:
                    out[mode].append(us)
    finally:
        set_mode({})
    return {"dtype": dtype, "hidden": hidden, "batch": batch, "rounds": out, "graphs": len(prepared.graphs)}


def markdown(rows) -> str:
    lines = ["| cell | " + " | ".join(f"{m} µs/step (median; rounds)" for m in MODES) + " |",
             "|---|" + "---|" * len(MODES)]
    for r in rows:
        cells = [f"{np.median(v):.3f} ({', '.join(f'{x:.3f}' for x in v)})" for v in r["rounds"].values()]
        lines.append(f"| {r['dtype']} H={r['hidden']} B={r['batch']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    args, out = bench_args(argv, repeats=40, configure=lambda p: p.add_argument("--rounds", type=int, default=8))
    meta = bench_meta()
    rows = []
    for cell in CELLS:
        rows.append(cell_rounds(*cell, args.rounds, args.repeats))
        save_rows(out, "ab_ring_publish_v49", meta, rows, markdown(rows))
    print(markdown(rows))


if __name__ == "__main__":
    main()
