"""The benchmarks' shared command line and row loop (benchmarks/bench_persistent.py), without a GPU."""
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_persistent as bp  # noqa: E402


def test_bench_args_creates_the_output_directory_and_takes_extra_options(tmp_path):
    out_dir = tmp_path / "a" / "b"
    args, out = bp.bench_args([str(out_dir), "--iterations", "3"], repeats=7,
                              configure=lambda p: p.add_argument("--iterations", type=int, default=5))
    assert out == out_dir and out.is_dir()
    assert (args.repeats, args.iterations) == (7, 3)


def test_measure_rows_saves_after_every_row_and_prints_the_table(tmp_path, capsys):
    seen = []

    def measure(name, value):
        if seen:   # the first row is on disk before the second is measured
            assert json.loads((tmp_path / "t.json").read_text())["rows"] == seen
        seen.append({"name": name, "value": value})
        return seen[-1]

    def table(rows):
        return "\n".join(f"| {r['name']} | {r['value']} |" for r in rows)
    rows = bp.measure_rows(tmp_path, "t", {"device": "none"}, [("a", 1), ("b", 2)], measure, table)
    assert rows == [{"name": "a", "value": 1}, {"name": "b", "value": 2}]
    saved = json.loads((tmp_path / "t.json").read_text())
    assert saved == {"meta": {"device": "none"}, "rows": rows}
    assert (tmp_path / "t.md").read_text().endswith("| a | 1 |\n| b | 2 |\n")
    assert capsys.readouterr().out == "| a | 1 |\n| b | 2 |\n"


def test_ab_bench_main_passes_repeats_and_the_order_flag(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bp, "bench_meta", lambda: {"device": "none"})
    calls = []

    def row(dtype, hidden, batch, repeats, first):
        calls.append((dtype, hidden, batch, repeats, first))
        return {"dtype": dtype}
    bp.ab_bench_main([str(tmp_path), "--repeats", "3", "--rows", "1", "--gemm-first"],
                     [("float16", 8, 1), ("bfloat16", 16, 2)], row, lambda rows: str(len(rows)), "x",
                     "--gemm-first", "help")
    assert calls == [("float16", 8, 1, 3, True)]
    assert json.loads((tmp_path / "x.json").read_text())["rows"] == [{"dtype": "float16"}]


def test_split_benches_set_each_modes_flags_and_restore_the_defaults(monkeypatch):
    """bench_persistent_v13.measure (v13, v14; through ab_modes.measure_modes): each mode runs under its
    engine flags, "split" once more with the other exchange, training only for train_modes; the
    defaults come back even when a mode fails."""
    import ab_modes
    import bench_persistent_v13 as v13
    import bench_persistent_v14 as v14
    from ecornn.engines import persistent
    seen = []

    def time_mode(config, weights, x, h0, c0, repeats, train=True):
        seen.append((persistent.FP32_TENSOR_CORES, persistent.PAIRED_SPLIT, persistent.TAGGED_EXCHANGE, train))
        return {"tagged": False}
    monkeypatch.setattr(ab_modes, "time_mode", time_mode)
    monkeypatch.setattr(v13, "_problem", lambda *a, **k: (None,) * 5)
    monkeypatch.setattr(persistent, "plans_for", lambda config: {"forward": type("P", (), {"kind": "mma"})})
    out = v13.measure("float32", 64, 4, 2, modes=v14.MODES, train_modes=("split", "ffma"))
    assert seen == [(True, False, "auto", False), (True, True, "auto", True), (True, True, True, False),
                    (False, True, "auto", True)]
    assert out["auto_split"] and set(out) >= {"unpaired_tagged", "split_tagged", "split_other_tagged", "ffma_tagged"}
    assert (persistent.FP32_TENSOR_CORES, persistent.PAIRED_SPLIT, persistent.TAGGED_EXCHANGE) == ("auto", True, "auto")

    def failing(*a, **k):
        raise RuntimeError("no device")
    monkeypatch.setattr(ab_modes, "time_mode", failing)
    with pytest.raises(RuntimeError, match="no device"):
        v13.measure("float32", 64, 4, 2, modes=v14.MODES)
    assert (persistent.FP32_TENSOR_CORES, persistent.PAIRED_SPLIT, persistent.TAGGED_EXCHANGE) == ("auto", True, "auto")


