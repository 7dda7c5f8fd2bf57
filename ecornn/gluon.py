"""``ecornn.LSTM``: a drop-in for mxnet 1.9.1's ``gluon.rnn.LSTM`` computed by ecornn.

The block subclasses ``gluon.rnn.LSTM``, so its constructor, parameter names and shapes, deferred
input-size inference, ``begin_state``, call conventions and parameter files are Gluon's own. Only
the kernel call differs: one ``mx.operator.CustomOp`` ("ecornn_lstm") that runs
``ecornn.lstm_forward`` / ``lstm_backward``, so autograd, ``Trainer`` and hybridized graphs work.

Where it runs:
- CPU context: the NumPy reference, reading the NDArrays' memory through DLPack (no copy in;
  results are copied out).
- CPU context with ``offload='gpu'``: the planner's GPU strategy on copies of the arrays (CuPy),
  results copied back. Needs CuPy and a CUDA GPU; without them the call raises ConfigError.
- GPU context: MXNet GPU arrays are handed to CuPy zero-copy through DLPack, both ways.

The op always runs the forward in training mode (keeping the reserve), because it cannot tell
whether autograd will ask for a backward. Dropout between layers (training only) draws its masks
from this module's generator; seed it with ``seed_dropout`` (``mx.random.seed`` does not reach
it). Not supported: projection_size, state clipping, use_sequence_length, ``mx.npx.set_np()``.
"""
from __future__ import annotations

import atexit
import threading

import numpy as np

from .api import lstm_backward, lstm_forward
from .arrays import cupy_or_none, gpu_available
from .config import LSTMConfig
from .engines import STRATEGIES
from .errors import expect
from .mxnet_compat import import_mxnet
from .planner import Plan, plan as plan_strategy
from .weights import LayerWeights, mxnet_names

mx = import_mxnet()
from mxnet import gluon  # noqa: E402  (after the compatibility layer)

__all__ = ["LSTM", "seed_dropout"]

OP_TYPE = "ecornn_lstm"
OFFLOADS = (None, "gpu")
DTYPES = ("float16", "float32", "float64")
_UNSUPPORTED_GLUON_OPTIONS = {"projection_size": None, "h2r_weight_initializer": None,
                              "state_clip_min": None, "state_clip_max": None,
                              "state_clip_nan": False, "use_sequence_length": False}
_dropout_rng = np.random.default_rng()
_dropout_lock = threading.Lock()


@atexit.register
def _finish_pending_work():
    # mxnet 1.9.1 can abort or hang at interpreter exit while custom-op work is still queued
    # (its engine threads call back into a finalizing Python). Registered after mxnet's own exit
    # handler, so this runs first.
    mx.nd.waitall()


def seed_dropout(seed) -> None:
    """Make the dropout masks of every ecornn.LSTM reproducible from ``seed``."""
    global _dropout_rng
    with _dropout_lock:
        _dropout_rng = np.random.default_rng(seed)


def _next_dropout_seed() -> int:
    with _dropout_lock:
        return int(_dropout_rng.integers(2**63))


def parameter_names(num_layers, num_directions) -> list:
    """Gluon names of the flat parameter list, in ecornn's layer-major LayerWeights order."""
    return [mxnet_names(layer, direction)[field]
            for layer in range(num_layers) for direction in range(num_directions)
            for field in LayerWeights._fields]


