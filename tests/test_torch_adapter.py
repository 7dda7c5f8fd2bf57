"""ecornn.torch.LSTM against torch.nn.LSTM on the CPU (reference engine)."""
import copy
import importlib.util
import json
import math
import pickle
import warnings
import weakref
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("ml_dtypes")  # bfloat16 host arrays

import ecornn.torch as etorch  # noqa: E402
from ecornn import ConfigError, NotSupported, lstm_forward  # noqa: E402
from ecornn.arrays import gpu_available  # noqa: E402

from .helpers import rel_err  # noqa: E402

TOL = {torch.float32: 1e-5, torch.float64: 1e-10, torch.bfloat16: 1e-2, torch.float16: 1e-2}
BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_torch_train.py"


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_torch_train", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def both_modules(rng, dtype=torch.float32, device="cpu", **kwargs):
    """(ecornn LSTM, torch.nn.LSTM) with the same random weights; torch's computes in fp32 for
    16-bit dtypes (torch's own bf16 CPU path rounds h and c every step and is the less exact)."""
    torch.manual_seed(int(rng.integers(2**31)))
    ours = etorch.LSTM(**kwargs).to(device, dtype)
    want_dtype = torch.float64 if dtype == torch.float64 else torch.float32
    torch_kwargs = {k: v for k, v in kwargs.items() if k != "strategy"}
    theirs = torch.nn.LSTM(**torch_kwargs).to(device, want_dtype)
    theirs.load_state_dict(ours.state_dict())
    return ours, theirs


def random_tensor(rng, shape, dtype, device="cpu"):
    return torch.from_numpy(rng.standard_normal(shape)).to(device, dtype)


def run_and_grad(module, x, state, upstream):
    """Outputs and every gradient of sum(y*gy) + sum(h*gh) + sum(c*gc)."""
    x = x.detach().clone().requires_grad_()
    state = tuple(s.detach().clone().requires_grad_() for s in state) if state else None
    module.zero_grad(set_to_none=True)
    y, (h, c) = module(x, state)
    loss = sum((a.to(g.dtype) * g).sum() for a, g in zip((y, h, c), upstream) if g is not None)
    loss.backward()
    state_grads = [s.grad for s in state] if state else []
    return [y, h, c, x.grad] + state_grads + [p.grad for p in module.parameters()]


def assert_close(got, want, tol):
    assert len(got) == len(want)
    for index, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == got[0].dtype, index
        err = rel_err(g.detach().double().cpu().numpy(), w.detach().double().cpu().numpy())
        assert err <= tol, f"tensor #{index}: relative error {err:.2e} > {tol:.0e}"


CASES = [  # (num_layers, bidirectional, batch_first, with_state)
    (1, False, False, False), (1, False, True, True), (2, True, False, True),
    (2, True, True, False), (3, False, True, True),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64],
                         ids=str)
@pytest.mark.parametrize("layers, bidirectional, batch_first, with_state", CASES)
def test_matches_torch(rng, dtype, layers, bidirectional, batch_first, with_state):
    input_size, hidden = int(rng.integers(1, 12)), int(rng.integers(1, 12))
    batch, steps = int(rng.integers(1, 5)), int(rng.integers(1, 9))
    ours, theirs = both_modules(rng, dtype, input_size=input_size, hidden_size=hidden,
                                num_layers=layers, bidirectional=bidirectional,
                                batch_first=batch_first)
    directions = 2 if bidirectional else 1
    x_shape = (batch, steps, input_size) if batch_first else (steps, batch, input_size)
    y_shape = x_shape[:2] + (directions * hidden,)
    state_shape = (layers * directions, batch, hidden)
    x = random_tensor(rng, x_shape, dtype)
    state = tuple(random_tensor(rng, state_shape, dtype) for _ in range(2)) if with_state else None
    want_dtype = theirs.weight_ih_l0.dtype
    # representable in dtype, so both sides see the same upstream gradients
    upstream = [random_tensor(rng, s, dtype).to(want_dtype)
                for s in (y_shape, state_shape, state_shape)]

    got = run_and_grad(ours, x, state, upstream)
    want = run_and_grad(theirs, x.to(want_dtype), state and tuple(s.to(want_dtype) for s in state),
                        upstream)
    assert all(t.dtype == dtype for t in got)
    assert got[0].shape == y_shape and got[1].shape == state_shape
    assert_close(got, want, TOL[dtype])


