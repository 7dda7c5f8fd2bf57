"""Training calls of the `persistent` strategy (a forward that saves a reserve, then its backward)
replayed from CUDA graphs.

An eager training call issues ~40 small operations from Python around its two long kernels (casts,
the projection, dX/dW GEMMs, gate deinterleaving, the gradients' casts): ~1.7 ms of host time for
fp16 H=1024 B=8 T=256, more than the GPU needs, so the GPU waits (notes_persistent.md, v9). With
prepared weights, the first backward of a configuration captures a *set*: one forward graph and one
backward graph over buffers of their own (one memory pool): the forward's inputs, the reserve it
writes, the backward's inputs and outputs. Later training forwards replay a free set, and their
backward replays its backward graph; inputs are fetched by the graphs themselves through a replay
ring each (v20, persistent_replay_ring; copied in by a kernel before the launch where
persistent_graph.INPUTS_BY_REFERENCE is off), outputs copied out into new arrays.

A replayed forward leases its set to the reserve it returns (``GraphReserve``, with the set's
generation). The set is free again once that reserve is garbage-collected or its backward has run.
A forward that finds every set busy captures another one (at most MAX_SETS per configuration) or
runs eagerly. A second backward on a reserve whose set a newer forward has since taken raises
``StaleReserve``: the saved activations are gone, and the newer ones are never used in their place.
Dropout between layers draws its masks on the host, so those calls stay eager, as do sets larger
than MAX_SET_BYTES. Captures and replays share persistent_graph's stream and lock.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass

from ..errors import EcornnError
from . import persistent_graph as pg
from .persistent_replay_ring import InputRing

ENABLED = True
MAX_SETS = 2                 # per configuration: a loop keeps the last reserve while the next forward runs
MAX_CONFIGS = 4              # per prepared weights (the oldest configuration's sets are dropped)
MAX_SET_BYTES = 1 << 30      # estimated reserve + activations of one set; larger calls stay eager


class StaleReserve(EcornnError):
    """A graph-replayed reserve whose buffers a newer training forward has taken over."""


@dataclass(eq=False)
class TrainingSet:
    forward_graph: object
    backward_graph: object
    pool: object            # cupy MemoryPool: every buffer of both graphs
    forward_inputs: tuple   # (x, h0, c0), caller's dtypes
    forward_outputs: object  # (y, hT, cT), caller's dtype (persistent_graph.PackedOutputs where they share a buffer)
    reserve: object         # the PersistentReserve the forward graph rewrites
    backward_inputs: tuple  # (dy, dhT, dcT)
    backward_outputs: tuple  # (dx, dh0, dc0, [LayerWeights]), caller's dtype
    forward_ring: object = None   # InputRing of each graph where it fetches its inputs (v20)
    backward_ring: object = None
    generation: int = 0
    holder: object = None   # weakref to the GraphReserve that leases the set
    backward_done: bool = False

    def is_free(self) -> bool:
        return self.holder is None or self.holder() is None or self.backward_done


@dataclass(eq=False)
class GraphReserve:
    """What a replayed training forward returns in place of a PersistentReserve."""
    training_set: TrainingSet
    generation: int


def _key(config, mode, arrays) -> tuple:
    return ("training", config.key(), mode, pg.INPUTS_BY_REFERENCE, pg._cp().cuda.Device().id,
            *(a.dtype.str for a in arrays))


def _set_bytes(config) -> int:
    """Reserve (inputs, outputs, gates, cells per layer) plus the backward's dz, fp32."""
    rows = config.seq_len * config.batch
    per_layer = rows * (config.input_size + config.num_directions * 11 * config.hidden_size)
    return 4 * per_layer * config.num_layers


def wanted(prepared, config, dropout, x) -> bool:
    """Graphs need prepared weights, CuPy arrays and no host-drawn dropout masks."""
    return (ENABLED and pg._wanted(prepared, x) and (dropout == 0 or config.num_layers == 1)
            and _set_bytes(config) <= MAX_SET_BYTES)


def replay_forward(prepared, config, mode, x, h0, c0, runners):
    """``(y, hT, cT, GraphReserve)`` of a replayed training forward, or None (run eagerly).
    ``runners``: (run_forward, run_backward) to capture another set when every set is busy."""
    key = _key(config, mode, (x, h0, c0))
    sets = prepared.training_sets.get(key)
    if not sets:
        return None
    prepared.training_sets.move_to_end(key)
    with pg._LOCK:
        chosen = next((s for s in sets if s.is_free()), None)
        if chosen is None and len(sets) < MAX_SETS:
            chosen = _capture_set(config, mode, x, h0, c0, sets[0].backward_inputs, runners)
            if chosen is not None:
                sets.append(chosen)
        if chosen is None:
            return None
        try:
            outputs = pg.launch_with_copies(chosen.forward_graph, chosen.forward_inputs, (x, h0, c0),
                                            chosen.forward_outputs, ring=chosen.forward_ring)
        except Exception as exc:  # noqa: BLE001 - recorded; this and later calls run eagerly
            pg.capture_errors[key] = f"training replay: {type(exc).__name__}: {exc}"
            del prepared.training_sets[key]
            return None
        chosen.generation += 1
        chosen.backward_done = False
        reserve = GraphReserve(chosen, chosen.generation)
        chosen.holder = weakref.ref(reserve)
    return (*outputs, reserve)