class LSTM(gluon.rnn.LSTM):
    """Multi-layer (bidirectional) LSTM with gluon.rnn.LSTM's interface, computed by ecornn.

    Extra arguments: ``strategy`` ('auto' or one of ecornn's strategies) and ``offload``
    (None, or 'gpu' to run a GPU strategy on copies of CPU-context arrays). ``plan(x)`` says
    which strategy runs for an input and why.
    """

    def __init__(self, hidden_size, num_layers=1, layout='TNC', dropout=0, bidirectional=False,
                 input_size=0, i2h_weight_initializer=None, h2h_weight_initializer=None,
                 i2h_bias_initializer='zeros', h2h_bias_initializer='zeros', dtype='float32',
                 strategy='auto', offload=None, **kwargs):
        _check_options(hidden_size, num_layers, layout, dropout, bidirectional, input_size,
                       dtype, strategy, offload, kwargs)
        super().__init__(hidden_size, num_layers, layout, dropout, bidirectional, input_size,
                         i2h_weight_initializer, h2h_weight_initializer,
                         i2h_bias_initializer, h2h_bias_initializer, dtype=dtype, **kwargs)
        self._strategy = strategy
        self._offload = offload

    @property
    def strategy(self) -> str:
        return self._strategy

    @property
    def offload(self):
        return self._offload

    # ---- calls -----------------------------------------------------------------------------
    def __call__(self, inputs, states=None, sequence_length=None, **kwargs):
        expect(sequence_length is None, "sequence_length", "None (ecornn.LSTM has no "
               "use_sequence_length)", type(sequence_length).__name__)
        if isinstance(inputs, mx.nd.NDArray):
            self._check_call(inputs, states)
        return super().__call__(inputs, states, **kwargs)

    def _check_call(self, inputs, states):
        expect(not mx.util.is_np_array(), "array API", "the NDArray API (ecornn.LSTM does not "
               "support mx.npx.set_np())", "numpy mode")
        _Spec.of(self).strategy_for(inputs.context)  # no GPU for offload='gpu', ...: say so now
        shape, layout = tuple(inputs.shape), self._layout
        expect(len(shape) == 3, "input rank", f"3 ({layout})", f"{len(shape)} {shape}")
        features = self.l0_i2h_weight.shape[1] or self._input_size
        if features:
            expect(shape[2] == features, f"input feature size (axis 2 of {layout})", features, shape[2])
        dtype = _dtype_name(self._dtype)  # as given to the constructor or to cast()
        expect(_dtype_name(inputs.dtype) == dtype, "input dtype", f"{dtype} (the block's dtype)",
               _dtype_name(inputs.dtype))
        if states is None:
            return
        states = [states] if isinstance(states, mx.nd.NDArray) else states
        expect(isinstance(states, (list, tuple)) and len(states) == 2, "states",
               "a list [h, c] of 2 NDArrays", f"{type(states).__name__} of {_length(states)}")
        want = (self._num_layers * self._dir, shape[layout.find('N')], self._hidden_size)
        for name, state in zip(("h", "c"), states):
            expect(isinstance(state, mx.nd.NDArray), f"state {name}", "an NDArray", type(state).__name__)
            expect(tuple(state.shape) == want, f"state {name} shape (layers*directions, batch, hidden)",
                   want, tuple(state.shape))
            expect(_dtype_name(state.dtype) == dtype, f"state {name} dtype", dtype,
                   _dtype_name(state.dtype))

    def _forward_kernel(self, F, inputs, states, sequence_length, **kwargs):
        params = [kwargs[name] for name in parameter_names(self._num_layers, self._dir)]
        out = F.Custom(inputs, states[0], states[1], *params, op_type=OP_TYPE,
                       hidden_size=self._hidden_size, num_layers=self._num_layers,
                       bidirectional=self._dir == 2, layout=self._layout, dropout=self._dropout,
                       strategy=self._strategy, offload=self._offload)
        return out[0], [out[1], out[2]]

    # ---- planning --------------------------------------------------------------------------
    def plan(self, data, ctx=None, training=False) -> Plan:
        """Which strategy runs for ``data`` (an NDArray, or an input shape) on ``ctx``, and why."""
        shape = tuple(data.shape) if hasattr(data, "shape") else tuple(data)
        expect(len(shape) == 3, "input rank", f"3 ({self._layout})", f"{len(shape)} {shape}")
        ctx = ctx or getattr(data, "context", None) or mx.current_context()
        steps, batch = (shape[0], shape[1]) if self._layout == "TNC" else (shape[1], shape[0])
        config = LSTMConfig(int(shape[2]), self._hidden_size, self._num_layers, self._dir == 2,
                            _dtype_name(self._dtype), int(batch), int(steps), self._layout)
        return _Spec.of(self).plan(config, ctx, training)


def _length(value):
    return len(value) if isinstance(value, (list, tuple)) else 1


