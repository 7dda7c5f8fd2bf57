"""GPU strategy `fused`: per-step cuBLAS GEMM + one fused pointwise kernel, on CuPy.

EcoRNN / cuDNN-5 style. Per (layer, direction): the input projection of a chunk of timesteps is one
GEMM on a side stream; each step is one GEMM (W_hh h_{t-1} accumulated onto the projection) and
one pointwise kernel; layers and directions run on their own streams as a wavefront (events carry
the dependencies); the whole schedule is captured once in a CUDA graph and replayed. Backward runs
the dh/dc recurrence (pointwise-backward + dh GEMM per step), then dW_ih, dW_hh, bias and dX as
large GEMMs over all T*B rows, the weight gradients overlapped with the layer below.

fp16/bf16 (v3, ``FusedOptions.epilogue``): where fused_mma's size rule says so, each step is ONE
tensor-core kernel instead (kernels/fused_step_mma.cu: the recurrent product with the pointwise
math in its epilogue, forward and backward), W_hh packed once into mma fragment order.

Every optimisation is a flag of ``FusedOptions`` (``with fused.using(graph=False): ...``) so the
benchmark can measure what each one buys. Buffers are sized up front (``fused_sizes``), owned by a
cached plan, and nothing is allocated inside the time loop. Work is ordered after, and before, the
caller's current CuPy stream.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from ..errors import ConfigError, NotSupported
from ..layouts import gate_deinterleave, gate_interleave
from ..weights import LayerWeights
from . import fused_mma
from .fused_schedule import issue_backward, issue_forward, launch_rows
from .fused_sizes import backward_buffers, forward_buffers, reserve_bytes, workspace_bytes  # noqa: F401

name = "fused"
device = "gpu"

_STORAGE_CODE = {"float32": 0, "float16": 1, "bfloat16": 2}
_MAX_IDLE_PLANS = 4


@dataclass(frozen=True)
class FusedOptions:
    """Switches for the ablation; the defaults are the fast configuration."""

    graph: bool = True          # capture the schedule in a CUDA graph, replay it on later calls
    second_stream: bool = True  # input projections in chunks on their own stream (else one GEMM first)
    wavefront: bool = True      # each (layer, direction) on its own stream
    interleave: bool = True     # gate-interleaved weights and gate rows (else gate-blocked)
    chunk: int = 32             # timesteps per input-projection GEMM
    tf32: bool = False          # fp32 GEMMs in TF32 (not strict; off by default)
    poison: bool = False        # NaN-fill every internal buffer before a run (tests)
    epilogue: bool = True       # fp16/bf16: one tensor-core kernel per step (GEMM + pointwise
                                # epilogue, fused_step_mma.cu) where fused_mma's size rule says so


_options = [FusedOptions()]


def options() -> FusedOptions:
    return _options[-1]


@contextlib.contextmanager
def using(**changes):
    """Run the enclosed calls with some FusedOptions changed."""
    _options.append(dataclasses.replace(_options[-1], **changes))
    try:
        yield _options[-1]
    finally:
        _options.pop()


def check(config) -> None:
    if config.dtype not in _STORAGE_CODE:
        raise NotSupported(name, f"dtype {config.dtype}: fused runs float32, float16 and bfloat16")
    if config.batch > 65535:
        raise NotSupported(name, f"batch {config.batch} > 65535 (one grid row per sample)")


# ---- arrays ---------------------------------------------------------------------------------

def _cupy():
    import cupy
    return cupy


@functools.lru_cache(maxsize=None)
def bf16_array_dtype():
    """The CuPy dtype for bfloat16 arrays if CuPy accepts ml_dtypes.bfloat16, else None."""
    try:
        import ml_dtypes
        _cupy().empty(1, dtype=ml_dtypes.bfloat16)
        return np.dtype(ml_dtypes.bfloat16)
    except Exception:
        return None


def storage_dtype(dtype: str):
    """Element type of internal storage buffers (bf16 as raw 16-bit words)."""
    return {"float32": np.float32, "float16": np.float16, "bfloat16": np.uint16}[dtype]


def output_array(shape, dtype: str):
    """A new CuPy array of the API dtype (raw uint16 words for bf16 if CuPy lacks bfloat16)."""
    array_dtype = bf16_array_dtype() if dtype == "bfloat16" else None
    return _cupy().empty(shape, dtype=array_dtype or storage_dtype(dtype))


def raw(a):
    """``a`` as a contiguous CuPy array of its storage type (bf16 viewed as uint16)."""
    cupy = _cupy()
    a = cupy.ascontiguousarray(a)
    return a.view(np.uint16) if str(a.dtype) == "bfloat16" else a


def _to_f32(a, dtype: str):
    a = raw(a)
    if dtype == "bfloat16":
        return (a.astype(np.uint32) << 16).view(np.float32)
    return a.astype(np.float32)


def _poison(a) -> None:
    a.fill(0x7FC0 if a.dtype == np.uint16 else np.nan)


# ---- kernels --------------------------------------------------------------------------------

class Kernels:
    NAMES = ("lstm_forward_step", "lstm_backward_step", "storage_to_f32", "f32_to_storage",
             "mask_storage", "mask_f32")

    def __init__(self, dtype: str, interleaved: bool):
        from ..gpu import compile_module
        module = compile_module("fused_pointwise.cu", {"STORAGE": _STORAGE_CODE[dtype],
                                                       "INTERLEAVED": int(interleaved)})
        for kernel in self.NAMES:
            setattr(self, kernel, module.get_function(kernel))


@functools.lru_cache(maxsize=None)
def kernels(dtype: str, interleaved: bool, device_id: int) -> Kernels:
    return Kernels(dtype, interleaved)


class MmaKernels:
    """fused_step_fwd / fused_step_bwd of kernels/fused_step_mma.cu compiled for one tile."""

    def __init__(self, dtype: str, tile):
        from ..gpu import compile_module
        module = compile_module("fused_step_mma.cu", tile.defines(dtype))
        for kernel in ("fused_step_fwd", "fused_step_bwd"):
            function = module.get_function(kernel)
            if tile.smem_bytes() > 48 * 1024:  # beyond the default dynamic shared-memory limit
                function.max_dynamic_shared_size_bytes = tile.smem_bytes()
            setattr(self, kernel, function)


@functools.lru_cache(maxsize=None)
def mma_kernels(dtype: str, tile, device_id: int) -> MmaKernels:
    return MmaKernels(dtype, tile)


def device_limits() -> tuple:
    """(SM count, opt-in shared memory per block) of the current device; defaults without one."""
    try:
        from ..gpu import device_properties
        props = device_properties()
        return props["sm_count"], props["smem_per_block_optin"]
    except Exception:
        return fused_mma.DEFAULT_SM_COUNT, fused_mma.DEFAULT_SMEM_PER_BLOCK


def mma_tiles(config, opts) -> tuple:
    """(forward tile, backward tile, why): tiles None when the step stays cuBLAS + pointwise."""
    use, why = fused_mma.mma_decision(config, opts)
    if not use:
        return None, None, why
    sm_count, smem = device_limits()
    b, h = config.batch, config.hidden_size
    fwd = fused_mma.choose_tile(b, h, False, sm_count, smem)
    bwd = fused_mma.choose_tile(b, h, True, sm_count, smem)
    return fwd, bwd, f"{why}; {fwd.describe()}, {bwd.describe()}"


# ---- weights --------------------------------------------------------------------------------

@dataclass
class FusedWeights:
    """Weights in the kernels' layout: per slot (w_ih [4H,K], w_hh [4H,H] storage, bias [4H] fp32)."""

    slots: list
    interleaved: bool
    dtype: str
    packed: dict = field(default_factory=dict)  # (slot, Tile.pack_key) -> W_hh in fragment order