@pytest.mark.parametrize("used", ["output", "h_n", "c_n"])
def test_gradient_through_one_result(rng, used):
    """Unused results reach backward as None (no zero tensors are made by autograd)."""
    ours, theirs = both_modules(rng, input_size=4, hidden_size=5, num_layers=2, bidirectional=True)
    x = random_tensor(rng, (6, 3, 4), torch.float32)
    shapes = {"output": (6, 3, 10), "h_n": (4, 3, 5), "c_n": (4, 3, 5)}
    upstream = [random_tensor(rng, shapes[name], torch.float32) if name == used else None
                for name in ("output", "h_n", "c_n")]
    got, want = run_and_grad(ours, x, None, upstream), run_and_grad(theirs, x, None, upstream)
    assert_close(got, want, 1e-5)


def test_unbatched_input(rng):
    ours, theirs = both_modules(rng, input_size=3, hidden_size=4, num_layers=2, bidirectional=True,
                                batch_first=True)
    x = random_tensor(rng, (5, 3), torch.float32)
    state = tuple(random_tensor(rng, (4, 4), torch.float32) for _ in range(2))
    upstream = [random_tensor(rng, s, torch.float32) for s in ((5, 8), (4, 4), (4, 4))]
    got = run_and_grad(ours, x, state, upstream)
    assert got[0].shape == (5, 8) and got[1].shape == (4, 4)
    assert_close(got, run_and_grad(theirs, x, state, upstream), 1e-5)


def test_inference_without_grad_matches(rng):
    ours, theirs = both_modules(rng, input_size=3, hidden_size=6, num_layers=2)
    x = random_tensor(rng, (7, 2, 3), torch.float32)
    with torch.no_grad():
        got, want = ours(x), theirs(x)
    assert not got[0].requires_grad
    assert_close([got[0], *got[1]], [want[0], *want[1]], 1e-5)
    assert ours.last_plan[0] == "reference"


def test_same_parameters_and_init_as_torch():
    kwargs = dict(input_size=5, hidden_size=7, num_layers=2, bidirectional=True)
    torch.manual_seed(3)
    theirs = torch.nn.LSTM(**kwargs)
    torch.manual_seed(3)
    ours = etorch.LSTM(**kwargs)
    want, got = theirs.state_dict(), ours.state_dict()
    assert list(got) == list(want)
    for name in want:
        assert got[name].shape == want[name].shape and torch.equal(got[name], want[name]), name
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]


def test_state_dict_round_trips_both_ways(rng):
    kwargs = dict(input_size=4, hidden_size=6, num_layers=2, bidirectional=True, batch_first=True)
    theirs, ours = torch.nn.LSTM(**kwargs), etorch.LSTM(**kwargs)
    ours.load_state_dict(theirs.state_dict())  # strict: same keys and shapes
    x = random_tensor(rng, (2, 5, 4), torch.float32)
    with torch.no_grad():
        assert rel_err(ours(x)[0].numpy(), theirs(x)[0].numpy()) <= 1e-5
    fresh = etorch.LSTM(**kwargs)
    theirs.load_state_dict(fresh.state_dict())
    with torch.no_grad():
        assert rel_err(fresh(x)[0].numpy(), theirs(x)[0].numpy()) <= 1e-5


def test_pickle_and_deepcopy(rng):
    module = etorch.LSTM(3, 5, num_layers=2, bidirectional=True)
    x = random_tensor(rng, (4, 2, 3), torch.float32)
    with torch.no_grad():
        want = module(x)[0]
        for twin in (copy.deepcopy(module), pickle.loads(pickle.dumps(module))):
            assert torch.equal(twin(x)[0], want)


