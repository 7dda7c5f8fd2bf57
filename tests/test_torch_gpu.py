"""ecornn.torch.LSTM on CUDA tensors against torch.nn.LSTM (cuDNN, TF32 off), per GPU strategy.

Each test runs for every strategy that ``ecornn.plan`` finds feasible for its configuration and
skips the others with the planner's reason.
"""
import contextlib
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("ml_dtypes")

import ecornn  # noqa: E402
import ecornn.torch as etorch  # noqa: E402
from ecornn import NotSupported  # noqa: E402

from .helpers import rel_err  # noqa: E402
from .test_torch_adapter import (TOL, assert_close, both_modules, load_bench,  # noqa: E402
                                 random_tensor, run_and_grad)

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA device")]

STRATEGIES = ["persistent", "fused", "auto"]
NAMES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}


@pytest.fixture(autouse=True)
def strict_fp32():
    """torch.nn.LSTM with TF32 off is the exact fp32 comparator."""
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


def require_feasible(strategy, dtype, input_size, hidden, layers=1, bidirectional=False,
                     batch=1, steps=1, training=True):
    """Skip unless the planner can run ``strategy`` on this configuration."""
    config = ecornn.LSTMConfig(input_size=input_size, hidden_size=hidden, num_layers=layers,
                               bidirectional=bidirectional, dtype=NAMES[dtype], batch=batch,
                               seq_len=steps)
    try:
        chosen = ecornn.plan(config, strategy, training=training)
    except NotSupported as exc:
        pytest.skip(f"{strategy}: {exc.reason}")
    return chosen.strategy


@contextlib.contextmanager
def skip_if_not_supported(strategy):
    """A strategy may reject a configuration only at run time (e.g. persistent's training
    capacity); skip it with the reason. 'auto' must always find something that runs."""
    try:
        yield
    except NotSupported as exc:
        if strategy == "auto":
            raise
        pytest.skip(f"{strategy}: {exc.reason}")


CASES = [  # (num_layers, bidirectional, batch_first, with_state)
    (1, False, False, True), (1, False, True, False), (2, True, False, True),
    (2, True, True, False),
]


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("layers, bidirectional, batch_first, with_state", CASES)
def test_matches_torch_on_cuda(rng, strategy, dtype, layers, bidirectional, batch_first,
                               with_state):
    hidden = int(rng.choice([64, 128, 256]))
    input_size = int(rng.choice([hidden, 32]))
    batch, steps = int(rng.choice([1, 4, 8, 16])), int(rng.integers(8, 48))
    expected = require_feasible(strategy, dtype, input_size, hidden, layers, bidirectional, batch,
                                steps)
    ours, theirs = both_modules(rng, dtype, "cuda", input_size=input_size, hidden_size=hidden,
                                num_layers=layers, bidirectional=bidirectional,
                                batch_first=batch_first, strategy=strategy)
    directions = 2 if bidirectional else 1
    x_shape = (batch, steps, input_size) if batch_first else (steps, batch, input_size)
    state_shape = (layers * directions, batch, hidden)
    x = random_tensor(rng, x_shape, dtype, "cuda")
    state = tuple(random_tensor(rng, state_shape, dtype, "cuda") for _ in range(2)) \
        if with_state else None
    upstream = [random_tensor(rng, s, dtype, "cuda").float()  # the same in both dtypes
                for s in (x_shape[:2] + (directions * hidden,), state_shape, state_shape)]
    with skip_if_not_supported(strategy):
        got = run_and_grad(ours, x, state, upstream)
    want = run_and_grad(theirs, x.float(), state and tuple(s.float() for s in state), upstream)
    assert ours.last_plan[0] == expected, ours.last_plan
    assert all(t.is_cuda and t.dtype == dtype for t in got)
    assert_close(got, want, TOL[dtype])


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_inference_reuses_prepared_weights_until_they_change(rng, strategy):
    require_feasible(strategy, torch.float32, 64, 128, batch=4, steps=16, training=False)
    ours, theirs = both_modules(rng, torch.float32, "cuda", input_size=64, hidden_size=128,
                                strategy=strategy)
    x = random_tensor(rng, (16, 4, 64), torch.float32, "cuda")
    with torch.no_grad(), skip_if_not_supported(strategy):
        first = ours(x)[0]
        (prepared,) = _prepared_weights(ours)
        assert rel_err(ours(x)[0].cpu().numpy(), first.cpu().numpy()) == 0
        assert _only(_prepared_weights(ours)) is prepared  # reused, not rebuilt
        for p in list(ours.parameters()) + list(theirs.parameters()):
            p.mul_(0.5)  # an in-place update, as an optimizer step makes
        got, want = ours(x)[0], theirs(x)[0]
        assert _only(_prepared_weights(ours)) is prepared  # refreshed in place
    assert rel_err(got.cpu().numpy(), want.cpu().numpy()) <= 1e-5


