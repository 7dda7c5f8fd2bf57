"""PyTorch adapter: ``ecornn.torch.LSTM``, a drop-in for ``torch.nn.LSTM``.

The module keeps torch.nn.LSTM's parameters (same names, shapes, order and initialisation), so
state dicts load both ways. Its forward hands the tensors to ``ecornn.lstm_forward`` without
copies: CUDA tensors cross to CuPy through DLPack and the engine runs on PyTorch's current stream;
CPU tensors become NumPy views and run on the reference engine. Backward is an
``autograd.Function`` that calls ``ecornn.lstm_backward`` with the forward's reserve.

Not supported (NotSupported): ``bias=False``, ``proj_size > 0``, PackedSequence input, and running
inside CUDA graph capture. Under ``torch.compile`` the layer runs eagerly (dynamo graph-breaks
around it). bfloat16 on CPU needs ml_dtypes (NumPy has no bfloat16 of its own).
"""
from __future__ import annotations

import contextlib
import math
import warnings
from dataclasses import dataclass

try:
    import torch  # absolute import: the real PyTorch, not this module
    from torch import nn
    from torch.autograd.function import once_differentiable
except ImportError as exc:  # ecornn itself works without torch; only this adapter needs it
    raise ImportError("ecornn.torch needs PyTorch (pip install torch); the rest of ecornn "
                      "works without it") from exc

from .api import lstm_backward, lstm_forward, make_config, prepare_weights, refresh_weights
from .engines import STRATEGIES, get_engine
from .errors import NotSupported, expect
from .planner import plan
from .weights import LayerWeights

__all__ = ["LSTM"]

_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_PARAM_KINDS = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
# What a DLPack exchange raises for a dtype one side cannot export or import.
_DLPACK_ERRORS = (TypeError, ValueError, RuntimeError, NotImplementedError, BufferError)


# ---- tensor <-> array, zero-copy ------------------------------------------------------------

def _bfloat16_numpy():
    try:
        import ml_dtypes
    except ImportError as exc:
        raise NotSupported("auto", "bfloat16 tensors need ml_dtypes (pip install ml_dtypes): "
                                   "NumPy has no bfloat16") from exc
    return ml_dtypes.bfloat16


def _cupy():
    try:
        import cupy
    except ImportError as exc:
        raise NotSupported("auto", "CUDA tensors need CuPy to reach ecornn's GPU engines (pip "
                                   "install 'ecornn[gpu]')") from exc
    return cupy


def to_array(t):
    """A NumPy (CPU) or CuPy (CUDA) view of tensor ``t`` sharing its memory; None stays None.
    CUDA views carry no stream handshake: use them on torch's current stream (``torch_stream``)."""
    if t is None:
        return None
    t = t.detach()
    if t.is_cuda:
        return _cuda_to_cupy(t.contiguous())
    if t.dtype == torch.bfloat16:  # same bits, reinterpreted as ml_dtypes.bfloat16
        return t.view(torch.int16).numpy().view(_bfloat16_numpy())
    return t.numpy()


_VIEW_DTYPES = {torch.float32: "float32", torch.float16: "float16", torch.float64: "float64",
                torch.bfloat16: "int16"}   # bfloat16: the bits, reinterpreted below


def _cuda_to_cupy(t):
    """A CuPy view of contiguous CUDA tensor ``t`` made from its pointer. DLPack's exchange costs
    ~100 µs of host time per array (stream queries and an event handshake; notes_persistent.md,
    v10), and the adapter runs CuPy on torch's stream anyway."""
    cupy = _cupy()
    if t.dtype not in _VIEW_DTYPES or t.numel() == 0:
        return _cuda_to_cupy_dlpack(t)
    size = t.element_size()
    memory = cupy.cuda.UnownedMemory(t.data_ptr(), t.numel() * size, t, t.device.index)
    a = cupy.ndarray(tuple(t.shape), _VIEW_DTYPES[t.dtype], cupy.cuda.MemoryPointer(memory, 0),
                     strides=tuple(s * size for s in t.stride()))
    return a.view(_bfloat16_numpy()) if t.dtype == torch.bfloat16 else a


