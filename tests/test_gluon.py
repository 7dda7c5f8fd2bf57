"""ecornn.LSTM against mxnet's gluon.rnn.LSTM: numbers, parameters and files, training, errors."""
import numpy as np
import pytest

import ecornn
from ecornn import ConfigError, LSTMConfig, lstm_backward, lstm_forward
from tests.helpers import random_problem, rel_err
from tests.mxnet_helpers import autograd, get_weights, gluon, mx, random_config, random_structure, run_block, set_weights

pytestmark = pytest.mark.mxnet

# ours (fp32) against mxnet's fp32 LSTM, not float64: both sides round, and a small draw (T=1, B=1)
# measured dx at 1.4e-5. The float64 tests hold our numerics to 1e-5.
TOL = 3e-5
# layers, bidirectional, layout, batch, steps, with begin states
STRUCTURES = [
    (1, False, "TNC", 1, 1, False),
    (1, True, "NTC", 3, 7, True),
    (2, False, "NTC", 8, 33, True),
    (2, True, "TNC", 1, 33, False),
    (3, True, "NTC", 8, 1, True),
    (3, False, "TNC", 3, 7, False),
    (3, True, "TNC", 8, 33, True),
    (2, True, "NTC", 1, 7, True),
]


def _ids(s):
    return "L{}-{}-{}-B{}-T{}-{}".format(s[0], "bi" if s[1] else "uni", s[2], s[3], s[4],
                                         "states" if s[5] else "nostates")


def _pair(config, **extra):
    """An ecornn.LSTM and a gluon.rnn.LSTM of ``config``, same random weights (biases too)."""
    kwargs = dict(num_layers=config.num_layers, layout=config.layout,
                  bidirectional=config.bidirectional, input_size=config.input_size,
                  dtype=config.dtype, **extra)
    ours, theirs = ecornn.LSTM(config.hidden_size, **kwargs), gluon.rnn.LSTM(config.hidden_size, **kwargs)
    for block in (ours, theirs):
        block.initialize()
    return ours, theirs


def _heads(rng, config):
    draw = lambda shape: rng.standard_normal(shape).astype(config.dtype)  # noqa: E731
    return draw(config.output_shape), draw(config.state_shape), draw(config.state_shape)


def _assert_same_run(config, ours, theirs, x, h0, c0, heads, tol=TOL):
    got, want = run_block(ours, x, h0, c0, *heads), run_block(theirs, x, h0, c0, *heads)
    assert set(got) == set(want)
    for name in want:
        assert got[name].dtype == want[name].dtype, name
        assert rel_err(got[name], want[name]) < tol, name
    args = (config.num_layers, config.num_directions)
    for index, (mine, other) in enumerate(zip(get_weights(ours, *args, grads=True),
                                              get_weights(theirs, *args, grads=True))):
        for field in mine._fields:
            assert rel_err(getattr(mine, field), getattr(other, field)) < tol, (index, field)


@pytest.mark.parametrize("hybridize", [False, True], ids=["imperative", "hybridized"])
@pytest.mark.parametrize("structure", STRUCTURES + [None] * 2,
                         ids=lambda s: "random" if s is None else _ids(s))
def test_matches_gluon_lstm(rng, structure, hybridize):
    structure = structure or random_structure(rng) + (bool(rng.integers(2)),)
    config = random_config(rng, *structure[:5])
    weights, x, h0, c0 = random_problem(rng, config, states=structure[5])
    ours, theirs = _pair(config)
    for block in (ours, theirs):
        set_weights(block, weights, config.num_layers, config.num_directions)
        if hybridize:
            block.hybridize()
    _assert_same_run(config, ours, theirs, x, h0, c0, _heads(rng, config))


def test_matches_gluon_lstm_float64_with_deferred_input_size(rng):
    config = random_config(rng, 2, True, "NTC", 3, 5, dtype="float64")
    weights, x, h0, c0 = random_problem(rng, config)
    ours, theirs = (cls(config.hidden_size, 2, "NTC", bidirectional=True, dtype="float64")
                    for cls in (ecornn.LSTM, gluon.rnn.LSTM))
    assert ours.l0_i2h_weight.shape == theirs.l0_i2h_weight.shape == (4 * config.hidden_size, 0)
    for block in (ours, theirs):
        block.initialize()
        block(mx.nd.array(x, dtype="float64"))  # infers the input size
        assert block.l0_i2h_weight.shape == (4 * config.hidden_size, config.input_size)
        set_weights(block, weights, 2, 2)
    _assert_same_run(config, ours, theirs, x, h0, c0, _heads(rng, config), tol=1e-12)