def _prepared_weights(module):
    return [cached.weights for cached in module._prepared.values()]


def _only(items):
    (item,) = items
    return item


@pytest.mark.parametrize("dtype, hidden, layers, bidirectional", [
    (torch.float32, 128, 2, True),
    (torch.float16, 256, 1, False),
    (torch.bfloat16, 128, 2, False),
])
def test_training_steps_replay_graphs_and_track_torch(rng, dtype, hidden, layers, bidirectional):
    """An optimizer loop on prepared weights (v10): from the second step on the training call is a
    replayed set and the refresh a graph; every step's outputs and gradients match torch.nn.LSTM in
    float64 given the same (updated) weights."""
    steps, batch, inp = 24, 4, 48
    require_feasible("persistent", dtype, inp, hidden, layers, bidirectional, batch, steps)
    ours, _ = both_modules(rng, dtype, "cuda", input_size=inp, hidden_size=hidden, num_layers=layers,
                           bidirectional=bidirectional, strategy="persistent")
    exact = torch.nn.LSTM(inp, hidden, layers, bidirectional=bidirectional).cuda().double()
    optimizer = torch.optim.SGD(ours.parameters(), lr=0.05)
    out = (steps, batch, (2 if bidirectional else 1) * hidden)
    state = (layers * (2 if bidirectional else 1), batch, hidden)
    for _ in range(4):
        exact.load_state_dict(ours.state_dict())          # this step's weights, exactly
        x = random_tensor(rng, (steps, batch, inp), dtype, "cuda")
        upstream = [random_tensor(rng, s, dtype, "cuda") for s in (out, state, state)]
        got = run_and_grad(ours, x, None, upstream)
        want = run_and_grad(exact, x.double(), None, [u.double() for u in upstream])
        assert_close(got, want, TOL[dtype])
        optimizer.step()
    (prepared,) = _prepared_weights(ours)
    data = prepared.data
    sets = [s for sets in data.training_sets.values() for s in sets]
    assert sets and sets[0].forward_graph is not None and sets[0].generation >= 2
    assert len(data.refresh_graphs) == 1