def _cuda_to_cupy_dlpack(t):
    cupy = _cupy()
    try:
        return cupy.from_dlpack(t)
    except _DLPACK_ERRORS:
        if t.dtype != torch.bfloat16:
            raise
    # CuPy without DLPack bfloat16: move the bits as int16 and reinterpret.
    return cupy.from_dlpack(t.view(torch.int16)).view(_bfloat16_numpy())


def to_tensor(a):
    """The tensor view of a NumPy or CuPy array (the inverse of ``to_array``; CuPy arrays cross
    without a stream handshake, as in to_array)."""
    if a is None:
        return None
    bf16 = str(a.dtype) == "bfloat16"
    if type(a).__module__.startswith("cupy"):
        if bf16:
            return _cupy_to_cuda(a.view(_cupy().int16)).view(torch.bfloat16)
        return _cupy_to_cuda(a)
    if bf16:
        return torch.from_numpy(a.view("int16")).view(torch.bfloat16)
    return torch.from_numpy(a)


def _cupy_to_cuda(a):
    """A tensor sharing CuPy array ``a``'s memory, through a DLPack capsule: the capsule carries no
    stream, so no handshake (``torch.from_dlpack(a)`` makes one; the fallback where CuPy has no
    capsule export)."""
    export = getattr(a, "toDlpack", None)
    if export is None:
        return torch.from_dlpack(a)
    return torch.utils.dlpack.from_dlpack(export())


@contextlib.contextmanager
def torch_stream(device):
    """Run CuPy work on ``device``'s current PyTorch stream (no-op for CPU)."""
    if device.type != "cuda":
        yield
        return
    cupy = _cupy()
    index = device.index if device.index is not None else torch.cuda.current_device()
    with cupy.cuda.Device(index):
        with cupy.cuda.ExternalStream(torch.cuda.current_stream(index).cuda_stream, index):
            yield


def _run_eagerly_under_compile(fn):
    """torch.compile graph-breaks around ``fn`` and runs it eagerly: dynamo cannot trace into
    NumPy/CuPy engine calls, and the engines are already compiled kernels."""
    reason = ("ecornn.torch.LSTM runs ecornn's own kernels through NumPy/CuPy: torch.compile "
              "runs it eagerly (a graph break), so fullgraph=True cannot include it")
    try:
        return torch.compiler.disable(fn, reason=reason)
    except TypeError:  # torch without the reason argument
        return torch.compiler.disable(fn)


# ---- one call's options and the autograd function ------------------------------------------

@dataclass
class _Call:
    """What one forward needs besides tensors; ``plan`` is filled in with the strategy that ran."""

    bidirectional: bool
    layout: str
    strategy: str
    dropout: float
    seed: int | None
    prepared: object = None   # PreparedWeights to use instead of the raw weights (GPU engines)
    plan: tuple = None        # (strategy, reason)


def _layer_weights(flat):
    return [LayerWeights(*(to_array(t) for t in flat[i:i + 4])) for i in range(0, len(flat), 4)]


def _run_forward(call, x, h0, c0, flat_weights, training):
    with torch_stream(x.device):
        weights = call.prepared or _layer_weights(flat_weights)
        out = lstm_forward(to_array(x), weights, to_array(h0), to_array(c0),
                           bidirectional=call.bidirectional, layout=call.layout,
                           strategy=call.strategy, training=training, dropout=call.dropout,
                           seed=call.seed)
        # contiguous like torch.nn.LSTM's results (callers .view() them)
        y, h, c = (to_tensor(a).contiguous() for a in (out.y, out.h, out.c))
    call.plan = (out.strategy, out.reason)
    return y, h, c, out.reserve


@dataclass
class _Prepared:
    """One strategy's PreparedWeights and the parameters' storage and versions they were made from."""

    storage: tuple    # (data_ptr, dtype) per parameter
    versions: tuple   # the parameters' _version counters at the last prepare or refresh
    weights: object   # PreparedWeights