def _check_options(hidden_size, num_layers, layout, dropout, bidirectional, input_size, dtype,
                   strategy, offload, kwargs):
    for name, value in (("hidden_size", hidden_size), ("num_layers", num_layers)):
        expect(_is_int(value) and value > 0, name, "a positive int", repr(value))
    expect(_is_int(input_size) and input_size >= 0, "input_size",
           "an int >= 0 (0: inferred from the first input)", repr(input_size))
    expect(layout in ("TNC", "NTC"), "layout", "'TNC' or 'NTC'", repr(layout))
    expect(isinstance(dropout, (int, float)) and 0 <= dropout < 1, "dropout",
           "a probability in [0, 1)", repr(dropout))
    expect(isinstance(bidirectional, bool), "bidirectional", "a bool", repr(bidirectional))
    expect(_dtype_name(dtype) in DTYPES, "dtype", f"one of {DTYPES}", repr(dtype))
    expect(strategy in STRATEGIES + ("auto",), "strategy", f"one of {STRATEGIES + ('auto',)}",
           repr(strategy))
    expect(offload in OFFLOADS, "offload", f"one of {OFFLOADS}", repr(offload))
    for name, default in _UNSUPPORTED_GLUON_OPTIONS.items():
        value = kwargs.pop(name, default)
        expect(value == default, name, f"{default!r} (not supported by ecornn.LSTM)", repr(value))


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _dtype_name(dtype):
    try:
        return np.dtype(dtype).name
    except TypeError:
        return None


# ---- the custom operator ---------------------------------------------------------------------
class _Spec:
    """The op's static attributes (what the CustomOpProp receives as strings) and where it runs."""

    def __init__(self, hidden_size, num_layers, bidirectional, layout, dropout, strategy, offload):
        self.hidden_size, self.num_layers = hidden_size, num_layers
        self.bidirectional, self.layout, self.dropout = bidirectional, layout, dropout
        self.strategy, self.offload = strategy, offload

    @classmethod
    def of(cls, block):
        return cls(block._hidden_size, block._num_layers, block._dir == 2, block._layout,
                   block._dropout, block._strategy, block._offload)

    @classmethod
    def from_strings(cls, hidden_size, num_layers, bidirectional, layout, dropout, strategy, offload):
        return cls(int(hidden_size), int(num_layers), bidirectional == "True", layout,
                   float(dropout), strategy, None if offload == "None" else offload)

    @property
    def num_directions(self):
        return 2 if self.bidirectional else 1

    def runs_on_host(self, ctx) -> bool:
        """True when the arrays stay NumPy arrays (CPU context; an offload copies them itself)."""
        return ctx.device_type != "gpu"

    def strategy_for(self, ctx) -> str:
        """The strategy argument to give the functional API for arrays on ``ctx``."""
        if ctx.device_type == "gpu":
            expect(cupy_or_none() is not None, "a GPU context", "CuPy installed (ecornn[gpu])",
                   "no CuPy")
            return self.strategy
        if self.offload == "gpu":
            expect(gpu_available(), "offload='gpu'", "CuPy and a CUDA GPU", "none found")
            return self.strategy
        expect(self.strategy in ("auto", "reference"), f"strategy {self.strategy!r} on {ctx}",
               "a GPU context, or offload='gpu' to run it on copies of CPU arrays",
               "a CPU context without offload")
        return "reference"

    def plan(self, config, ctx, training) -> Plan:
        chosen = plan_strategy(config, self.strategy_for(ctx), training)
        if ctx.device_type != "gpu" and self.offload is None:
            chosen.reason = (f"{ctx} context: the reference runs on the host arrays "
                             "(offload='gpu' or a GPU context enables the GPU strategies)")
        return chosen


class _LSTMOp(mx.operator.CustomOp):
    def __init__(self, spec: _Spec):
        super().__init__()
        self.spec = spec
        self.reserve = None

    def forward(self, is_train, req, in_data, out_data, aux):
        ctx = in_data[0].context
        spec = self.spec
        with _device_of(ctx):
            x, h0, c0, *flat = (_from_mxnet(a, spec.runs_on_host(ctx)) for a in in_data)
            weights = [LayerWeights(*flat[i:i + 4]) for i in range(0, len(flat), 4)]
            dropout = spec.dropout if is_train else 0.0
            # Always keep the reserve: the op cannot tell whether autograd will ask for backward.
            result = lstm_forward(x, weights, h0, c0, bidirectional=spec.bidirectional,
                                  layout=spec.layout, strategy=spec.strategy_for(ctx), training=True,
                                  dropout=dropout, seed=_next_dropout_seed() if dropout else None)
            self.reserve = result.reserve
            for i, array in enumerate((result.y, result.h, result.c)):
                _store(out_data[i], req[i], array)

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        ctx = in_data[0].context
        with _device_of(ctx):
            dy, dh, dc = (_from_mxnet(a, self.spec.runs_on_host(ctx)) for a in out_grad)
            grads = lstm_backward(self.reserve, dy, dh, dc)
            flat = [grads.dx, grads.dh0, grads.dc0] + [a for w in grads.dweights for a in w]
            for i, array in enumerate(flat):
                _store(in_grad[i], req[i], array)