def test_ab_table_rows_errors_and_cudnn_ratios():
    head = "| H | B | a | fwd | train |"
    rows = [{"hidden": 8, "batch": 2, "cudnn_us": 6.0, "cudnn_train_ms": 3.0}, {"hidden": 4, "batch": 1, "error": "x" * 300}]
    table = bp.ab_table(rows, head, lambda r: ["a"] + bp.cudnn_ratios(r, 2.0, None))
    assert table.splitlines() == [head, "|---|---|---|---|---|", "| 8 | 2 | a | 3.00x | -x |",
                                  "| 4 | 1 | error: " + "x" * 200 + " |"]
    with_dtype = bp.ab_table([{"dtype": "float16", **rows[0]}], "| d | H | B | a |", lambda r: ["a"],
                             lead=("dtype", "hidden", "batch"))
    assert with_dtype.splitlines()[-1] == "| float16 | 8 | 2 | a |"


def test_projection_bench_times_both_modes_under_their_flags(monkeypatch):
    """bench_persistent_v12.measure: in-kernel and GEMM projection, each under its flag, the GEMM
    first with gemm_first; the flag back at "auto" after."""
    import ab_modes
    import bench_persistent_v12 as v12
    from ecornn.engines import persistent
    seen = []

    def time_mode(config, weights, x, h0, c0, repeats, train=True):
        seen.append(persistent.IN_KERNEL_PROJECTION)
        return {"plan": "input projection in the kernel" if persistent.IN_KERNEL_PROJECTION else "GEMM", "kernel_us": 1.0}
    monkeypatch.setattr(ab_modes, "time_mode", time_mode)
    monkeypatch.setattr(v12, "_problem", lambda *a, **k: (None,) * 5)
    monkeypatch.setattr(persistent, "plans_for", lambda config, training: {"forward": None})
    monkeypatch.setattr(persistent, "_final", lambda plan: type("P", (), {"in_kernel_projection": True}))
    out = v12.measure("bfloat16", 64, 4, 2, gemm_first=True)
    assert seen == [False, True] and persistent.IN_KERNEL_PROJECTION == "auto"
    assert out["auto_in_kernel"] and out["projection_fits"] and out["gemm_kernel_us"] == out["in_kernel_kernel_us"] == 1.0


def test_v16_measure_times_both_modes_under_their_flags(monkeypatch):
    """bench_persistent_v16.measure: the delay and no-delay modes, "no_delay" first unless delay_first;
    POLL_DELAY back at True after."""
    import ab_modes
    import bench_persistent_v16 as v16
    from ecornn.engines import persistent
    seen = []

    def time_mode(config, weights, x, h0, c0, repeats, train=True):
        seen.append(persistent.POLL_DELAY)
        return {"kernel_us": 2.0 if persistent.POLL_DELAY else 3.0}
    monkeypatch.setattr(ab_modes, "time_mode", time_mode)
    monkeypatch.setattr(v16, "_problem", lambda *a, **k: (None,) * 5)
    out = v16.measure("float16", 64, 1, 2)
    assert seen == [False, True] and persistent.POLL_DELAY is True
    assert out["delay_kernel_us"] == 2.0 and out["no_delay_kernel_us"] == 3.0
    seen.clear()
    v16.measure("float16", 64, 1, 2, delay_first=True)
    assert seen == [True, False]
    assert "| float16 | 64 | 1 | - | - | 2.00 | 3.00 |" in v16.markdown([{"dtype": "float16", "hidden": 64, "batch": 1, **out}])