class _LSTMFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, call, x, h0, c0, *flat_weights):
        y, h, c, reserve = _run_forward(call, x, h0, c0, flat_weights, training=True)
        # The reserve rides on a saved tensor, so torch frees it after backward unless
        # retain_graph=True, exactly as it frees its own saved activations.
        holder = torch.empty(0)
        holder.ecornn_reserve = reserve
        ctx.has_state = (h0 is not None, c0 is not None)
        ctx.output_shape = y.shape
        # x and the weights too: torch then reports their in-place edits before backward
        ctx.save_for_backward(holder, x, *flat_weights)
        ctx.set_materialize_grads(False)
        return y, h, c

    @staticmethod
    @once_differentiable
    def backward(ctx, dy, dh, dc):
        holder, x = ctx.saved_tensors[:2]
        if dy is None:
            dy = torch.zeros(ctx.output_shape, dtype=x.dtype, device=x.device)
        with torch_stream(x.device):
            # retain: a graph-replayed reserve keeps its buffers until torch frees the holder
            # (after this backward, or with the graph under retain_graph=True)
            grads = lstm_backward(holder.ecornn_reserve, to_array(dy), to_array(dh), to_array(dc),
                                  retain=True)
            dx, dh0, dc0 = (to_tensor(a) for a in (grads.dx, grads.dh0, grads.dc0))
            dweights = [to_tensor(a) for w in grads.dweights for a in w]
        has_h0, has_c0 = ctx.has_state
        return (None, dx, dh0 if has_h0 else None, dc0 if has_c0 else None, *dweights)


# ---- the module ----------------------------------------------------------------------------

