"""`persistent` v47 without a GPU: batch padding. layouts.batch's transforms; which calls run at a padded batch
(persistent.run_config) on H100 and H200 properties, and which never do (even batches, issue 5's cells, forced
variants, the flag off); a batch that plans only padded; the planner's prediction at the padded batch; the engine
through the fragment emulation at padded batches (forward, states, every gradient, dropout) within 1e-2 / 1e-5 of
float64; no x by reference for padded replays."""
import numpy as np
import pytest

from ecornn import LayerWeights, LSTMConfig, NotSupported, planner
from ecornn.devices import KNOWN
from ecornn.engines import persistent, reference
from ecornn.engines import persistent_capacity as cap
from ecornn.layouts import first_columns, pad_columns
from tests.helpers import random_problem, rel_err
from tests.test_persistent_mma_emulated import HALF_TOL, _dtype, cpu_engine  # noqa: F401 (fixture)

DEVICES = {"h100": cap.h100_properties, "h200": KNOWN["h200"].as_dict}


@pytest.fixture(params=sorted(DEVICES))
def on_device(request, monkeypatch):
    monkeypatch.setattr(persistent, "_props", DEVICES[request.param])
    return request.param


def _config(dtype, hidden, batch, layers=1, bidirectional=False, steps=256):
    return LSTMConfig(hidden, hidden, layers, bidirectional, dtype, batch, steps)


# ---- layouts.batch ------------------------------------------------------------------------------
@pytest.mark.parametrize("shape, batch", [((5, 3, 7), 4), ((2, 1, 9), 8), ((4, 6, 2), 6)])
def test_pad_columns_adds_zero_columns_and_first_columns_takes_them_off(rng, shape, batch):
    a = rng.standard_normal(shape).astype(np.float32)
    padded = pad_columns(a, batch)
    assert padded.shape == (shape[0], batch, shape[2]) and padded.flags.c_contiguous
    assert np.array_equal(padded[:, :shape[1]], a) and not padded[:, shape[1]:].any()
    back = first_columns(padded, shape[1])
    assert back.flags.c_contiguous and np.array_equal(back, a)
    out = np.full_like(a, np.nan)
    assert first_columns(padded, shape[1], out=out) is out and np.array_equal(out, a)


def test_pad_columns_keeps_the_dtype(rng):
    a = rng.standard_normal((3, 5, 4)).astype(np.float16)
    assert pad_columns(a, 6).dtype == np.float16


def test_padding_to_fewer_columns_names_what_came():
    with pytest.raises(ValueError, match="at least 5 columns, got 4"):
        pad_columns(np.zeros((2, 5, 3)), 4)
    with pytest.raises(ValueError, match="at most 5 columns, got 6"):
        first_columns(np.zeros((2, 5, 3)), 6)


# ---- which calls run padded ---------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("hidden", [256, 512, 1024])
@pytest.mark.parametrize("batch", [9, 11, 13, 15])
def test_odd_16bit_batches_from_9_run_as_the_next_even_one_in_two_groups(on_device, dtype, hidden, batch):
    for training in (False, True):
        config = _config(dtype, hidden, batch)
        wide = persistent.run_config(config, training)
        assert wide == config.replace(batch=batch + 1)
        for plan in persistent.plans_for(config, training).values():
            assert (plan.kind, plan.batch_groups, plan.batch) == ("mma", 2, (batch + 1) // 2)


@pytest.mark.parametrize("hidden, batch, groups", [(256, 7, 4), (512, 5, 3), (512, 11, 3), (384, 3, 2)])
def test_odd_fp32_split_batches_run_padded_in_groups(on_device, hidden, batch, groups):
    forward = persistent.plans_for(_config("float32", hidden, batch))["forward"]
    assert (forward.kind, forward.parts, forward.batch_groups, forward.batch * forward.batch_groups) == \
        ("mma", 2, groups, batch + 1)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("hidden", [256, 512, 768, 1024, 1536])
def test_even_batches_and_b1_never_pad(on_device, dtype, hidden):
    for batch in (1, 2, 4, 6, 8, 10, 12, 16, 24, 32):
        for training in (False, True):
            config = _config(dtype, hidden, batch)
            assert persistent.run_config(config, training) is config


@pytest.mark.parametrize("dtype, hidden, batch", [("float32", 256, 1), ("float32", 512, 4), ("float32", 1024, 4),
                                                  ("float32", 1024, 8), ("bfloat16", 1024, 4), ("float16", 1024, 8),
                                                  ("float16", 1024, 16), ("bfloat16", 2048, 4)])
def test_issue_5_cells_keep_their_plans(on_device, dtype, hidden, batch):
    for training in (False, True):
        config = _config(dtype, hidden, batch)
        assert persistent.run_config(config, training) is config


def test_no_padding_where_the_groups_do_not_rise(on_device):
    """fp32 H=1024 B=9: B=10 is one clustered group too; fp16 H=1024 B=3: one group either way (inference)."""
    for config in (_config("float32", 1024, 9), _config("float16", 1024, 3), _config("float32", 1536, 5)):
        assert persistent.run_config(config, False) is config


def test_forced_variants_and_the_flag_off_never_pad(on_device, monkeypatch):
    config = _config("float16", 1024, 13)
    assert persistent.run_config(config, False, "mma") is config
    assert persistent.plans_for(config, False, "mma")["forward"].batch_groups == 1
    monkeypatch.setattr(persistent, "BATCH_PADDING", False)
    assert persistent.run_config(config) is config


def test_a_training_batch_that_plans_only_padded(on_device, monkeypatch):
    """fp16 H=1024 B=27: its backward's vectors do not fit beside the weights in one group; B=28 in two groups does."""
    config = _config("float16", 1024, 27)
    persistent.check(config, training=True)
    assert persistent.run_config(config, True).batch == 28
    monkeypatch.setattr(persistent, "BATCH_PADDING", False)
    with pytest.raises(NotSupported):
        persistent.check(config, training=True)


def test_the_padding_is_part_of_the_graph_mode(monkeypatch):
    padded = persistent._graph_mode("auto")
    monkeypatch.setattr(persistent, "BATCH_PADDING", False)
    assert persistent._graph_mode("auto") != padded


# ---- the planner ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype, hidden, batch, training", [("float16", 1024, 13, False), ("float16", 1024, 27, True),
                                                            ("float32", 512, 11, True), ("bfloat16", 256, 9, False)])