def test_profile_replay_sets_and_restores_each_modes_flags():
    """profile_replay._set_mode: the v17/v20/v21 flags live in two modules; {} restores every default."""
    import profile_replay as pr
    from ecornn.engines import persistent, persistent_graph
    try:
        pr._set_mode(pr.V17)
        assert not persistent_graph.INPUTS_BY_REFERENCE and persistent_graph.COPY_KERNEL
        persistent.DIRECT_16BIT_INPUT = False
        pr._set_mode(pr.MODES["v20"])
        assert persistent_graph.INPUTS_BY_REFERENCE and persistent_graph.REPLAY_ON_CALLER_STREAM
        assert persistent.DIRECT_16BIT_INPUT and not persistent_graph.KERNEL_READS_X
        pr._set_mode(pr.MODES["v21"])
        assert persistent_graph.INPUTS_BY_REFERENCE and persistent_graph.KERNEL_READS_X
    finally:
        pr._set_mode({})
    assert persistent_graph.REPLAY_ON_CALLER_STREAM and persistent_graph.COPY_KERNEL
    assert persistent_graph.INPUTS_BY_REFERENCE and persistent_graph.KERNEL_READS_X
    assert persistent.DIRECT_16BIT_INPUT and persistent.ONE_OUTPUT_BUFFER and persistent.MIN_3XTF32_FLOPS == 1e9
    row = {"dtype": "bfloat16", "hidden": 8, "batch": 2, "v21_kind": "mma", "v21_span_us": [512.0, 768.0],
           "v20_span_us": [1024.0, 1024.0], "kernel_gpu_us": 256.0}
    last = pr.markdown([row]).splitlines()[-1]
    assert last.startswith("| bfloat16 | 8 | 2 | mma |") and last.endswith("| 2.50 / 4.00 |")


def test_v18_bench_measures_its_rows_with_v16s_modes():
    import bench_persistent_v16 as v16
    import bench_persistent_v18 as v18
    assert v18.row is v16.row and v18.markdown is v16.markdown
    assert ("bfloat16", 2048, 4) in v18.ROWS


def test_v19_measure_times_both_register_models_and_records_each_backward_plan(monkeypatch):
    """bench_persistent_v19.measure: "v4" first unless v19_first, REGISTER_MODEL back at "v19" after,
    each mode's backward plan from its own flags; the table and the plans list."""
    import ab_modes
    import bench_persistent_v19 as v19
    from ecornn.engines import persistent
    seen = []

    def time_mode(config, weights, x, h0, c0, repeats, train=True):
        seen.append(persistent.REGISTER_MODEL)
        return {"kernel_us": 2.0 if persistent.REGISTER_MODEL == "v19" else 3.0, "plan": "fwd"}
    monkeypatch.setattr(ab_modes, "time_mode", time_mode)
    monkeypatch.setattr(v19, "_problem", lambda *a, **k: ("config",) + (None,) * 4)
    monkeypatch.setattr(v19, "backward_plan",
                        lambda config, mode, out: out.update({f"{mode}_backward_plan": persistent.REGISTER_MODEL}))
    out = v19.measure("float16", 64, 8, 2)
    assert seen == ["v4", "v19"] and persistent.REGISTER_MODEL == "v19"
    assert out["v19_kernel_us"] == 2.0 and out["v4_kernel_us"] == 3.0
    assert out["v19_backward_plan"] == "v19" and out["v4_backward_plan"] == "v4"
    seen.clear()
    v19.measure("float16", 64, 8, 2, v19_first=True)
    assert seen == ["v19", "v4"]
    table = v19.markdown([{"dtype": "float16", "hidden": 64, "batch": 8, **out}])
    assert "| float16 | 64 | 8 | - | - | 2.00 | 3.00 |" in table and "v19 fwd; v19 | v4 fwd; v4" in table