def test_dropout_is_reproducible_and_off_in_eval(rng):
    ours, theirs = both_modules(rng, input_size=4, hidden_size=8, num_layers=3, dropout=0.5)
    x = random_tensor(rng, (6, 3, 4), torch.float32)
    outputs = []
    for seed in (1, 1, 2):
        torch.manual_seed(seed)
        outputs.append(ours(x)[0].detach())
    assert torch.equal(outputs[0], outputs[1])
    assert not torch.allclose(outputs[0], outputs[2])
    ours.eval(), theirs.eval()
    with torch.no_grad():
        assert rel_err(ours(x)[0].numpy(), theirs(x)[0].numpy()) <= 1e-5
        assert not torch.allclose(ours(x)[0], outputs[0])


def test_dropout_gradients_pass_gradcheck(rng):
    """float64 finite differences with the dropout masks pinned by torch.manual_seed."""
    torch.manual_seed(int(rng.integers(2**31)))
    module = etorch.LSTM(2, 3, num_layers=2, bidirectional=True, dropout=0.4).double()
    params = list(module.parameters())
    x = random_tensor(rng, (3, 2, 2), torch.float64).requires_grad_()
    state = [random_tensor(rng, (4, 2, 3), torch.float64).requires_grad_() for _ in range(2)]

    def f(x, h0, c0, *weights):
        torch.manual_seed(0)
        names = [name for name, _ in module.named_parameters()]
        y, (h, c) = torch.func.functional_call(module, dict(zip(names, weights)), (x, (h0, c0)))
        return y, h, c

    assert torch.autograd.gradcheck(f, (x, *state, *params), eps=1e-6, atol=1e-6, rtol=1e-4)


def test_in_place_change_before_backward_is_reported(rng):
    module = etorch.LSTM(3, 4)
    y, _ = module(random_tensor(rng, (5, 2, 3), torch.float32))
    with torch.no_grad():
        module.weight_hh_l0.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_reserve_is_freed_after_backward_unless_retained(rng, monkeypatch):
    reserves = []

    def recording_forward(*args, **kwargs):
        out = lstm_forward(*args, **kwargs)
        reserves.append(weakref.ref(out.reserve))
        return out

    monkeypatch.setattr(etorch, "lstm_forward", recording_forward)
    y, _ = etorch.LSTM(3, 4)(random_tensor(rng, (5, 2, 3), torch.float32))
    y.sum().backward(retain_graph=True)
    assert reserves[-1]() is not None
    y.sum().backward()
    assert reserves[-1]() is None


def test_unsupported_options_raise_not_supported():
    with pytest.raises(NotSupported, match="bias=False"):
        etorch.LSTM(3, 4, bias=False)
    with pytest.raises(NotSupported, match="proj_size"):
        etorch.LSTM(3, 4, proj_size=2)
    module = etorch.LSTM(3, 4)
    packed = torch.nn.utils.rnn.pack_sequence([torch.randn(3, 3), torch.randn(2, 3)])
    with pytest.raises(NotSupported, match="PackedSequence"):
        module(packed)


@pytest.mark.parametrize("kwargs, match", [
    (dict(hidden_size=0), "hidden_size: expected a positive int, got 0"),
    (dict(dropout=1.0), r"dropout: expected a probability in \[0, 1\), got 1.0"),
    (dict(strategy="cudnn"), "strategy: expected one of"),
    (dict(dtype=torch.int32), "dtype: expected one of"),
])
def test_bad_constructor_arguments(kwargs, match):
    args = dict(input_size=3, hidden_size=4) | kwargs
    with pytest.raises(ConfigError, match=match):
        etorch.LSTM(**args)


def test_dropout_with_one_layer_warns_like_torch():
    with pytest.warns(UserWarning, match="num_layers greater than 1"):
        etorch.LSTM(3, 4, dropout=0.2)


@pytest.mark.parametrize("make_input, state, match", [
    (lambda: torch.randn(2, 3, 5), None, "input feature size .*: expected 3, got 5"),
    (lambda: torch.randn(2, 3, 4, 3), None, "input rank: expected 3 .* got 4"),
    (lambda: torch.randn(2, 3, 3).double(), None, "input dtype: expected torch.float32"),
    (lambda: torch.randn(2, 3, 3), (torch.zeros(1, 2, 4), torch.zeros(1, 3, 4)),
     r"h0 shape: expected \(1, 3, 4\), got \(1, 2, 4\)"),
    (lambda: torch.randn(2, 3), (torch.zeros(1, 1, 4), torch.zeros(1, 1, 4)),
     r"h0 shape: expected \(1, 4\), got \(1, 1, 4\)"),
    (lambda: torch.randn(2, 3, 3), torch.zeros(1, 3, 4), "hx: expected a tuple"),
])
def test_bad_inputs_name_expected_and_got(make_input, state, match):
    module = etorch.LSTM(3, 4)
    with pytest.raises(ConfigError, match=match):
        module(make_input(), state)


