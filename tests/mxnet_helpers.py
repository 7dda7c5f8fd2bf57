"""Test utilities for the MXNet side: import mxnet (through ecornn's numpy-2 layer) or skip,
move weights in and out of Gluon LSTM blocks, and run a block forward + backward."""
import pytest

from ecornn import LayerWeights, LSTMConfig
from ecornn.weights import mxnet_names


def import_mxnet_or_skip():
    from ecornn.mxnet_compat import import_mxnet
    try:
        return import_mxnet()
    except ImportError as exc:
        if "needs mxnet" in str(exc):
            pytest.skip("mxnet 1.9.1 is not installed", allow_module_level=True)
        raise


mx = import_mxnet_or_skip()
from mxnet import autograd, gluon  # noqa: E402,F401  (re-exported for the tests)


def random_config(rng, layers, bidirectional, layout, batch, steps, dtype="float32"):
    """An LSTMConfig of the given structure with random hidden size and input size != hidden."""
    hidden = int(rng.integers(2, 12))
    delta = int(rng.integers(1, 6))
    input_size = hidden - delta if hidden > delta and rng.random() < 0.5 else hidden + delta
    return LSTMConfig(input_size, hidden, layers, bidirectional, dtype, batch, steps, layout)


def random_structure(rng):
    """(layers, bidirectional, layout, batch, steps) drawn from the ranges the tests must cover."""
    return (int(rng.integers(1, 4)), bool(rng.integers(2)), str(rng.choice(["TNC", "NTC"])),
            int(rng.choice([1, 3, 8])), int(rng.choice([1, 7, 33])))


def slots(num_layers, num_directions):
    return [(layer, direction) for layer in range(num_layers) for direction in range(num_directions)]


def set_weights(block, weights, num_layers, num_directions):
    """Load ecornn LayerWeights into a gluon.rnn.LSTM or ecornn.LSTM (initialized or deferred)."""
    for (layer, direction), w in zip(slots(num_layers, num_directions), weights):
        for field, name in mxnet_names(layer, direction).items():
            param = getattr(block, name)
            array = getattr(w, field)
            if param.shape is None or 0 in param.shape:
                param.shape = array.shape
            param.initialize(force_reinit=True)
            param.set_data(mx.nd.array(array, dtype=array.dtype))


def get_weights(block, num_layers, num_directions, grads=False) -> list:
    """The block's parameters (or their gradients) as ecornn LayerWeights of NumPy arrays."""
    out = []
    for layer, direction in slots(num_layers, num_directions):
        names = mxnet_names(layer, direction)
        params = [getattr(block, names[field]) for field in LayerWeights._fields]
        out.append(LayerWeights(*((p.grad() if grads else p.data()).asnumpy() for p in params)))
    return out


def run_block(block, x, h0=None, c0=None, gy=None, gh=None, gc=None):
    """Forward + backward of ``block`` with head gradients gy (output) and, when states are given,
    gh, gc (final states). Returns a dict of NumPy arrays: y, h, c, dx, dh0, dc0."""
    x_nd = mx.nd.array(x, dtype=x.dtype)
    x_nd.attach_grad()
    states = None
    if h0 is not None:
        states = [mx.nd.array(h0, dtype=h0.dtype), mx.nd.array(c0, dtype=c0.dtype)]
        for s in states:
            s.attach_grad()
    with autograd.record():
        out = block(x_nd) if states is None else block(x_nd, states)
    if states is None:
        autograd.backward([out], [mx.nd.array(gy, dtype=gy.dtype)])
        return {"y": out.asnumpy(), "dx": x_nd.grad.asnumpy()}
    y, (h, c) = out
    heads = [mx.nd.array(g, dtype=g.dtype) for g in (gy, gh, gc)]
    autograd.backward([y, h, c], heads)
    return {"y": y.asnumpy(), "h": h.asnumpy(), "c": c.asnumpy(), "dx": x_nd.grad.asnumpy(),
            "dh0": states[0].grad.asnumpy(), "dc0": states[1].grad.asnumpy()}