def test_a_failing_mode_leaves_the_others_timed_and_shows_in_the_table(monkeypatch):
    """ab_modes.measure_modes: one mode that fails (e.g. a plan that does not build under it) is
    recorded as {mode}_error; the other mode's numbers stay, and pair_table shows both."""
    import ab_modes
    import bench_persistent as bp
    from ecornn.engines import persistent

    def time_mode(config, weights, x, h0, c0, repeats, train=True):
        if persistent.REGISTER_MODEL == "v4":
            raise RuntimeError("spills")
        return {"graph_fwd_us": 2.0, "kernel_us": 1.5, "train_ms": 1.25}
    monkeypatch.setattr(ab_modes, "time_mode", time_mode)
    modes = {"v19": {"REGISTER_MODEL": "v19"}, "v4": {"REGISTER_MODEL": "v4"}}
    out = ab_modes.measure_modes((None,) * 5, modes, 2)
    assert out["v19_graph_fwd_us"] == 2.0 and out["v4_error"] == "RuntimeError: spills"
    assert persistent.REGISTER_MODEL == "v19"
    row = {"dtype": "float16", "hidden": 8, "batch": 1, **out}
    line = bp.pair_table([row], "v19", "v4", ("v19", "v4")).splitlines()[-1]
    assert line.startswith("| float16 | 8 | 1 | 2.00 | - | 1.50 | - |") and line.endswith("| v4 error: RuntimeError: spills |")


def test_v22_pair_bench_times_both_backward_gemm_modes(monkeypatch):
    """ab_modes.pair_bench (bench_persistent_v22): "v22" first unless the order flag, the flag back at
    its default after, each mode's numbers under its own flags, the A/B table."""
    import ab_modes
    import bench_persistent as bp
    import bench_persistent_v22 as v22
    from ecornn.engines import persistent
    seen = []

    def time_mode(config, weights, x, h0, c0, repeats, train=True):
        seen.append(persistent.FP32_BACKWARD_GEMMS)
        return {"train_ms": 3.0 if persistent.FP32_BACKWARD_GEMMS == "3xtf32" else 4.0}
    monkeypatch.setattr(ab_modes, "time_mode", time_mode)
    monkeypatch.setattr(bp, "_problem", lambda *a, **k: ("config",) + (None,) * 4)
    monkeypatch.setattr(bp, "add_cudnn", lambda entry, *a: entry)
    row = v22.row("float32", 64, 8, 2)
    assert seen == ["3xtf32", "strict"] and persistent.FP32_BACKWARD_GEMMS == "onepass"
    assert row["v22_train_ms"] == 3.0 and row["strict_train_ms"] == 4.0
    seen.clear()
    v22.row("float32", 64, 8, 2, True)
    assert seen == ["strict", "3xtf32"]
    assert "| float32 | 64 | 8 | - | - | - | - | - | 3.00 | 4.00 |" in v22.markdown([row])


def test_alternate_rounds_reverses_the_order_drops_the_warm_up_and_restores_the_flags():
    import ab_modes
    from ecornn.engines import persistent
    modes = {"cluster": {"CLUSTER_DEFAULT": True}, "grid": {"CLUSTER_DEFAULT": False}}
    calls = []

    def measure():
        calls.append(persistent.CLUSTER_DEFAULT)
        return {"fwd": len(calls), "kind": "cluster" if persistent.CLUSTER_DEFAULT else "grid"}
    out = ab_modes.alternate_rounds(modes, 2, measure)
    assert calls == [True, False, False, True, True, False]        # warm-up, then reversed, then in order
    assert out == {"cluster": {"fwd": [4, 5], "kind": ["cluster", "cluster"]},
                   "grid": {"fwd": [3, 6], "kind": ["grid", "grid"]}}
    assert persistent.CLUSTER_DEFAULT == ab_modes.ENGINE_FLAG_DEFAULTS["CLUSTER_DEFAULT"] == "auto"


@pytest.mark.parametrize("module", ["ab_v26_layers", "bench_cluster_vs_grid"])
def test_layered_benches_build_their_problem_with_the_cells_layers_and_directions(monkeypatch, module):
    import importlib
    bench = importlib.import_module(module)
    seen = []

    class Built(Exception):
        pass

    def problem(*args, **kwargs):
        seen.append((args, kwargs))
        raise Built
    monkeypatch.setattr(bp, "_problem", problem)
    with pytest.raises(Built):
        bench.time_cell(("float32", 256, 4, 2, True), 1, 1)
    assert seen == [(("float32", 256, 4), {"seed": 262, "layers": 2, "bidirectional": True})]