def packed_weights(fw: FusedWeights, index: int, tile):
    """Slot ``index``'s W_hh packed for ``tile`` (packed on first use, then cached with fw)."""
    key = (index, tile.pack_key)
    if key not in fw.packed:
        fw.packed[key] = fused_mma.pack_weights(fw.slots[index][1], tile)
    return fw.packed[key]


def _ensure_packed(fw: FusedWeights, tiles, refresh: bool = False) -> None:
    """Pack every slot for ``tiles`` on the caller's stream (before the plan's streams wait on it);
    ``refresh`` rewrites existing packs in place (per-call converted weights: graphs keep pointers)."""
    for tile in (t for t in tiles if t is not None):
        for index in range(len(fw.slots)):
            if refresh and (index, tile.pack_key) in fw.packed:
                fw.packed[(index, tile.pack_key)][...] = fused_mma.pack_weights(fw.slots[index][1], tile)
            else:
                packed_weights(fw, index, tile)


def _engine_layout(a, hidden: int, interleaved: bool):
    return gate_interleave(a, hidden) if interleaved else a


def _convert_slot(w: LayerWeights, hidden: int, dtype: str, interleaved: bool, out=None):
    """One slot's weights in engine layout; written into ``out`` (w_ih, w_hh, bias) when given."""
    cupy = _cupy()
    w = LayerWeights(*w)
    w_ih = _engine_layout(raw(w.w_ih), hidden, interleaved)
    w_hh = _engine_layout(raw(w.w_hh), hidden, interleaved)
    bias = _engine_layout(_to_f32(w.b_ih, dtype) + _to_f32(w.b_hh, dtype), hidden, interleaved)
    if out is None:
        return tuple(cupy.ascontiguousarray(a) for a in (w_ih, w_hh, bias))
    for dst, src in zip(out, (w_ih, w_hh, bias)):
        dst[...] = src
    return out


