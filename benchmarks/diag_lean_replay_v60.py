"""v60 diagnostic: how much of a replayed forward's span a minimal host path before the launch would take back.

Per cell, in one process, modes alternated by round (event spans after a device sync, as the benches time a call):
- `forward`: persistent.forward as it is;
- `lean`: a stand-in for the shortest host path that still does a replay's work: the graph found by one dict lookup
  on a key computed once, the caller's stream, the spare output buffer, the ring's claim check, the three input
  addresses checked by attribute reads and written with the output delta and the tag, the launch; then (after the
  launch) the replay's event and the next spare. No lock, no mode tuple, no graph key;
- `v59's path`: persistent.forward with v59's host path (v60's call 7; the mode rebuilt per call, the publish's
  checks by function calls);
- `bare`: the graph replayed on its last inputs (the ring republished).
forward - lean is what a leaner path could save; lean - bare what the replay's own inputs cost.

    python benchmarks/diag_lean_replay_v60.py OUT_DIR [--repeats N] [--rounds R] [--cells float32:1024:8,...]
"""
from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import STEPS, _problem  # noqa: E402
from diag_host_layers_v60 import _span_us, diag_main  # noqa: E402

V59 = "v59's path"


def lean_launcher(cp, persistent, persistent_graph, config, x, h0, c0, prepared):
    """The stand-in's replay of (x, h0, c0) (see the module's text); None where it would not apply."""
    from ecornn.engines import persistent_replay_ring as ring_module
    key = persistent_graph._key(config, persistent._graph_mode("auto"), x, h0, c0)
    graphs = prepared.graphs
    entry = graphs[key]
    ring, moved = entry.ring, entry.moved
    if ring is None or moved is None:
        return None
    out_ptr, layout = moved.outputs.buffer.data.ptr, moved.outputs.layout
    dtypes = tuple(b.dtype for b in ring.buffers)
    sizes = tuple(b.size for b in ring.buffers)
    ndarray, words, done_at = cp.ndarray, ring._words, ring._done_at

    def launch():
        entry = graphs.get(key)
        stream = cp.cuda.get_current_stream()
        spare, moved.spare = moved.spare, None
        buffer = spare[1] if spare is not None and spare[0] == stream.ptr else cp.empty(
            moved.outputs.buffer.shape, moved.outputs.buffer.dtype)
        if words[done_at + 1] or ring.issued - words[done_at] >= ring.slots:
            raise RuntimeError("the stand-in does not wait for fetches")
        sources = []
        for a, dtype, size in zip((x, h0, c0), dtypes, sizes):
            if type(a) is not ndarray or a.dtype != dtype or a.size != size or not a._c_contiguous:
                raise RuntimeError("the stand-in takes device arrays of the captured kind only")
            sources.append(a.data.ptr)
        at = ring_module.SLOT_WORDS * (ring.issued % ring.slots)
        words[at + 1], words[at + 2], words[at + 3] = sources
        words[at + 4] = buffer.data.ptr - out_ptr
        words[at] = ring.issued
        entry.graph.launch(stream=stream)
        ring.issued += 1
        ring.last_sources = tuple(sources)
        persistent_graph._mark_replay(stream)
        moved.make_spare(stream)
        return persistent_graph.buffer_views(buffer, layout)
    return launch


@contextlib.contextmanager
def v59_path(persistent):
    """v59's host path (v60's call 7): the mode tuple built anew per call, the ring's inputs checked by _address_as
    (the attribute-read publish off)."""
    from ecornn.engines.persistent_replay_ring import InputRing
    mode_of, short = persistent._graph_mode, InputRing._addresses_where_they_lie
    persistent._graph_mode = persistent._mode_items
    InputRing._addresses_where_they_lie = lambda self, inputs: None
    try:
        yield
    finally:
        persistent._graph_mode, InputRing._addresses_where_they_lie = mode_of, short


def cell_row(dtype, hidden, batch, repeats, rounds) -> dict:
    import cupy as cp
    from ecornn.engines import persistent, persistent_graph
    config, weights, x, h0, c0 = _problem(dtype, hidden, batch)
    prepared = persistent.prepare(config, weights)
    for _ in range(4):
        persistent.forward(config, x, weights, h0, c0, prepared=prepared)
    lean = lean_launcher(cp, persistent, persistent_graph, config, x, h0, c0, prepared)
    entry = next(reversed(prepared.graphs.values()))
    stream = cp.cuda.get_current_stream()
    modes = {"forward": lambda: persistent.forward(config, x, weights, h0, c0, prepared=prepared),
             V59: lambda: persistent.forward(config, x, weights, h0, c0, prepared=prepared),
             "bare": lambda: entry.launch_bare(stream)}
    if lean is not None:
        modes["lean"] = lean
        want = persistent.forward(config, x, weights, h0, c0, prepared=prepared)[0]
        got = lean()[0]
        same = bool(cp.array_equal(want, got))
    spans = {m: [] for m in modes}
    for _ in range(rounds):
        for m, fn in modes.items():
            with v59_path(persistent) if m == V59 else contextlib.nullcontext():
                spans[m] += [_span_us(cp, fn) for _ in range(repeats)]
    med = {m: float(np.median(v)) for m, v in spans.items()}
    return {"dtype": dtype, "hidden": hidden, "batch": batch, "span_us": med,
            "per_step": {m: v / STEPS for m, v in med.items()}, "lean_bitwise_forward": same if lean else None}


def markdown(rows) -> str:
    lines = ["| cell | forward µs | v59's path | lean | bare | forward - lean | v59's path - forward | lean - bare | "
             "forward µs/step | v59's path µs/step | lean's y bitwise forward's |", "|---" * 11 + "|"]
    for r in rows:
        s, p = r["span_us"], r["per_step"]
        if "lean" not in s:
            lines.append(f"| {r['dtype']} H={r['hidden']} B={r['batch']} | {s['forward']:.1f} | (not in place) |")
            continue
        lines.append(f"| {r['dtype']} H={r['hidden']} B={r['batch']} | {s['forward']:.1f} | {s[V59]:.1f} | "
                     f"{s['lean']:.1f} | {s['bare']:.1f} | {s['forward'] - s['lean']:.1f} | "
                     f"{s[V59] - s['forward']:.1f} | {s['lean'] - s['bare']:.1f} | {p['forward']:.3f} | "
                     f"{p[V59]:.3f} | {r['lean_bitwise_forward']} |")
    return "\n".join(lines)


def main(argv=None):
    diag_main(argv, "diag_lean_replay_v60", cell_row, markdown,
              "float32:1024:8,float32:1024:4,float16:1024:16,bfloat16:1024:4")


if __name__ == "__main__":
    main()
