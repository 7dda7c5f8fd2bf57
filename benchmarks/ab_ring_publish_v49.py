"""v49 benchmark: the replay ring's publish (InputRing.publish, before each replayed launch and so on the benches'
span) as v48 had it and as v49 has it, alternated in one process on one prepared forward per cell: the whole forward
(graph replay, synchronised calls as bench_persistent) µs/step per round, after a warm-up round not kept.

v48's publish is restated here (its attribute reads: NumPy scalar reads of the host words, CuPy's ``flags`` object,
``data_address``'s NumPy probe, a slot view per write) and patched onto the ring for its rounds.

    python benchmarks/ab_ring_publish_v49.py OUT_DIR [--rounds N] [--repeats N]
Writes OUT_DIR/ab_ring_publish_v49.md and .json.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import STEPS, _median_ms, _problem, bench_args, bench_meta, save_rows  # noqa: E402

CELLS = [("float32", 1024, 4), ("float32", 1024, 8), ("bfloat16", 1024, 4)]


def v48_publish(ring):
    """The ring's publish as v48 made it, bound to ``ring``."""
    from ecornn.arrays import data_address, is_gpu_array

    def as_buffer_like(src, dst, aligned):
        if is_gpu_array(src) and src.dtype == dst.dtype and src.nbytes == dst.nbytes and src.flags.c_contiguous \
                and not (aligned and data_address(src) % 16):
            return src
        raise AssertionError("the benchmark's inputs are read as they are")

    def publish(inputs, wait_for_fetches):
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
    return publish


def cell_rounds(dtype, hidden, batch, rounds, repeats) -> dict:
    from ecornn.engines import persistent
    config, weights, x, h0, c0 = _problem(dtype, hidden, batch, seed=hidden + batch)
    prepared = persistent.prepare(config, weights)
    fwd = lambda: persistent.forward(config, x, weights, h0, c0, prepared=prepared)  # noqa: E731
    fwd()
    ring = next(iter(prepared.graphs.values())).ring
    modes = {"v49": lambda: ring.__dict__.pop("publish", None), "v48 publish": lambda: setattr(ring, "publish",
                                                                                               v48_publish(ring))}
    out = {m: [] for m in modes}
    for r in range(rounds + 1):
        for mode in (list(modes) if r % 2 == 0 else list(reversed(modes))):
            modes[mode]()
            us = _median_ms(fwd, repeats) * 1e3 / STEPS
            if r:
                out[mode].append(us)
    ring.__dict__.pop("publish", None)
    return {"dtype": dtype, "hidden": hidden, "batch": batch, "rounds": out}


def markdown(rows) -> str:
    lines = ["| cell | v49 µs/step (median; rounds) | v48 publish | difference |", "|---|---|---|---|"]
    for r in rows:
        new, old = r["rounds"]["v49"], r["rounds"]["v48 publish"]
        lines.append(f"| {r['dtype']} H={r['hidden']} B={r['batch']} | {np.median(new):.3f} "
                     f"({', '.join(f'{v:.3f}' for v in new)}) | {np.median(old):.3f} "
                     f"({', '.join(f'{v:.3f}' for v in old)}) | {np.median(new) - np.median(old):+.3f} |")
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
