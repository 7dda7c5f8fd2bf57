"""`persistent` v17 on the GPU: graph replays run on the caller's stream
(persistent_graph.REPLAY_ON_CALLER_STREAM), ordered after the replay before them only where that ran
on another stream. Replays share their graph's buffers, so a missing order shows as a call that
returns another call's result: each replay below is compared bitwise with the eager path on its own
inputs, with nothing synchronised between the calls."""
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent, persistent_graph
from ecornn.engines import reference as reference_engine
from tests.helpers import rel_err
from tests.test_persistent_v5_gpu import _float64, _gpu_inputs
from tests.test_persistent_gpu import FP32_TOL, HALF_TOL

pytestmark = pytest.mark.gpu


def _prepared(rng, config):
    import cupy as cp
    from ecornn.arrays import to_module
    from ecornn.weights import LayerWeights
    from tests.helpers import random_problem
    weights, _, _, _ = random_problem(rng, config)
    gpu_weights = [LayerWeights(*(to_module(a, cp) for a in w)) for w in weights]
    return weights, gpu_weights, persistent.prepare(config, gpu_weights)


def _assert_equal_bits(got, want):
    import cupy as cp
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        assert cp.array_equal(g.view(cp.uint8), w.view(cp.uint8))


@pytest.mark.parametrize("dtype, hidden, batch, steps", [
    ("float32", 256, 4, 300),     # long enough for a second replay to overlap the first if unordered
    ("bfloat16", 512, 2, 200),
])
def test_replays_from_three_streams_and_both_paths_match_eager(rng, monkeypatch, dtype, hidden, batch, steps):
    """Calls alternate over the legacy default stream and two non-blocking streams, and between the
    caller-stream path and the graph-stream ablation, with nothing synchronised in between."""
    import cupy as cp
    config = LSTMConfig(hidden, hidden, 1, False, dtype, batch, steps)
    host_weights, gpu_weights, prepared = _prepared(rng, config)
    calls = [_gpu_inputs(rng, config) for _ in range(8)]
    streams = [cp.cuda.Stream.null, cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)]
    cp.cuda.Device().synchronize()
    outs = []
    for i, (x, h0, c0) in enumerate(calls):
        monkeypatch.setattr(persistent_graph, "REPLAY_ON_CALLER_STREAM", i % 4 != 3)
        with streams[i % 3]:
            outs.append(persistent.forward(config, x, gpu_weights, h0, c0, prepared=prepared)[:3])
    cp.cuda.Device().synchronize()
    assert len(prepared.graphs) == 1 and not persistent_graph.capture_errors
    monkeypatch.setattr(persistent_graph, "ENABLED", False)
    tol = FP32_TOL if dtype == "float32" else HALF_TOL
    for i, ((x, h0, c0), got) in enumerate(zip(calls, outs)):
        want = persistent.forward(config, x, gpu_weights, h0, c0, prepared=prepared)[:3]
        _assert_equal_bits(got, want)
        if i == len(calls) - 1:
            exact = reference_engine.forward(config.replace(dtype="float64"), _float64(x), host_weights,
                                             _float64(h0), _float64(c0))
            for g, w in zip(got, exact[:3]):
                assert rel_err(_float64(g), w) <= tol


def test_a_replay_is_ordered_on_the_callers_stream_alone(rng):
    """The outputs are ready once the caller's stream is: no other stream needs a sync."""
    import cupy as cp
    config = LSTMConfig(128, 128, 1, False, "float32", 3, 64)
    _, gpu_weights, prepared = _prepared(rng, config)
    wx, wh, wc = _gpu_inputs(rng, config)
    for _ in range(2):   # the eager call, then the one that captures
        persistent.forward(config, wx, gpu_weights, wh, wc, prepared=prepared)
    x, h0, c0 = _gpu_inputs(rng, config)
    stream = cp.cuda.Stream(non_blocking=True)
    cp.cuda.Device().synchronize()
    with stream:
        got = persistent.forward(config, x, gpu_weights, h0, c0, prepared=prepared)[:3]
        stream.synchronize()
        host = [cp.asnumpy(g, stream=stream) for g in got]
    eager = persistent._forward_eager(config, x, gpu_weights, h0, c0, prepared=prepared)[:3]
    for h, e in zip(host, eager):
        assert (h.view("u1") == cp.asnumpy(e).view("u1")).all()
    assert len(prepared.graphs) == 1
    assert persistent_graph._last_replay[cp.cuda.runtime.getDevice()][0] == stream.ptr