def test_static_memory_hybridization_over_several_batches(rng):
    config = LSTMConfig(3, 6, 2, True, batch=2, seq_len=5, layout="NTC")
    weights = random_problem(rng, config)[0]
    ours, theirs = _pair(config)
    for block in (ours, theirs):
        set_weights(block, weights, 2, 2)
        block.hybridize(static_alloc=True, static_shape=True)
    for _ in range(3):  # buffers are reused between calls
        _, x, h0, c0 = random_problem(rng, config)
        _assert_same_run(config, ours, theirs, x, h0, c0, _heads(rng, config))


def test_gradients_when_recording_outside_training_mode(rng):
    config = LSTMConfig(4, 3, 2, False, batch=2, seq_len=4)
    weights, x, h0, c0 = random_problem(rng, config)
    ours, theirs = _pair(config, dropout=0.3)  # dropout is off outside training mode
    for block in (ours, theirs):
        set_weights(block, weights, 2, 1)
    results = []
    for block in (ours, theirs):
        x_nd = mx.nd.array(x)
        x_nd.attach_grad()
        with autograd.record(train_mode=False):
            y = block(x_nd, [mx.nd.array(h0), mx.nd.array(c0)])[0]
        y.backward()
        results.append((y.asnumpy(), x_nd.grad.asnumpy(), block.l1_h2h_weight.grad().asnumpy()))
    for got, want in zip(*results):
        assert rel_err(got, want) < TOL


def test_parameters_and_call_conventions_match_gluon(rng):
    ours, theirs = ecornn.LSTM(6, 2, bidirectional=True), gluon.rnn.LSTM(6, 2, bidirectional=True)
    strip = lambda block: {k[len(block.prefix):]: p.shape for k, p in block.collect_params().items()}  # noqa: E731
    assert strip(ours) == strip(theirs)
    assert {"l0_i2h_weight", "r0_h2h_bias", "l1_i2h_weight", "r1_h2h_weight"} <= set(strip(ours))
    assert isinstance(ours, gluon.HybridBlock)
    x = mx.nd.array(rng.standard_normal((4, 3, 5)).astype(np.float32))
    for block in (ours, theirs):
        block.initialize()
    assert [s.shape for s in ours.begin_state(3)] == [s.shape for s in theirs.begin_state(3)]
    assert isinstance(ours(x), mx.nd.NDArray) and ours(x).shape == (4, 3, 12)
    y, states = ours(x, ours.begin_state(3))
    assert y.shape == (4, 3, 12) and [s.shape for s in states] == [(4, 3, 6)] * 2


@pytest.mark.parametrize("direction", ["gluon_to_ecornn", "ecornn_to_gluon"])
def test_parameter_files_are_interchangeable(rng, tmp_path, direction):
    config = LSTMConfig(5, 7, 2, True, batch=3, seq_len=6)
    _, x, h0, c0 = random_problem(rng, config)
    make = lambda cls: cls(7, 2, bidirectional=True, input_size=5)  # noqa: E731
    source, target = ((make(gluon.rnn.LSTM), make(ecornn.LSTM)) if direction == "gluon_to_ecornn"
                      else (make(ecornn.LSTM), make(gluon.rnn.LSTM)))
    source.initialize(mx.init.Uniform(0.5))
    for name in ("l0_i2h_bias", "r1_h2h_bias"):  # non-zero biases travel too
        getattr(source, name).set_data(mx.nd.array(rng.standard_normal(28).astype(np.float32)))
    path = str(tmp_path / "lstm.params")
    source.save_parameters(path)
    target.load_parameters(path)
    for (name, a), (_, b) in zip(sorted(source._collect_params_with_prefix().items()),
                                 sorted(target._collect_params_with_prefix().items())):
        assert np.array_equal(a.data().asnumpy(), b.data().asnumpy()), name
    states = [mx.nd.array(h0), mx.nd.array(c0)]
    want, got = source(mx.nd.array(x), states), target(mx.nd.array(x), states)
    for a, b in zip([want[0]] + want[1], [got[0]] + got[1]):
        assert rel_err(b.asnumpy(), a.asnumpy()) < TOL


def _sum_task(seed, steps=300, batch=16, seq_len=8, features=2):
    """Batches (x, target): the target is the sum of the sequence's first feature."""
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        x = rng.uniform(-1, 1, (batch, seq_len, features)).astype(np.float32)
        yield mx.nd.array(x), mx.nd.array(x[:, :, :1].sum(axis=1))