def test_alternate_calls_makes_one_call_per_mode_under_its_flags_then_alternates(monkeypatch):
    """v36: each mode's call is made (and run once) under its flags, then timed in alternate_rounds' order, the
    warm-up round dropped; the flags are back at their defaults after."""
    import ab_modes
    from ecornn.engines import persistent
    modes = {"chunked": {}, "strict": {"LONG_REDUCTIONS": "strict"}}
    made, timed = [], []

    def make_call():
        flag = persistent.LONG_REDUCTIONS
        made.append(flag)
        return lambda: timed.append((flag, persistent.LONG_REDUCTIONS))
    monkeypatch.setattr(ab_modes, "_median_ms", lambda fn, repeats: fn() or 2.0)
    times = ab_modes.alternate_calls(modes, make_call, 2, 5, scale=0.5)
    assert made == ["chunked", "strict"] and times == {"chunked": [1.0, 1.0], "strict": [1.0, 1.0]}
    order = [flag for flag, _ in timed[2:]]   # after the calls' first runs
    assert order == ["chunked", "strict", "strict", "chunked", "chunked", "strict"]
    assert all(flag == current for flag, current in timed)   # every call timed under its own flags
    assert persistent.LONG_REDUCTIONS == ab_modes.ENGINE_FLAG_DEFAULTS["LONG_REDUCTIONS"] == "chunked"


def test_error_time_table_has_a_row_per_cell_with_every_modes_error_and_rounds():
    import ab_modes
    rows = [{"cell": "H=8 B=1", "err": {"a": 1.5e-6, "b": 2e-5}, "t": {"a": [1.0, 3.0], "b": [2.0, 2.5, 2.0]}}]
    table = ab_modes.error_time_table(rows, ["a", "b"], {"cell": "cell"}, "err", "t", "error", "ms").splitlines()
    assert table[0] == "| cell | error a | error b | ms a (median; rounds) | ms b (median; rounds) |"
    assert table[1] == "|---|---|---|---|---|"
    assert table[2] == "| H=8 B=1 | 1.50e-06 | 2.00e-05 | 2.000 (1.00, 3.00) | 2.000 (2.00, 2.50, 2.00) |"


def test_the_chunked_bench_measures_training_and_projection_cells_under_its_modes(monkeypatch, tmp_path):
    """v36: bench_chunked_v36.measure_cells (bench_margin_v36 too): per training cell the gradients' error and
    fwd+bwd ms, per projection cell y's error and µs/step (ms x 1000 / T), the table saved after each cell."""
    import ab_modes
    import bench_chunked_v36 as chunked
    modes = {"x": {}, "y": {"LONG_REDUCTIONS": "strict"}}
    asked, saved = [], []
    monkeypatch.setattr(chunked, "errors", lambda inp, h, b, training, m: asked.append((inp, h, b, training, m))
                        or {"x": 1e-6, "y": 2e-6})
    monkeypatch.setattr(ab_modes, "alternate_calls", lambda m, make, rounds, repeats, scale=1.0: {
        mode: [scale * 2.0] * rounds for mode in m})
    monkeypatch.setattr(chunked, "save_rows", lambda out, name, meta, rows, table: saved.append((name, len(rows))))
    monkeypatch.setattr(chunked, "bench_meta", lambda: {})
    chunked.measure_cells([str(tmp_path)], "bench_test", modes, [(64, 2)], [(256, 64, 4)], rounds=2)
    assert asked == [(64, 64, 2, True, modes), (256, 64, 4, False, modes)]
    assert saved == [("bench_test", 1), ("bench_test", 2)]


def test_a_flag_the_engine_does_not_have_is_refused_not_set():
    """v53 review: a removed experiment's flag (X_BULK) set on the module would be ignored, and its A/B modes would
    time the same code; set_engine_flags refuses it and leaves the engine as it was."""
    import ab_modes
    from ecornn.engines import persistent
    with pytest.raises(ValueError, match=r"got unknown \['X_BULK'\]"):
        ab_modes.set_engine_flags({"X_BULK": 1, "INPUT_REG_K_TILES": 0})
    assert not hasattr(persistent, "X_BULK")
    assert persistent.INPUT_REG_K_TILES == ab_modes.ENGINE_FLAG_DEFAULTS["INPUT_REG_K_TILES"]
