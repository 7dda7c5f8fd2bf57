"""Issue 2: the reference's float32 output and gradients equal mxnet's gluon.rnn.LSTM (CPU, same
weights) within 1e-5 relative, on random configs incl. 3 layers, bidirectional, NTC, B=1, T=1."""
import numpy as np
import pytest

from ecornn import lstm_backward, lstm_forward
from tests.helpers import random_problem, rel_err
from tests.mxnet_helpers import get_weights, gluon, random_config, random_structure, run_block, set_weights

pytestmark = pytest.mark.mxnet

# layers, bidirectional, layout, batch, steps
STRUCTURES = [
    (1, False, "TNC", 1, 1),
    (3, True, "NTC", 1, 1),
    (3, True, "TNC", 3, 7),
    (2, False, "NTC", 8, 33),
    (1, True, "NTC", 3, 33),
    (3, False, "TNC", 8, 1),
    (2, True, "TNC", 1, 7),
]


def _reference(config, weights, x, h0, c0, gy, gh, gc):
    out = lstm_forward(x, weights, h0, c0, bidirectional=config.bidirectional, layout=config.layout,
                       strategy="reference", training=True)
    grads = lstm_backward(out.reserve, gy, gh, gc)
    return out, grads


def _gluon(config, weights, x, h0, c0, gy, gh, gc):
    block = gluon.rnn.LSTM(config.hidden_size, config.num_layers, config.layout,
                           bidirectional=config.bidirectional, input_size=config.input_size)
    block.initialize()
    set_weights(block, weights, config.num_layers, config.num_directions)
    return block, run_block(block, x, h0, c0, gy, gh, gc)


@pytest.mark.parametrize("structure", STRUCTURES + [None] * 3, ids=lambda s: "random" if s is None
                         else "L{}-{}-{}-B{}-T{}".format(s[0], "bi" if s[1] else "uni", *s[2:]))
def test_reference_matches_gluon_lstm(rng, structure):
    config = random_config(rng, *(structure or random_structure(rng)))
    weights, x, h0, c0 = random_problem(rng, config, states=True)
    gy = rng.standard_normal(config.output_shape).astype(np.float32)
    gh, gc = (rng.standard_normal(config.state_shape).astype(np.float32) for _ in range(2))

    out, grads = _reference(config, weights, x, h0, c0, gy, gh, gc)
    block, want = _gluon(config, weights, x, h0, c0, gy, gh, gc)

    for name, got in (("y", out.y), ("h", out.h), ("c", out.c), ("dx", grads.dx),
                      ("dh0", grads.dh0), ("dc0", grads.dc0)):
        assert got.dtype == np.float32
        assert rel_err(got, want[name]) < 1e-5, name
    gluon_grads = get_weights(block, config.num_layers, config.num_directions, grads=True)
    for index, (mine, theirs) in enumerate(zip(grads.dweights, gluon_grads)):
        for field in mine._fields:
            assert rel_err(getattr(mine, field), getattr(theirs, field)) < 1e-5, (index, field)