def backward(reserve: GraphReserve, dy, dhT, dcT, run_backward, retain=False):
    """Gradients from a replayed forward's reserve: the backward graph when the inputs match its
    buffers (shape, dtype, C order), else ``run_backward`` eagerly on the set's reserve. The set is
    free for the next forward afterwards, unless ``retain``: then only once the reserve is gone (a
    framework that frees its saved activations itself, and may run a second backward before)."""
    chosen = reserve.training_set
    inputs = (dy, dhT, dcT)
    with pg._LOCK:   # the set stays this reserve's until the gradients are issued
        if reserve.generation != chosen.generation:
            raise StaleReserve("this training forward's saved activations were overwritten by a later "
                               "forward (a graph-replayed reserve keeps them until its backward has run "
                               "and another forward needs the buffers); run the backward once per forward")
        out = None
        if all(_same_layout(a, b) for a, b in zip(inputs, chosen.backward_inputs)):
            d_x, dh0, dc0, grads = chosen.backward_outputs
            flat = (d_x, dh0, dc0, *(a for g in grads for a in g))
            try:
                out = pg.launch_with_copies(chosen.backward_graph, chosen.backward_inputs, inputs, flat,
                                            ring=chosen.backward_ring)
            except Exception as exc:  # noqa: BLE001 - recorded; the reserve is intact: eager below
                pg.capture_errors[("training backward", id(chosen))] = f"{type(exc).__name__}: {exc}"
        if out is None:
            result = run_backward(chosen.reserve, dy, dhT, dcT)
        else:
            grads = [type(g)(*out[3 + 4 * i:7 + 4 * i]) for i, g in enumerate(chosen.backward_outputs[3])]
            result = (*out[:3], grads)
        chosen.backward_done = not retain
    return result


def _same_layout(a, buffer) -> bool:
    return a.shape == buffer.shape and a.dtype == buffer.dtype and a.flags.c_contiguous


def like(arrays) -> tuple:
    """(shape, dtype) stand-ins for ``arrays``: what a later capture needs of them."""
    return tuple(_Like(tuple(a.shape), a.dtype) for a in arrays)


@dataclass(frozen=True)
class _Like:
    shape: tuple
    dtype: object


def capture_first(prepared, config, mode, forward_like, runners, *, backward_inputs) -> None:
    """Capture the first set of a configuration (after an eager forward and backward: modules are
    compiled, cuBLAS is warm). Nothing runs now; a failure leaves the configuration eager."""
    key = _key(config, mode, forward_like)
    if key in prepared.training_sets or key in pg.capture_errors:
        return
    with pg._LOCK:
        made = _capture_set(config, mode, *forward_like, backward_inputs, runners)
    if made is not None:
        prepared.training_sets[key] = [made]
        while len(prepared.training_sets) > MAX_CONFIGS:   # a leased set lives on in its reserve
            prepared.training_sets.popitem(last=False)


def _capture_set(config, mode, x, h0, c0, backward_like, runners):
    """A new TrainingSet (None, with the reason in capture_errors, where capture fails); under _LOCK."""
    cp, stream = pg._cp(), pg._graph_stream()
    run_forward, run_backward = runners
    pool = cp.cuda.MemoryPool()
    pg._warm_blas(stream)
    try:
        with cp.cuda.using_allocator(pool.malloc):
            forward_inputs = tuple(cp.empty(a.shape, a.dtype) for a in (x, h0, c0))
            backward_inputs = tuple(cp.empty(a.shape, a.dtype) for a in backward_like)
            rings = [InputRing(b) if pg.use_input_ring() else None
                     for b in (forward_inputs, backward_inputs)]
            forward_graph, (y, hT, cT, saved) = pg.captured(stream, run_forward, *forward_inputs, ring=rings[0])
            backward_graph, grads = pg.captured(stream, run_backward, saved, *backward_inputs, ring=rings[1])
    except Exception as exc:  # noqa: BLE001 - recorded; the configuration stays eager
        pg.capture_errors[_key(config, mode, (x, h0, c0))] = f"training: {type(exc).__name__}: {exc}"
        return None
    return TrainingSet(forward_graph, backward_graph, pool, forward_inputs, pg.pack_outputs((y, hT, cT)), saved,
                       backward_inputs, grads, *rings)