def test_the_planner_predicts_at_the_padded_batch(dtype, hidden, batch, training):
    config = _config(dtype, hidden, batch)
    chosen = planner.plan(config, device=KNOWN["h200"], training=training)
    assert chosen.strategy == "persistent" and chosen.kernel_config["padded_batch"] == batch + 1
    wide = planner.plan(config.replace(batch=batch + 1), device=KNOWN["h200"], training=training)
    assert chosen.predicted_us_per_step == pytest.approx(wide.predicted_us_per_step)


def test_the_planner_records_no_padding_for_even_batches():
    chosen = planner.plan(_config("float16", 1024, 12), device=KNOWN["h200"])
    assert "padded_batch" not in chosen.kernel_config


# ---- the engine through the emulation ---------------------------------------------------------------
def _train_and_compare(engine, rng, config, dropout=0.0):
    weights, x, h0, c0 = random_problem(rng, config)
    cast = lambda a: np.asarray(a, np.float32).astype(_dtype(config.dtype))  # noqa: E731
    weights = [LayerWeights(*(cast(a) for a in w)) for w in weights]
    x, h0, c0 = (cast(a) for a in (x, h0, c0))
    dy = rng.standard_normal(config.output_shape).astype(np.float32)
    dh, dc = (rng.standard_normal(config.state_shape).astype(np.float32) for _ in range(2))
    got = engine.forward(config, x, weights, h0, c0, training=True, dropout=dropout, rng=np.random.default_rng(5))
    assert got[3].caller_batch == config.batch and got[3].config.batch == config.batch + 1
    got_grads = engine.backward(got[3], dy, dh, dc)
    f64 = lambda a: np.asarray(a, np.float32).astype(np.float64)  # noqa: E731
    w64 = [LayerWeights(*(f64(a) for a in w)) for w in weights]
    want = reference.forward(config.replace(dtype="float64"), f64(x), w64, f64(h0), f64(c0), training=True,
                             dropout=dropout, rng=np.random.default_rng(5))
    want_grads = reference.backward(want[3], dy.astype(np.float64), dh.astype(np.float64), dc.astype(np.float64))
    pairs = list(zip(["y", "hT", "cT"], got[:3], want[:3])) + list(zip(["dx", "dh0", "dc0"], got_grads[:3],
                                                                        want_grads[:3]))
    pairs += [(f"dW[{i}]", g, w) for i, (gw, ww) in enumerate(zip(got_grads[3], want_grads[3])) for g, w in zip(gw, ww)]
    for name, g, w in pairs:
        assert g.shape == w.shape, name
    errors = {n: rel_err(f64(g), w) for n, g, w in pairs}
    return max(errors.values()), errors


@pytest.mark.parametrize("dtype, inp, hidden, layers, bidir, batch, steps, dropout", [
    ("float16", 64, 96, 1, False, 11, 6, 0.0), ("bfloat16", 40, 72, 2, True, 9, 4, 0.0),
    ("float16", 48, 200, 2, False, 13, 3, 0.4), ("bfloat16", 24, 256, 1, False, 7, 5, 0.0)])
def test_engine_at_a_padded_batch_matches_float64(cpu_engine, rng, dtype, inp, hidden, layers, bidir, batch,  # noqa: F811
                                                   steps, dropout):
    """Dropout's masks are drawn for the caller's columns, as the reference draws them."""
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    assert persistent.run_config(config, True).batch == batch + 1
    worst, errors = _train_and_compare(cpu_engine, rng, config, dropout)
    assert worst <= HALF_TOL, errors


def test_a_padded_replay_copies_x(cpu_engine):  # noqa: F811
    """The kernel reads the padded copy of x, never the caller's x by reference (v21)."""
    config = _config("float16", 1024, 13, steps=4)
    x = np.zeros(config.input_shape, np.float16)
    assert not persistent.kernel_reads_x(config, x)
    assert persistent.kernel_reads_x(config.replace(batch=14), x)


def test_the_planner_pads_once_as_the_engine_does(monkeypatch):
    """A padded batch is not padded again, even where the rule would pad it (here: a stub that pads every batch)."""
    from ecornn.engines import persistent as engine
    real = engine.padded_config
    monkeypatch.setattr(engine, "padded_config", lambda props, config, training=False: real(
        props, config, training) if config.batch % 2 else config.replace(batch=config.batch + 2))
    kernel = planner.persistent_fit(_config("float16", 1024, 13), KNOWN["h200"])
    assert kernel["padded_batch"] == 14