def prepare(config, weights) -> FusedWeights:
    """Convert framework-layout weights once (gate-interleave, bias sum); reuse across calls."""
    check(config)
    interleaved = options().interleave
    slots = [_convert_slot(w, config.hidden_size, config.dtype, interleaved) for w in weights]
    fw = FusedWeights(slots, interleaved, config.dtype)
    fwd, bwd, _ = mma_tiles(config, options())
    _ensure_packed(fw, (fwd, bwd))  # once, with the weights (the mma step reads them every step)
    return fw


# ---- plans: buffers, streams, events, graphs --------------------------------------------------

class Plan:
    """Everything one (config, mode, options) needs, allocated once and reused call after call."""

    def __init__(self, config, training: bool, dropout: bool, opts: FusedOptions):
        cupy = _cupy()
        self.config, self.training, self.dropout, self.options = config, training, dropout, opts
        self.kernels = kernels(config.dtype, opts.interleave, cupy.cuda.Device().id)
        self.mma_fwd, self.mma_bwd, self.step_kernel = mma_tiles(config, opts)
        if self.mma_fwd is not None:
            self.mma = {t: mma_kernels(config.dtype, t, cupy.cuda.Device().id)
                        for t in (self.mma_fwd, self.mma_bwd)}
        self.storage = storage_dtype(config.dtype)
        self.buf = self._allocate(forward_buffers(config, training, dropout, own_weights=True))
        self.main = shared_stream("main")
        self._events = {}
        self.graphs, self.graph_weights = {}, {}
        self.own_weights = None
        self.busy, self.lease = False, None

    def _allocate(self, specs) -> dict:
        cupy = _cupy()
        return {s.name: cupy.empty(s.shape, dtype=self.storage if s.kind == "storage" else np.float32)
                for s in specs}

    def ensure_backward_buffers(self) -> None:
        if "g_a" not in self.buf:
            self.buf.update(self._allocate(backward_buffers(self.config)))
            one = {"float32": 1.0, "float16": 1.0, "bfloat16": 0x3F80}[self.config.dtype]
            self.buf["ones"].fill(one)

    def stream(self, key):
        return shared_stream(key)

    def event(self, key):
        if key not in self._events:
            self._events[key] = _cupy().cuda.Event(disable_timing=True)
        return self._events[key]

    def ptr(self, name: str, offset: int = 0) -> int:
        a = self.buf[name]
        return a.data.ptr + offset * a.itemsize

    def engine_weights(self, weights) -> FusedWeights:
        """Per-call conversion into this plan's own weight buffers (the unprepared path)."""
        cfg = self.config
        if self.own_weights is None:
            slots = []
            for layer in range(cfg.num_layers):
                for d in range(cfg.num_directions):
                    s = f"{layer}_{d}"
                    slots.append(tuple(self.buf[f"{n}{s}"] for n in ("w_ih", "w_hh", "bias")))
            self.own_weights = FusedWeights(slots, self.options.interleave, cfg.dtype)
        for w, out in zip(weights, self.own_weights.slots):
            _convert_slot(w, cfg.hidden_size, cfg.dtype, self.options.interleave, out)
        tiles = (self.mma_fwd, self.mma_bwd if self.training else None)
        _ensure_packed(self.own_weights, tiles, refresh=True)
        return self.own_weights

    def run(self, which: str, weights: FusedWeights, caller) -> None:
        """Issue ``which`` ("forward"/"backward") ordered after and before the caller's stream."""
        self.main.wait_event(caller.record(self.event("caller_in")))
        issue = issue_forward if which == "forward" else issue_backward
        graph = self.graphs.get(which)
        if not self.options.graph:
            issue(self, weights)
        elif graph is not None and self.graph_weights.get(which) is weights:
            graph.launch(stream=self.main)
        else:  # first call: run eagerly (warms cuBLAS and modules), then capture for the next
            issue(self, weights)
            self.main.begin_capture()
            try:
                issue(self, weights)
            finally:
                self.graphs[which] = self.main.end_capture()
            self.graph_weights[which] = weights
        caller.wait_event(self.main.record(self.event("caller_out")))

    def poison(self, names) -> None:
        with _cupy().cuda.get_current_stream():
            for n in names:
                _poison(self.buf[n])