class LSTM(nn.Module):
    """Multi-layer LSTM with torch.nn.LSTM's interface, parameters and numerics, run by ecornn.

    ``strategy``: 'auto' (the planner picks; CPU tensors use the reference engine), or one of
    'reference', 'fused', 'persistent'. ``last_plan`` holds (strategy, reason) of the last call.
    """

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, strategy="auto", device=None,
                 dtype=None):
        super().__init__()
        for name, value in (("input_size", input_size), ("hidden_size", hidden_size),
                            ("num_layers", num_layers)):
            expect(isinstance(value, int) and not isinstance(value, bool) and value > 0, name,
                   "a positive int", repr(value))
        expect(isinstance(dropout, (int, float)) and not isinstance(dropout, bool)
               and 0 <= dropout < 1, "dropout", "a probability in [0, 1)", repr(dropout))
        expect(strategy in STRATEGIES + ("auto",), "strategy", f"one of {STRATEGIES + ('auto',)}",
               repr(strategy))
        if not bias:
            raise NotSupported(strategy, "bias=False: ecornn's kernels always add b_ih + b_hh; use "
                                         "bias=True and zero (and freeze) the biases instead")
        if proj_size:
            raise NotSupported(strategy, f"proj_size={proj_size}: LSTM with projections is not "
                                         "implemented; use proj_size=0")
        if dtype is not None:
            expect(dtype in _DTYPES, "dtype", f"one of {_DTYPES}", dtype)
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so "
                          f"non-zero dropout expects num_layers greater than 1, but got "
                          f"dropout={dropout} and num_layers={num_layers}")
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = True, bool(batch_first), float(dropout)
        self.bidirectional, self.proj_size, self.strategy = bool(bidirectional), 0, strategy
        self.last_plan = None
        self._prepared = {}     # strategy -> _Prepared (kernel-layout weights kept across calls)
        self._strategies = {}   # a call's shapes, dtype, device, layout, training -> planned strategy
        self._flat_weights_names = []
        self._register_parameters({"device": device, "dtype": dtype})
        self.reset_parameters()

    @property
    def num_directions(self):
        return 2 if self.bidirectional else 1

    def _register_parameters(self, factory):
        # Same order as torch.nn.LSTM, so one torch seed gives both modules the same weights.
        gates, hidden = 4 * self.hidden_size, self.hidden_size
        for layer in range(self.num_layers):
            k = self.input_size if layer == 0 else self.num_directions * hidden
            shapes = ((gates, k), (gates, hidden), (gates,), (gates,))
            for direction in range(self.num_directions):
                suffix = "_reverse" if direction else ""
                for kind, shape in zip(_PARAM_KINDS, shapes):
                    name = f"{kind}_l{layer}{suffix}"
                    self.register_parameter(name, nn.Parameter(torch.empty(shape, **factory)))
                    self._flat_weights_names.append(name)

    def reset_parameters(self):
        bound = 1.0 / math.sqrt(self.hidden_size)
        for weight in self.parameters():
            nn.init.uniform_(weight, -bound, bound)

    @property
    def _flat_weights(self):
        return [getattr(self, name) for name in self._flat_weights_names]

    @property
    def all_weights(self):
        flat = self._flat_weights
        return [flat[i:i + 4] for i in range(0, len(flat), 4)]

    def flatten_parameters(self):
        """No-op, for code written for torch.nn.LSTM (ecornn keeps no flat cuDNN buffer)."""

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s + f", strategy={self.strategy!r}"

    # ---- forward -------------------------------------------------------------------------------

    @_run_eagerly_under_compile
    def forward(self, input, hx=None):
        self._check_input(input)
        batched = input.dim() == 3
        x = input if batched else input.unsqueeze(1)  # unbatched: one sequence, time-major
        h0, c0 = self._states(hx, x, batched)
        if x.is_cuda and torch.cuda.is_current_stream_capturing():
            raise NotSupported(self.strategy, "CUDA graph capture: ecornn's engines allocate from "
                                              "CuPy's memory pool and may plan or compile on first "
                                              "use; run ecornn.torch.LSTM outside the captured "
                                              "region")
        y, h, c = self._run(x, h0, c0, layout="NTC" if (self.batch_first and batched) else "TNC")
        if not batched:
            y, h, c = y.squeeze(1), h.squeeze(1), c.squeeze(1)
        return y, (h, c)

    def _run(self, x, h0, c0, layout):
        """Through autograd when a gradient is wanted, else a plain (inference) forward."""
        flat = self._flat_weights
        apply_dropout = self.training and self.dropout > 0 and self.num_layers > 1
        call = _Call(self.bidirectional, layout, self._strategy_for(x),
                     self.dropout if apply_dropout else 0.0,
                     _seed_from_torch() if apply_dropout else None)
        tensors = [t for t in (x, h0, c0, *flat) if t is not None]
        wants_grad = torch.is_grad_enabled() and any(t.requires_grad for t in tensors)
        call.prepared = self._prepared_for(call, x, flat, training=wants_grad or apply_dropout)
        if wants_grad:
            y, h, c = _LSTMFunction.apply(call, x, h0, c0, *flat)
        else:
            y, h, c, _ = _run_forward(call, x, h0, c0, flat, training=apply_dropout)
        self.last_plan = call.plan
        if self.strategy == "auto" and not x.is_cuda:
            self.last_plan = ("reference", "CPU tensors run on the host reference engine")
        return y, h, c

    def _strategy_for(self, x):
        # CPU tensors stay on the host: 'auto' means the reference engine there.
        return "reference" if (self.strategy == "auto" and not x.is_cuda) else self.strategy

    def _check_input(self, input):
        if isinstance(input, nn.utils.rnn.PackedSequence):
            raise NotSupported(self.strategy, "PackedSequence input: pad the batch "
                                              "(torch.nn.utils.rnn.pad_packed_sequence) and pass "
                                              "the padded tensor")
        expect(isinstance(input, torch.Tensor), "input", "a torch.Tensor", type(input).__name__)
        expect(input.dim() in (2, 3), "input rank", "3 (batched) or 2 (unbatched: sequence, "
               "features)", f"{input.dim()} {tuple(input.shape)}")
        expect(input.shape[-1] == self.input_size, "input feature size (last axis)",
               self.input_size, input.shape[-1])
        param = self.weight_ih_l0
        expect(input.dtype == param.dtype, "input dtype", f"{param.dtype} (the LSTM's parameters)",
               input.dtype)
        expect(input.device == param.device, "input device",
               f"{param.device} (the LSTM's parameters)", input.device)

    def _states(self, hx, x, batched):
        if hx is None:
            return None, None
        expect(isinstance(hx, (tuple, list)) and len(hx) == 2, "hx", "a tuple (h0, c0)",
               type(hx).__name__)
        batch = x.shape[0] if (self.batch_first and batched) else x.shape[1]
        layers = self.num_layers * self.num_directions
        want = (layers, batch, self.hidden_size) if batched else (layers, self.hidden_size)
        states = []
        for name, t in zip(("h0", "c0"), hx):
            expect(isinstance(t, torch.Tensor), name, "a torch.Tensor", type(t).__name__)
            expect(tuple(t.shape) == want, f"{name} shape", want, tuple(t.shape))
            expect(t.dtype == x.dtype, f"{name} dtype", f"{x.dtype} (the input's)", t.dtype)
            expect(t.device == x.device, f"{name} device", f"{x.device} (the input's)", t.device)
            states.append(t if batched else t.unsqueeze(1))
        return tuple(states)

    def _prepared_for(self, call, x, flat, training):
        """PreparedWeights for a GPU engine that takes them, kept across calls (one per strategy).

        Prepared again when a parameter has new storage or dtype; refreshed in place when one
        changed its values, seen through the version counters that optimizers, load_state_dict
        and every in-place op bump (the persistent engine's CUDA graphs then stay valid, and from
        the second optimizer step on its refresh is a graph too). Edits through ``.data`` bypass
        the counter: call ``reset_prepared()`` after those. The planner's choice is kept per input
        shape, so a call in a loop plans and converts nothing.
        """
        if not x.is_cuda:
            return None
        storage = tuple((p.data_ptr(), p.dtype) for p in flat)
        with torch_stream(x.device):
            strategy = self._strategy_for_call(call, x, flat, training, storage)
            if not hasattr(get_engine(strategy), "prepare"):
                return None
            versions = tuple(p._version for p in flat)
            cached = self._prepared.get(strategy)
            if cached is None or cached.storage != storage:
                cached = _Prepared(storage, versions, prepare_weights(_layer_weights(flat), strategy=strategy,
                                                                      bidirectional=self.bidirectional))
                self._prepared[strategy] = cached
            elif cached.versions != versions:
                refresh_weights(cached.weights)   # its raw arrays are views of these parameters
                cached.versions = versions
        call.strategy = strategy
        return cached.weights

    def _strategy_for_call(self, call, x, flat, training, storage) -> str:
        key = (tuple(x.shape), x.dtype, x.device, call.layout, call.strategy, training, storage)
        if key not in self._strategies:
            config = make_config(to_array(x), _layer_weights(flat), call.bidirectional, call.layout)
            if len(self._strategies) >= 64:
                self._strategies.clear()
            self._strategies[key] = plan(config, call.strategy, training=training).strategy
        return self._strategies[key]

    def reset_prepared(self):
        """Forget the cached kernel-layout weights (needed only after edits through ``.data``)."""
        self._prepared, self._strategies = {}, {}

    def __getstate__(self):
        # pickling and deepcopy leave the device-side cache behind; it is rebuilt on demand
        state = self.__dict__.copy()
        state["_prepared"], state["_strategies"] = {}, {}
        return state

    def _apply(self, fn, *args, **kwargs):
        self.reset_prepared()  # .to()/.half()/.cuda() make new parameters
        return super()._apply(fn, *args, **kwargs)


def _seed_from_torch():
    """A dropout seed drawn from torch's default generator, so torch.manual_seed reproduces it."""
    return int(torch.randint(0, 2**62, (1,), dtype=torch.int64).item())
