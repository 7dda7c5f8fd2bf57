"""v38's k-tile by k-tile staging (persistent.STAGE_PER_TILE) on the GPU: the tagged forwards it applies to give
bitwise the outputs of whole-slice staging (the same mma order), stay within tolerance of float64, and rerun
bitwise; a training call with it is bitwise the plain one."""
import numpy as np
import pytest

from tests.helpers import random_problem, rel_err

pytestmark = pytest.mark.gpu
cp = pytest.importorskip("cupy")
if cp.cuda.runtime.getDeviceCount() == 0:   # pragma: no cover
    pytest.skip("no GPU", allow_module_level=True)

from ecornn import LSTMConfig, lstm_forward  # noqa: E402
from ecornn.engines import persistent  # noqa: E402
from ecornn.engines import reference  # noqa: E402

TOL = {"float32": 1e-5, "float16": 1e-2, "bfloat16": 1e-2}

# (dtype, input, hidden, batch, steps): #5's bf16 H=2048 B=4 (shared-memory k-tiles; the flag's build backs off to
# fewer register k-tiles), 16-bit tagged with the in-kernel projection, the fp32 split's words, the grouped B=16
# forward, odd sizes (k_len off the slice: lanes that poll nothing), one step
CELLS = [("bfloat16", 2048, 2048, 4, 24), ("float16", 1024, 1024, 8, 30), ("float32", 1024, 1024, 4, 40),
         ("float16", 1024, 1024, 16, 20), ("float16", 100, 1000, 3, 17), ("bfloat16", 37, 100, 3, 1),
         ("float16", 300, 512, 8, 33)]


def _forward(config, x, weights, h0, c0):
    out = lstm_forward(x, weights, h0, c0, strategy="persistent")
    assert persistent.last_kinds["forward"] == "mma"
    return [cp.asnumpy(a) for a in (out.y, out.h, out.c)]


def _reference(config, x, weights, h0, c0):
    f64 = lambda a: np.asarray(cp.asnumpy(a), np.float64)  # noqa: E731
    w64 = [type(w)(*(f64(a) for a in w)) for w in weights]
    y, h, c, _ = reference.forward(config.replace(dtype="float64"), f64(x), w64, f64(h0), f64(c0))
    return [y, h, c]


@pytest.mark.parametrize("dtype, inputs, hidden, batch, steps", CELLS)
def test_tile_staging_is_bitwise_whole_slice_staging(rng, monkeypatch, dtype, inputs, hidden, batch, steps):
    monkeypatch.setattr(persistent, "TAGGED_EXCHANGE", True)
    config = LSTMConfig(inputs, hidden, 1, False, dtype, batch, steps)
    plan = persistent.plans_for(config, False)["forward"]
    assert plan.kind == "mma" and plan.tile_staging_fits, plan
    weights, x, h0, c0 = random_problem(rng, config)
    weights = [type(w)(*(cp.asarray(a) for a in w)) for w in weights]
    x, h0, c0 = cp.asarray(x), cp.asarray(h0), cp.asarray(c0)
    whole = _forward(config, x, weights, h0, c0)
    monkeypatch.setattr(persistent, "STAGE_PER_TILE", True)
    per_tile = _forward(config, x, weights, h0, c0)
    again = _forward(config, x, weights, h0, c0)
    for name, a, b, c, want in zip(("y", "hT", "cT"), whole, per_tile, again, _reference(config, x, weights, h0, c0)):
        np.testing.assert_array_equal(a, b, err_msg=name)
        np.testing.assert_array_equal(b, c, err_msg=name)
        assert rel_err(b.astype(np.float64), want) <= TOL[dtype], name


def test_a_training_call_with_tile_staging_is_bitwise_the_plain_one(rng, monkeypatch):
    """Training forwards (saved gates and cells) take the flag; the backward keeps its staging."""
    from tests.test_persistent_gpu import _gradient_seeds, _run
    monkeypatch.setattr(persistent, "TAGGED_EXCHANGE", True)
    config = LSTMConfig(512, 512, 1, False, "float16", 8, 24)
    weights, x, h0, c0 = random_problem(rng, config)
    seeds = _gradient_seeds(rng, config, config.dtype)
    plain = _run("persistent", x, weights, h0, c0, *seeds, False)
    monkeypatch.setattr(persistent, "STAGE_PER_TILE", True)
    per_tile = _run("persistent", x, weights, h0, c0, *seeds, False)
    for a, b in zip(plain, per_tile):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