@pytest.mark.skipif(gpu_available(), reason="checks the no-GPU error")
def test_gpu_strategy_without_gpu_is_not_supported():
    module = etorch.LSTM(3, 4, strategy="fused")
    with pytest.raises(NotSupported, match="fused"):
        module(torch.randn(2, 1, 3))


def test_bfloat16_tensors_cross_without_copies():
    t = torch.randn(4, 5).to(torch.bfloat16)
    a = etorch.to_array(t)
    assert str(a.dtype) == "bfloat16" and a.ctypes.data == t.data_ptr()
    back = etorch.to_tensor(a)
    assert back.dtype == torch.bfloat16 and back.data_ptr() == t.data_ptr()


def char_lm(lstm_class, vocab):
    return load_bench().CharLM(lstm_class, vocab=vocab, embed=8, hidden=24, layers=2)


def test_torch_compile_graph_breaks_around_the_layer(rng):
    """Dynamo runs ecornn.torch.LSTM eagerly (torch.compiler.disable); the rest compiles."""
    torch._dynamo.reset()
    torch.manual_seed(int(rng.integers(2**31)))
    model = char_lm(etorch.LSTM, vocab=11)
    tokens = torch.from_numpy(rng.integers(0, 11, (3, 7)))
    want = model(tokens)
    compiled = torch.compile(model, backend="aot_eager")
    got = compiled(tokens)
    assert rel_err(got.detach().numpy(), want.detach().numpy()) <= 1e-6
    got.square().sum().backward()
    compiled_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    want.square().sum().backward()
    for g, w in zip(compiled_grads, (p.grad for p in model.parameters())):
        assert rel_err(g.numpy(), w.numpy()) <= 1e-5
    with pytest.raises(Exception, match="(?i)disable|skip"):
        torch._dynamo.reset()
        torch.compile(model, backend="aot_eager", fullgraph=True)(tokens)
    torch._dynamo.reset()


@pytest.mark.slow
def test_char_lm_trains_like_torch():
    """100 Adam steps of a 2-layer char LM: both reach the same loss, well below uniform."""
    bench = load_bench()
    ids, vocab = bench.encode(bench.make_corpus(20_000, seed=1))
    batches = bench.make_batches(ids, steps=100, batch=8, seq_len=24, seed=1)
    torch.manual_seed(0)
    theirs = bench.CharLM(torch.nn.LSTM, vocab=vocab, embed=12, hidden=32, layers=2)
    ours = bench.CharLM(etorch.LSTM, vocab=vocab, embed=12, hidden=32, layers=2)
    ours.load_state_dict(theirs.state_dict())
    losses = {name: bench.train(model, batches, "cpu", lr=1e-2)["losses"]
              for name, model in (("torch", theirs), ("ecornn", ours))}
    final = {name: float(np.mean(run[-10:])) for name, run in losses.items()}
    noise = float(np.std(losses["torch"][-10:]))
    assert final["torch"] < 0.75 * math.log(vocab), final
    assert abs(final["ecornn"] - final["torch"]) <= max(noise, 0.02), (final, noise)


def test_benchmark_script_runs_on_cpu(tmp_path):
    bench = load_bench()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert bench.main(["--out", str(tmp_path), "--device", "cpu", "--steps", "8",
                           "--hidden", "8", "--embed", "4", "--batches", "2", "--seq-len", "6",
                           "--corpus-chars", "2000", "--dtypes", "float32,bfloat16"]) == 0
    result = json.loads((tmp_path / "bench_torch_train.json").read_text())
    assert [r["dtype"] for r in result["records"]] == ["float32", "bfloat16"]
    assert all(r["ecornn"]["step_ms"] > 0 for r in result["records"])
    assert "| float32 |" in (tmp_path / "bench_torch_train.md").read_text()
