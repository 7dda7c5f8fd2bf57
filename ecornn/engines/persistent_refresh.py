"""Refreshing prepared `persistent` weights (persistent.refresh) replayed from a CUDA graph.

An eager refresh issues ~40 CuPy operations (interleave, sum the biases, pack the tiles of every
cached plan, the 16-bit and 3xTF32 copies): ~1.2 ms of host time per optimizer step while the GPU
waits (notes_persistent.md, v9.2). Here a refresh whose source arrays were seen at the same device
addresses by the refresh before is captured once and replayed: one graph launch reads the raw
weights where they are (a framework's parameters, which optimizers update in place, are read with
no copy) and rewrites the prepared arrays in place, so every captured forward/training graph keeps
replaying the new values.

A graph is keyed by the sources' addresses, shapes, dtypes and strides and by the derivatives the
prepared weights cache at capture time (tile plans, biases, 3xTF32 splits, 16-bit W_ih): a graph
captured before a backward plan's tiles existed would leave those stale, so a new derivative means a
new graph. Sources at new addresses each call (host arrays copied to the GPU per call) never see
the same key twice in a row and stay eager. Replays run on persistent_graph's stream under its
lock, after the caller's earlier work and before its later work (as the eager refresh is ordered).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..arrays import data_address, is_gpu_array
from . import persistent_graph as pg

ENABLED = True
MAX_GRAPHS = 2    # per prepared weights (the oldest is dropped)


@dataclass
class RefreshGraph:
    graph: object
    pool: object   # cupy MemoryPool of everything the captured refresh allocated


def derivatives(prepared) -> tuple:
    """What a refresh of ``prepared`` rewrites besides the fp32 copies (part of a graph's key)."""
    return (tuple(prepared.tiles), tuple((s.w_ih_parts is not None, tuple(sorted(s.w_ih_split3)),
                                          s.w_ih_16bit is not None, s.w_ih_split16 is not None,
                                          tuple(sorted(s.w_ih_split3_chunked)), tuple(sorted(s.w_ih_split16_chunked)))
                                         for s in prepared.slots))


def _key(prepared, weights) -> tuple:
    sources = tuple((_address(a), a.shape, a.dtype.str, a.strides) for w in weights for a in w)
    return (sources, derivatives(prepared), pg._cp().cuda.Device().id)


_address = data_address   # (the CPU tests swap it)


def _wanted(prepared, weights) -> bool:
    return ENABLED and pg.ENABLED and all(is_gpu_array(a) for w in weights for a in w)


def refresh(prepared, config, weights, run_eager) -> bool:
    """Replay (capturing first if needed) the refresh of ``prepared`` from ``weights``; False when
    this call must run ``run_eager(prepared, config, weights)`` itself (first sighting of these
    sources, graphs off, capture failed)."""
    if not _wanted(prepared, weights):
        return False
    key = _key(prepared, weights)
    graphs = prepared.refresh_graphs
    if key not in graphs:
        seen_before, prepared.last_refresh_key = prepared.last_refresh_key == key, key
        if not seen_before or key in pg.capture_errors:
            return False
        made = _capture(prepared, config, weights, run_eager, key)
        if made is None:
            return False
        if len(graphs) >= MAX_GRAPHS:
            graphs.popitem(last=False)
        graphs[key] = made
    graphs.move_to_end(key)
    with pg._LOCK:   # ordered after the caller's earlier work (sources written), before its later work
        pg.launch_with_copies(graphs[key].graph, (), (), ())
    return True


def _capture(prepared, config, weights, run_eager, key):
    """A RefreshGraph of ``run_eager`` (None, with the reason in capture_errors, where it fails)."""
    cp, stream = pg._cp(), pg._graph_stream()
    pool = cp.cuda.MemoryPool()
    with pg._LOCK:
        try:
            with cp.cuda.using_allocator(pool.malloc):
                graph, _ = pg.captured(stream, run_eager, prepared, config, weights)
        except Exception as exc:  # noqa: BLE001 - recorded; refreshes of these sources stay eager
            pg.capture_errors[key] = f"refresh: {type(exc).__name__}: {exc}"
            return None
    return RefreshGraph(graph, pool)