_plans: "OrderedDict[tuple, list]" = OrderedDict()
last_step_kernel = None  # what the last forward's steps ran (Plan.step_kernel): tests, benchmark
_streams: dict = {}


def shared_stream(key):
    """One non-blocking stream per (device, role), shared by all plans: bounds the number of
    streams and of cuBLAS handles (each holds a workspace), whatever the number of plans."""
    cupy = _cupy()
    full = (cupy.cuda.Device().id, key)
    if full not in _streams:
        _streams[full] = cupy.cuda.Stream(non_blocking=True)
    return _streams[full]


def _plan_key(config, training, dropout, opts):
    cupy = _cupy()
    return (config.replace(layout="TNC").key(), training, dropout, opts.graph, opts.second_stream,
            opts.wavefront, opts.interleave, opts.chunk, opts.tf32, opts.epilogue, cupy.cuda.Device().id)


def acquire_plan(config, training: bool, dropout: bool) -> Plan:
    opts = options()
    key = _plan_key(config, training, dropout, opts)
    pool = _plans.setdefault(key, [])
    _plans.move_to_end(key)
    plan = next((p for p in pool if not p.busy), None)
    if plan is None:
        _evict_idle()
        plan = Plan(config, training, dropout, opts)
        pool.append(plan)
    plan.busy, plan.lease = True, object()
    return plan


def release_plan(plan: Plan, lease=None) -> None:
    """Free ``plan`` for the next call, unless it was released and leased again since ``lease``."""
    if lease is None or plan.lease is lease:
        plan.busy = False


def _drain_streams() -> None:
    """Wait for the shared streams: a dropped plan's memory returns to CuPy's pool, which may hand
    it out on another stream at once, so nothing may still be using it."""
    for stream in _streams.values():
        stream.synchronize()


def _evict_idle() -> None:
    idle = [(k, p) for k, pool in _plans.items() for p in pool if not p.busy]
    evict = idle[:max(0, len(idle) - _MAX_IDLE_PLANS + 1)]
    if evict:
        _drain_streams()
    for key, plan in evict:
        _plans[key].remove(plan)


def clear_cache() -> None:
    """Drop every idle plan (buffers, graphs); the benchmark calls it between configs."""
    _drain_streams()
    for key in list(_plans):
        _plans[key] = [p for p in _plans[key] if p.busy]
        if not _plans[key]:
            del _plans[key]


# ---- forward / backward ---------------------------------------------------------------------

@dataclass
class FusedReserve:
    """Training state: the plan (its buffers hold gates, cells, outputs) until backward runs."""

    plan: Plan
    weights: FusedWeights
    lease: object
    consumed: bool = False


def _dropout_masks(config, dropout: float, rng) -> list:
    """Host masks drawn exactly as the reference draws them (same rng calls, same order)."""
    shape = (config.seq_len, config.batch, config.num_directions * config.hidden_size)
    keep = np.float32(1.0 / (1.0 - dropout))
    return [((rng.random(shape) >= dropout) * keep).astype(np.float32)
            for _ in range(config.num_layers - 1)]


def _copy_in(plan: Plan, name: str, a, stream) -> None:
    src = raw(a)
    dst = plan.buf[name]
    if src.nbytes != dst.nbytes:
        raise ConfigError(f"{name}: expected {dst.nbytes} bytes, got {src.nbytes}")
    _cupy().cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, dst.nbytes, 3, stream.ptr)


def _copy_out(plan: Plan, name: str, shape, dtype: str, row_slice=None):
    out = output_array(shape, dtype)
    src = plan.buf[name]
    raw(out)[...] = src if row_slice is None else src[row_slice]
    return out