@mx.operator.register(OP_TYPE)
class _LSTMProp(mx.operator.CustomOpProp):
    def __init__(self, hidden_size, num_layers, bidirectional, layout, dropout, strategy, offload):
        super().__init__(need_top_grad=True)
        self.spec = _Spec.from_strings(hidden_size, num_layers, bidirectional, layout, dropout,
                                       strategy, offload)

    def list_arguments(self):
        return ["data", "h0", "c0"] + parameter_names(self.spec.num_layers, self.spec.num_directions)

    def list_outputs(self):
        return ["output", "hn", "cn"]

    def infer_shape(self, in_shape):
        """Shapes of states, parameters (the deferred input size too) and outputs from the data's."""
        spec, data = self.spec, tuple(in_shape[0])
        expect(len(data) == 3, "input rank", f"3 ({spec.layout})", f"{len(data)} {data}")
        steps, batch, features = (data if spec.layout == "TNC" else (data[1], data[0], data[2]))
        hidden, directions = spec.hidden_size, spec.num_directions
        gates = 4 * hidden
        params = []
        for layer in range(spec.num_layers):
            inputs = features if layer == 0 else directions * hidden
            params += [(gates, inputs), (gates, hidden), (gates,), (gates,)] * directions
        state = (spec.num_layers * directions, batch, hidden)
        output = (steps, batch, directions * hidden)
        output = output if spec.layout == "TNC" else (batch, steps, output[2])
        return [data, state, state] + params, [output, state, state], []

    def infer_type(self, in_type):
        return [in_type[0]] * len(in_type), [in_type[0]] * 3, []

    def create_operator(self, ctx, in_shapes, in_dtypes):
        return _LSTMOp(self.spec)


# ---- arrays between MXNet and NumPy / CuPy (DLPack) --------------------------------------------
_DLPACK_CPU, _DLPACK_CUDA = 1, 2


class _Capsule:
    """mxnet 1.9.1 exports a bare DLPack capsule; numpy.from_dlpack and cupy.from_dlpack want an
    object with ``__dlpack__`` / ``__dlpack_device__``. This is that object, used once."""

    def __init__(self, capsule, device):
        self.capsule, self.device = capsule, device

    def __dlpack__(self, stream=None, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return self.device


def _from_mxnet(array, on_host: bool, write=False):
    """A NumPy (host; read-only) or CuPy (GPU) array sharing ``array``'s memory."""
    ctx = array.context
    device = (_DLPACK_CUDA, ctx.device_id) if ctx.device_type == "gpu" else (_DLPACK_CPU, 0)
    export = mx.nd.to_dlpack_for_write if write else mx.nd.to_dlpack_for_read
    capsule = _Capsule(export(array), device)
    return np.from_dlpack(capsule) if on_host else cupy_or_none().from_dlpack(capsule)


def _store(target, req, result):
    """Write (or add) an engine's result into one of the op's output or gradient NDArrays.

    The GPU path writes through a CuPy view of the NDArray. The host path copies through
    ``mx.nd.array``: handing NumPy memory to MXNet by DLPack would leave NumPy's deleter to run on
    an MXNet engine thread, and numpy < 1.24's deleter does not take the GIL (heap corruption).
    """
    if req == "null":
        return
    if isinstance(result, np.ndarray):
        source = mx.nd.array(result, ctx=target.context, dtype=result.dtype)
        if req == "add":
            target[:] += source
        else:
            target[:] = source
        return
    view = _from_mxnet(target, on_host=False, write=True)
    if req == "add":
        view += result
    else:
        view[...] = result
    # MXNet's GPU ops run on its own stream: finish CuPy's work before MXNet reads the memory.
    cupy_or_none().cuda.get_current_stream().synchronize()


class _device_of:
    """Make the CuPy device of a GPU context current (no-op on the host)."""

    def __init__(self, ctx):
        self.device = cupy_or_none().cuda.Device(ctx.device_id) if ctx.device_type == "gpu" else None

    def __enter__(self):
        if self.device is not None:
            self.device.__enter__()

    def __exit__(self, *exc):
        if self.device is not None:
            self.device.__exit__(*exc)