class _Regressor(gluon.HybridBlock):
    def __init__(self, lstm, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.lstm = lstm
            self.head = gluon.nn.Dense(1, flatten=False)

    def hybrid_forward(self, F, x):
        return self.head(F.mean(self.lstm(x), axis=1))


def _train(model, seed):
    trainer = gluon.Trainer(model.collect_params(), "adam", {"learning_rate": 0.01})
    loss_fn, losses = gluon.loss.L2Loss(), []
    for x, target in _sum_task(seed):
        with autograd.record():
            loss = loss_fn(model(x), target)
        loss.backward()
        trainer.step(x.shape[0])
        losses.append(float(loss.mean().asscalar()))
    return np.array(losses)


def test_training_tracks_gluon_lstm_step_for_step(rng):
    seed = int(rng.integers(2**31))
    models = [_Regressor(cls(16, layout="NTC", input_size=2)) for cls in (ecornn.LSTM, gluon.rnn.LSTM)]
    mx.random.seed(seed)
    for model in models:
        model.initialize(mx.init.Xavier())
        model(mx.nd.zeros((1, 8, 2)))  # completes the Dense layer's deferred shape
    for (name, a), (_, b) in zip(sorted(models[0]._collect_params_with_prefix().items()),
                                 sorted(models[1]._collect_params_with_prefix().items())):
        b.set_data(a.data())
    for model in models:
        model.hybridize()
    ours, theirs = (_train(model, seed) for model in models)
    assert np.all(np.abs(ours - theirs) <= 1e-4 * np.abs(theirs)), np.max(np.abs(ours - theirs) / theirs)
    assert ours[-20:].mean() < 0.1 * ours[:20].mean()


def test_dropout_between_layers_in_training_only(rng):
    config = LSTMConfig(4, 5, 3, True, batch=3, seq_len=6)
    weights, x, h0, c0 = random_problem(rng, config)
    ours, theirs = _pair(config, dropout=0.5)
    for block in (ours, theirs):
        set_weights(block, weights, 3, 2)
    x_nd, states = mx.nd.array(x), [mx.nd.array(h0), mx.nd.array(c0)]
    inference = ours(x_nd, states)[0].asnumpy()
    assert rel_err(inference, theirs(x_nd, states)[0].asnumpy()) < TOL  # no dropout outside training

    seed = int(rng.integers(2**31))
    gy = rng.standard_normal(config.output_shape).astype(np.float32)
    ecornn.gluon.seed_dropout(seed)
    got = run_block(ours, x, h0, c0, gy, np.zeros_like(h0), np.zeros_like(c0))
    ecornn.gluon.seed_dropout(seed)
    again = run_block(ours, x, h0, c0, gy, np.zeros_like(h0), np.zeros_like(c0))
    assert np.array_equal(got["y"], again["y"])
    assert rel_err(got["y"], inference) > 1e-2

    # The op draws its mask seed as the first integer of the seeded generator.
    op_seed = int(np.random.default_rng(seed).integers(2**63))
    want = lstm_forward(x, weights, h0, c0, bidirectional=True, strategy="reference",
                        training=True, dropout=0.5, seed=op_seed)
    grads = lstm_backward(want.reserve, gy)
    for name, value in (("y", want.y), ("dx", grads.dx), ("dh0", grads.dh0), ("dc0", grads.dc0)):
        assert rel_err(got[name], value) < TOL, name


def test_plan_says_which_strategy_runs_and_why():
    block = ecornn.LSTM(8, 2, layout="NTC")
    chosen = block.plan((4, 10, 3))
    assert chosen.strategy == "reference" and "cpu(0)" in chosen.reason
    assert block.plan(mx.nd.zeros((4, 10, 3)), training=True).strategy == "reference"
    with pytest.raises(ConfigError, match="expected 3"):
        block.plan((4, 10))


def test_gpu_strategies_on_cpu_arrays_need_offload_and_a_gpu():
    from ecornn.arrays import gpu_available
    x = mx.nd.zeros((3, 2, 4))
    explicit = ecornn.LSTM(5, strategy="persistent")
    explicit.initialize()
    with pytest.raises(ConfigError, match="offload='gpu'"):
        explicit.plan(x)
    with pytest.raises(ConfigError, match="offload='gpu'"):
        explicit(x)
    if not gpu_available():
        offloaded = ecornn.LSTM(5, offload="gpu")
        offloaded.initialize()
        with pytest.raises(ConfigError, match="expected CuPy and a CUDA GPU, got none found"):
            offloaded(x)


@pytest.mark.gpu
def test_offload_matches_the_reference(rng):
    config = LSTMConfig(6, 32, 2, True, batch=4, seq_len=9)
    weights, x, h0, c0 = random_problem(rng, config)
    ours, host = ecornn.LSTM(32, 2, bidirectional=True, input_size=6, offload="gpu"), \
        ecornn.LSTM(32, 2, bidirectional=True, input_size=6)
    for block in (ours, host):
        block.initialize()
        set_weights(block, weights, 2, 2)
    heads = _heads(rng, config)
    got, want = run_block(ours, x, h0, c0, *heads), run_block(host, x, h0, c0, *heads)
    for name in want:
        assert rel_err(got[name], want[name]) < TOL, name


# ---- bad input --------------------------------------------------------------------------------
@pytest.fixture
def block():
    lstm = ecornn.LSTM(5, 2, input_size=4)
    lstm.initialize()
    return lstm


@pytest.mark.parametrize("shape, message", [
    ((3, 4), "input rank: expected 3 (TNC), got 2 (3, 4)"),
    ((3, 2, 6), "input feature size (axis 2 of TNC): expected 4, got 6"),
])
def test_wrong_input_shape_names_expected_and_got(block, shape, message):
    with pytest.raises(ConfigError) as info:
        block(mx.nd.zeros(shape))
    assert message in str(info.value)


def test_wrong_input_dtype(block):
    with pytest.raises(ConfigError, match="input dtype: expected float32 .*, got float64"):
        block(mx.nd.zeros((3, 2, 4), dtype="float64"))


@pytest.mark.parametrize("states, message", [
    (lambda: [mx.nd.zeros((2, 2, 5))], "states: expected a list [h, c] of 2 NDArrays, got list of 1"),
    (lambda: [mx.nd.zeros((2, 3, 5)), mx.nd.zeros((2, 2, 5))],
     "state h shape (layers*directions, batch, hidden): expected (2, 2, 5), got (2, 3, 5)"),
    (lambda: [mx.nd.zeros((2, 2, 5)), mx.nd.zeros((1, 2, 5))],
     "state c shape (layers*directions, batch, hidden): expected (2, 2, 5), got (1, 2, 5)"),
    (lambda: [mx.nd.zeros((2, 2, 5)), mx.nd.zeros((2, 2, 5), dtype="float16")],
     "state c dtype: expected float32, got float16"),
])
def test_wrong_states_name_expected_and_got(block, states, message):
    with pytest.raises(ConfigError) as info:
        block(mx.nd.zeros((3, 2, 4)), states())
    assert message in str(info.value)


@pytest.mark.parametrize("kwargs, message", [
    (dict(layout="CTN"), "layout: expected 'TNC' or 'NTC', got 'CTN'"),
    (dict(num_layers=0), "num_layers: expected a positive int, got 0"),
    (dict(dropout=1.0), "dropout: expected a probability in [0, 1), got 1.0"),
    (dict(dtype="int32"), "dtype: expected one of ('float16', 'float32', 'float64'), got 'int32'"),
    (dict(strategy="fastest"), "strategy: expected one of"),
    (dict(offload="tpu"), "offload: expected one of (None, 'gpu'), got 'tpu'"),
    (dict(projection_size=3), "projection_size: expected None (not supported by ecornn.LSTM), got 3"),
])
def test_bad_constructor_arguments(kwargs, message):
    with pytest.raises(ConfigError) as info:
        ecornn.LSTM(5, **kwargs)
    assert message in str(info.value)


# ---- DLPack plumbing (what GPU contexts use with CuPy; here with NumPy on the host) ------------
@pytest.mark.parametrize("write", [False, True], ids=["for_read", "for_write"])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_mxnet_arrays_are_viewed_without_copies(rng, dtype, write):
    from ecornn.gluon import _from_mxnet
    source = mx.nd.array(rng.standard_normal((3, 4)), dtype=dtype)
    view = _from_mxnet(source, on_host=True, write=write)
    assert view.dtype == np.dtype(dtype) and np.array_equal(view, source.asnumpy())
    source[:] = 7
    source.wait_to_read()
    assert np.all(view == 7)  # same memory


@pytest.mark.parametrize("req", ["write", "inplace", "add", "null"])
def test_results_are_stored_as_mxnet_requests(rng, req):
    from ecornn.gluon import _store
    before = rng.standard_normal((2, 3)).astype(np.float32)
    result = rng.standard_normal((3, 2)).astype(np.float32).T  # a non-contiguous view
    target = mx.nd.array(before)
    _store(target, req, result)
    want = {"write": result, "inplace": result, "add": before + result, "null": before}[req]
    assert np.allclose(target.asnumpy(), want, rtol=1e-6, atol=0)