def test_tensors_cross_zero_copy_on_the_torch_stream():
    cupy = pytest.importorskip("cupy")
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        t = torch.randn(3, 5, device="cuda").to(dtype)
        a = etorch.to_array(t)
        assert a.data.ptr == t.data_ptr() and str(a.dtype) == NAMES[dtype]
        back = etorch.to_tensor(a)
        assert back.data_ptr() == t.data_ptr() and back.dtype == dtype
    side = torch.cuda.Stream()
    with torch.cuda.stream(side), etorch.torch_stream(torch.device("cuda")):
        assert cupy.cuda.get_current_stream().ptr == side.cuda_stream


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_side_stream_gives_the_same_results(rng, strategy):
    require_feasible(strategy, torch.float32, 64, 128, 2, True, 8, 32)
    ours, _ = both_modules(rng, torch.float32, "cuda", input_size=64, hidden_size=128,
                           num_layers=2, bidirectional=True, strategy=strategy)
    x = random_tensor(rng, (32, 8, 64), torch.float32, "cuda")
    upstream = [random_tensor(rng, s, torch.float32, "cuda") for s in ((32, 8, 256), (4, 8, 128),
                                                                         (4, 8, 128))]
    with skip_if_not_supported(strategy):
        want = run_and_grad(ours, x, None, upstream)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        got = run_and_grad(ours, x, None, upstream)
    torch.cuda.current_stream().wait_stream(side)
    assert_close(got, want, 1e-6)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_dropout_is_reproducible_on_cuda(rng, strategy):
    require_feasible(strategy, torch.float32, 64, 128, 3, False, 4, 16)
    ours, _ = both_modules(rng, torch.float32, "cuda", input_size=64, hidden_size=128,
                           num_layers=3, dropout=0.3, strategy=strategy)
    x = random_tensor(rng, (16, 4, 64), torch.float32, "cuda")
    runs = []
    with skip_if_not_supported(strategy):
        for seed in (5, 5, 6):
            torch.manual_seed(seed)
            runs.append(ours(x)[0].detach().cpu().numpy())
    assert rel_err(runs[1], runs[0]) <= 1e-6 and rel_err(runs[2], runs[0]) > 1e-2


def test_torch_compile_runs_the_layer_eagerly(rng):
    torch._dynamo.reset()
    torch.manual_seed(int(rng.integers(2**31)))
    model = load_bench().CharLM(etorch.LSTM, vocab=17, embed=32, hidden=128, layers=2).cuda()
    tokens = torch.from_numpy(rng.integers(0, 17, (4, 24))).cuda()
    want = model(tokens)
    try:
        got = torch.compile(model)(tokens)
    except torch._dynamo.exc.BackendCompilerFailed as exc:  # inductor/triton missing here
        pytest.skip(f"inductor cannot compile the torch parts on this machine: {exc}"[:300])
    assert rel_err(got.detach().cpu().numpy(), want.detach().cpu().numpy()) <= 1e-5
    got.sum().backward()  # gradients flow through the eager island
    assert all(p.grad is not None for p in model.parameters())
    torch._dynamo.reset()


def test_cuda_graph_capture_raises_a_clear_error(rng):
    module = etorch.LSTM(32, 64).cuda()
    x = random_tensor(rng, (8, 2, 32), torch.float32, "cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():
        module(x)  # warm-up outside capture, as CUDA graph recipes do
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(NotSupported, match="CUDA graph capture"):
        with torch.cuda.graph(graph):
            module(x)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_char_lm_trains_like_torch_on_gpu(strategy):
    bench = load_bench()
    ids, vocab = bench.encode(bench.make_corpus(50_000, seed=2))
    batches = bench.make_batches(ids, steps=150, batch=16, seq_len=64, seed=2)
    require_feasible(strategy, torch.float32, 32, 256, batch=16, steps=64)
    torch.manual_seed(0)
    theirs = bench.CharLM(torch.nn.LSTM, vocab=vocab, embed=32, hidden=256).cuda()
    ours = bench.CharLM(etorch.LSTM, vocab=vocab, embed=32, hidden=256, strategy=strategy).cuda()
    ours.load_state_dict(theirs.state_dict())
    with skip_if_not_supported(strategy):
        losses = {name: bench.train(model, batches, "cuda")["losses"]
                  for name, model in (("ecornn", ours), ("torch", theirs))}
    final = {name: float(np.mean(run[-15:])) for name, run in losses.items()}
    noise = float(np.std(losses["torch"][-15:]))
    assert final["torch"] < 0.6 * math.log(vocab), final
    assert abs(final["ecornn"] - final["torch"]) <= max(noise, 0.02), (final, noise)