def forward(config, x, weights, h0, c0, *, training=False, dropout=0.0, rng=None, prepared=None):
    """(y [T,B,D*H], hT, cT, reserve or None); arrays are CuPy, time-major, dtype config.dtype."""
    check(config)
    cupy = _cupy()
    use_dropout = bool(training and dropout > 0 and config.num_layers > 1)
    plan = acquire_plan(config, training, use_dropout)
    try:
        caller = cupy.cuda.get_current_stream()
        if prepared is not None and prepared.interleaved != plan.options.interleave:
            prepared = None  # prepared under other options: convert per call instead
        fw = prepared if prepared is not None else plan.engine_weights(weights)
        _ensure_packed(fw, (plan.mma_fwd, plan.mma_bwd if training else None))
        global last_step_kernel
        last_step_kernel = plan.step_kernel
        if plan.options.poison:
            plan.poison([n for n in plan.buf if n[0] in "yzcdgh" and n not in ("h0", "c0")])
        for name_, array in (("x", x), ("h0", h0), ("c0", c0)):
            _copy_in(plan, name_, array, caller)
        if use_dropout:
            for layer, mask in enumerate(_dropout_masks(config, dropout, rng or np.random.default_rng())):
                plan.buf[f"mask{layer}"].set(mask, stream=caller)
        plan.run("forward", fw, caller)
        last = f"y{config.num_layers - 1}"
        y = _copy_out(plan, last, plan.buf[last].shape, config.dtype)
        h_t = _copy_out(plan, "hT", config.state_shape, config.dtype)
        c_t = _copy_out(plan, "cT", config.state_shape, config.dtype)
    except BaseException:
        release_plan(plan)
        raise
    if not training:
        release_plan(plan)
        return y, h_t, c_t, None
    reserve = FusedReserve(plan, fw, plan.lease)
    weakref.finalize(reserve, release_plan, plan, plan.lease)  # a reserve dropped unused
    return y, h_t, c_t, reserve


def backward(reserve: FusedReserve, dy, dhT, dcT, retain=False):   # retain: the reserve always lives on
    """(dx, dh0, dc0, [LayerWeights grads in framework layout]) from a training forward's reserve."""
    if not isinstance(reserve, FusedReserve) or reserve.consumed:
        raise ConfigError("reserve: expected the unused reserve of a training-mode fused forward, "
                          f"got {'a consumed reserve' if getattr(reserve, 'consumed', False) else type(reserve).__name__}")
    cupy = _cupy()
    plan, cfg = reserve.plan, reserve.plan.config
    plan.ensure_backward_buffers()
    caller = cupy.cuda.get_current_stream()
    if plan.options.poison:
        plan.poison([n for n, _ in ((s.name, s) for s in backward_buffers(cfg)) if n != "ones"])
    k = plan.kernels
    t, b, width = cfg.seq_len, cfg.batch, cfg.num_directions * cfg.hidden_size
    for src, dst, rows, cols in ((dy, "g_a", t * b, width), (dhT, "dh_rec", -1, cfg.hidden_size),
                                 (dcT, "dc", -1, cfg.hidden_size)):
        rows = rows if rows > 0 else cfg.num_layers * cfg.num_directions * b
        src = raw(src)
        launch_rows(k.storage_to_f32, caller, rows, cols,
                    (src, np.int32(cols), plan.buf[dst], np.int32(cols), np.int32(rows), np.int32(cols)))
    plan.run("backward", reserve.weights, caller)
    reserve.consumed = True
    grads = _export_grads(plan, cfg, caller)
    dx = _copy_out(plan, "dx", plan.buf["dx"].shape, cfg.dtype)
    dh0 = _copy_out(plan, "dh0", cfg.state_shape, cfg.dtype)
    dc0 = _copy_out(plan, "dc0", cfg.state_shape, cfg.dtype)
    release_plan(plan, reserve.lease)
    return dx, dh0, dc0, grads


def _export_grads(plan: Plan, cfg, stream) -> list:
    """fp32 engine-layout gradients -> framework layout in the config dtype."""
    hidden, grads = cfg.hidden_size, []
    for layer in range(cfg.num_layers):
        for d in range(cfg.num_directions):
            s = f"{layer}_{d}"
            arrays = []
            for field in ("dw_ih", "dw_hh", "db"):
                a = plan.buf[f"{field}{s}"]
                if plan.options.interleave:
                    a = gate_deinterleave(a, hidden)
                arrays.append(_export(_cupy().ascontiguousarray(a), cfg.dtype, plan, stream))
            grads.append(LayerWeights(arrays[0], arrays[1], arrays[2], arrays[2].copy()))
    return grads


def _export(a32, dtype: str, plan: Plan, stream):
    out = output_array(a32.shape, dtype)
    if dtype == "float32":
        out[...] = a32
        return out
    cols = a32.shape[-1]
    rows = a32.size // cols
    launch_rows(plan.kernels.f32_to_storage, stream, rows, cols,
                (a32, np.int32(cols), raw(out), np.int32(cols), np.int32(rows), np.int32(cols)))
    return out


__all__ = ["name", "device", "check", "prepare", "forward", "backward", "FusedOptions", "options",
           "using", "workspace_bytes", "reserve_bytes", "clear_cache"]