@pytest.mark.parametrize("dtype, hidden, batch, in_kernel", [
    ("bfloat16", 1024, 4, True),    # v12: the tensor-core kernel reads x itself
    ("float16", 1024, 16, False),   # the 16-bit projection GEMM reads x
])
def test_sixteen_bit_x_reaches_the_kernel_without_an_fp32_copy(rng, monkeypatch, dtype, hidden, batch, in_kernel):
    """DIRECT_16BIT_INPUT: no fp32 copy of x is made, and the results are bitwise those of the round
    trip through fp32 (the ablation) and within tolerance of float64, eager and replayed."""
    import cupy as cp
    monkeypatch.setattr(persistent, "BATCH_GROUPS", False)   # B=16's GEMM plan (v30 groups it: the kernel reads x)
    config = LSTMConfig(hidden, hidden, 1, False, dtype, batch, 40)
    host_weights, gpu_weights, prepared = _prepared(rng, config)
    assert persistent._final(persistent.plans_for(config, False)["forward"]).in_kernel_projection == in_kernel
    x, h0, c0 = _gpu_inputs(rng, config)
    dy = _gpu_inputs(rng, config.replace(input_size=hidden))[0]
    converted = []
    f32 = persistent._f32
    monkeypatch.setattr(persistent, "_f32", lambda a: (converted.append(a is x), f32(a))[1])

    def train():   # fwd+bwd in training mode: x's 16-bit operand of dW_ih is x itself too
        out = persistent.forward(config, x, gpu_weights, h0, c0, training=True, prepared=prepared)
        dx, dh0, dc0, grads = persistent.backward(out[3], dy, cp.zeros_like(h0), cp.zeros_like(c0))
        return (*out[:3], dx, dh0, dc0, *(a for g in grads for a in g))
    runs = [persistent.forward(config, x, gpu_weights, h0, c0, prepared=prepared)[:3] for _ in range(3)]
    trained = train()
    assert not any(converted) and len(prepared.graphs) == 1
    monkeypatch.setattr(persistent, "DIRECT_16BIT_INPUT", False)
    ablation = persistent.forward(config, x, gpu_weights, h0, c0, prepared=prepared)[:3]
    trained_ablation = train()
    assert any(converted)
    for run in runs:
        _assert_equal_bits(run, ablation)
    _assert_equal_bits(trained, trained_ablation)
    exact = reference_engine.forward(config.replace(dtype="float64"), _float64(x), host_weights, _float64(h0),
                                     _float64(c0))
    for g, w in zip(runs[-1], exact[:3]):
        assert rel_err(_float64(g), w) <= HALF_TOL
    assert cp.cuda.runtime.getDevice() in persistent_graph._last_replay


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_outputs_share_one_buffer_and_stay_the_callers(rng, dtype):
    """ONE_OUTPUT_BUFFER: output, hT and cT are views of one buffer, eager and replayed (the graph's
    outputs are PackedOutputs); writing into one returned array changes neither the other two nor
    any later call's results."""
    import cupy as cp
    config = LSTMConfig(96, 128, 2, True, dtype, 3, 20)
    _, gpu_weights, prepared = _prepared(rng, config)
    calls = [_gpu_inputs(rng, config) for _ in range(4)]
    outs = [persistent.forward(config, x, gpu_weights, h0, c0, prepared=prepared)[:3] for x, h0, c0 in calls]
    entry = next(iter(prepared.graphs.values()))
    assert isinstance(entry.outputs, persistent_graph.PackedOutputs)
    for y, hT, cT in outs:
        assert y.base is not None and y.base is hT.base is cT.base
        assert y.shape == config.output_shape and hT.shape == cT.shape == config.state_shape
    kept = [[a.copy() for a in out] for out in outs]
    y2 = outs[2][0]                               # a replayed call's output, written by the caller
    cp.cuda.runtime.memset(y2.data.ptr, 0xFF, y2.nbytes)
    x3, h3, c3 = calls[3]
    again = persistent.forward(config, x3, gpu_weights, h3, c3, prepared=prepared)[:3]
    _assert_equal_bits(outs[2][1:], kept[2][1:])
    _assert_equal_bits(again, kept[3])
    _assert_equal_bits(outs[1], kept[1])


def test_input_copies_by_one_kernel_or_one_by_one(rng, monkeypatch):
    """COPY_KERNEL: aligned C-ordered inputs go by the copy kernel (h0 and c0 of 600 bytes: a tail
    past the 16-byte words); an input 2 bytes off 16-byte alignment (a view into a larger array)
    falls back to copies one by one. Bitwise eager either way. (v20 fetches the inputs in the graph:
    this is its ablation.)"""
    import cupy as cp
    monkeypatch.setattr(persistent_graph, "INPUTS_BY_REFERENCE", False)
    config = LSTMConfig(64, 100, 1, False, "float16", 3, 30)
    _, gpu_weights, prepared = _prepared(rng, config)
    launches = []
    kernel_for = persistent_graph._copy_kernel
    monkeypatch.setattr(persistent_graph, "_copy_kernel", lambda device: (launches.append(device),
                                                                          kernel_for(device))[1])
    assert config.batch * config.hidden_size * 2 % 16 == 8
    calls = [_gpu_inputs(rng, config) for _ in range(4)]
    x, h0, c0 = calls[3]
    shifted = cp.empty(x.size + 1, x.dtype)[1:].reshape(x.shape)   # 2 bytes past an aligned start
    shifted[...] = x
    calls[3] = (shifted, h0, c0)
    outs = [persistent.forward(config, x, gpu_weights, h0, c0, prepared=prepared)[:3] for x, h0, c0 in calls]
    assert len(launches) == 2                     # calls 2 and 3 (call 1 ran eagerly and captured)
    monkeypatch.setattr(persistent_graph, "ENABLED", False)
    for (x, h0, c0), got in zip(calls, outs):
        _assert_equal_bits(got, persistent.forward(config, x, gpu_weights, h0, c0, prepared=prepared)[:3])
