"""Planner (CPU): feasibility on synthetic devices, explanations, explicit strategies."""
import pytest

from ecornn import LSTMConfig, NotSupported, plan
from ecornn.arrays import gpu_available
from ecornn.devices import A100, H100, SMALL_20SM, DeviceSpec

needs_no_gpu = pytest.mark.skipif(gpu_available(), reason="checks the no-GPU path")


def cfg(hidden, batch, dtype="float32", **kw):
    return LSTMConfig(hidden, hidden, dtype=dtype, batch=batch, seq_len=256, **kw)


@needs_no_gpu
def test_without_gpu_the_plan_is_the_reference():
    p = plan(cfg(512, 4))
    assert p.strategy == "reference" and "no CUDA GPU" in p.reason
    with pytest.raises(NotSupported, match="fused"):
        plan(cfg(512, 4), strategy="fused")


def test_small_batch_on_h100_is_persistent_with_reason():
    p = plan(cfg(1024, 4), device=H100)
    assert p.strategy == "persistent", p
    assert "fit on-chip" in p.reason and "µs/step" in p.reason and "fused" in p.reason
    assert p.kernel_config["blocks"] <= H100.sm_count
    assert p.predictions["persistent"] < p.predictions["fused"]


def test_large_batch_on_h100_is_fused():
    p = plan(cfg(1024, 256), device=H100)
    assert p.strategy == "fused", p
    assert p.predicted_us_per_step == p.predictions["fused"]


def test_capacity_limits_differ_by_device():
    big = cfg(1536, 4)
    assert plan(big, device=H100).strategy == "persistent"
    small = plan(big, device=SMALL_20SM)
    assert small.strategy == "fused"
    assert "persistent" in small.rejected and small.rejected["persistent"]
    assert "persistent excluded" in small.reason


def test_every_synthetic_device_gets_feasible_plans():
    for device in (H100, A100, SMALL_20SM):
        for hidden in (64, 256, 1000):
            for batch in (1, 3, 64):
                p = plan(cfg(hidden, batch), device=device)
                assert p.strategy in ("persistent", "fused")
                if p.strategy == "persistent":
                    k = p.kernel_config
                    assert k["blocks"] <= device.sm_count * k.get("blocks_per_sm", 1)


def test_explicit_strategy_that_does_not_fit_names_the_limit():
    with pytest.raises(NotSupported) as err:
        plan(cfg(4096, 4), strategy="persistent", device=H100)
    assert err.value.strategy == "persistent" and err.value.reason


def test_unknown_gpu_from_properties_is_planned():
    props = {"name": b"Imaginary GPU", "major": 8, "minor": 9, "multiProcessorCount": 46,
             "regsPerMultiprocessor": 65536, "regsPerBlock": 65536, "sharedMemPerMultiprocessor": 102400,
             "sharedMemPerBlockOptin": 101376, "maxThreadsPerMultiProcessor": 1536,
             "l2CacheSize": 50331648, "clockRate": 2_500_000, "memoryBusWidth": 256,
             "memoryClockRate": 10_501_000}
    device = DeviceSpec.from_properties(props)
    assert device.name == "Imaginary GPU" and device.sm_count == 46
    assert 600 < device.mem_bandwidth_gbs < 700
    p = plan(cfg(512, 2), device=device)
    assert p.strategy in ("persistent", "fused") and p.predicted_us_per_step > 0


def test_device_without_clock_fields_gets_known_rates():
    """CUDA 13 dropped clockRate/memoryClockRate from cudaDeviceProp: fall back to the known device."""
    from ecornn.devices import H200, with_known_rates
    props = {"name": b"NVIDIA H200", "major": 9, "minor": 0, "multiProcessorCount": 132,
             "regsPerMultiprocessor": 65536, "regsPerBlock": 65536, "sharedMemPerMultiprocessor": 233472,
             "sharedMemPerBlockOptin": 232448, "maxThreadsPerMultiProcessor": 2048, "l2CacheSize": 62914560}
    assert with_known_rates(DeviceSpec.from_properties(props), props) == H200
    unknown = dict(props, name=b"Some GPU")
    spec = with_known_rates(DeviceSpec.from_properties(unknown), unknown)
    assert spec.name == "Some GPU" and spec.clock_ghz > 0 and spec.mem_bandwidth_gbs > 0


def test_sixteen_bit_plans_use_the_tensor_core_kernel_where_it_fits():
    # H=2048 bf16: only the tensor-core kernel holds it on chip (fp32-widened tiles would need 64 MiB)
    p = plan(cfg(2048, 4, dtype="bfloat16"), device=H100)
    assert "persistent" not in p.rejected and p.predictions["persistent"] > 0
    k = p.kernel_config if p.strategy == "persistent" else None
    from ecornn.planner import persistent_fit
    fit = persistent_fit(cfg(2048, 4, dtype="bfloat16"), H100, training=True)
    assert fit.get("mma") and "tensor cores" in fit["passes"]["forward"] and "backward" in fit["passes"]
    assert k is None or k.get("mma")
    # without the tensor-core kernel the same problem does not fit: the fallback plans say so
    with pytest.raises(NotSupported, match="hidden_size=2048"):
        persistent_fit(cfg(2048, 4, dtype="bfloat16"), H100, tensor_cores=False)
    # fp32 never takes the 16-bit kernel (the split is its own family); the 20-SM GPU holds far less
    assert not persistent_fit(cfg(1024, 4), H100).get("mma")
    small = plan(cfg(2048, 4, dtype="bfloat16"), device=SMALL_20SM)
    assert small.strategy == "fused" and "persistent" in small.rejected


def test_a100_gets_tensor_core_plans_within_its_own_limits():
    from ecornn.planner import persistent_fit
    assert persistent_fit(cfg(1024, 8, dtype="float16"), A100).get("mma")
    with pytest.raises(NotSupported):
        persistent_fit(cfg(2048, 4, dtype="float16"), A100)   # 108 SMs, 164 KB: the edge is 1536


def test_live_plan_follows_the_engines_tensor_core_fallback(monkeypatch):
    """Where the tensor-core plans do not build on the device, "auto" runs the grid kernel: the live
    planner must predict that kernel, not the one the capacity model hoped for (CPU: the build and
    the device's properties are stubbed)."""
    from ecornn import planner
    from ecornn.engines import persistent, persistent_capacity as cap
    monkeypatch.setattr(persistent, "_props", cap.h100_properties)
    monkeypatch.setattr(planner, "get_engine", lambda name: persistent)
    config = cfg(512, 8, dtype="bfloat16")

    def build(plans):
        if any(p.kind == "mma" for p in plans.values()):
            raise NotSupported("persistent", "stub: the mma kernel spills")
    monkeypatch.setattr(persistent, "_build", build)
    assert persistent.runs_tensor_cores(config) is False
    fallback = planner._feasible_kernel("persistent", config, H100, True, False)
    assert not fallback.get("mma") and "tensor cores" not in fallback["passes"]["forward"]
    monkeypatch.setattr(persistent, "_build", lambda plans: None)
    assert persistent.runs_tensor_cores(config) is True
    assert planner._feasible_kernel("persistent", config, H100, True, False).get("mma")


def test_live_plan_rejects_persistent_where_no_plan_builds(monkeypatch):
    """A configuration whose plans fit the capacity model but none of whose builds (nor their fallbacks) do is
    rejected by the live planner when it would be chosen, so "auto" runs fused instead of failing in the call (CPU: the
    build, the device's properties and the fused engine's check are stubbed)."""
    from ecornn import planner
    from ecornn.engines import persistent, persistent_capacity as cap
    monkeypatch.setattr(persistent, "_props", cap.h100_properties)
    monkeypatch.setattr(planner, "get_engine", lambda name: persistent if name == "persistent" else _AnyConfig())

    def build(plans):
        raise NotSupported("persistent", "stub: every build spills past shared memory")
    monkeypatch.setattr(persistent, "_build", build)
    config = cfg(896, 6)
    planner._plan_cached.cache_clear()
    chosen = planner._plan_cached(config, "auto", True, H100, None, True)
    assert chosen.strategy == "fused" and "stub" in chosen.rejected["persistent"]
    with pytest.raises(NotSupported, match="stub"):   # asked for by name: the reason, not a fallback
        planner._plan_cached(config, "persistent", True, H100, None, True)
    planner._plan_cached.cache_clear()   # (plans are cached per call's arguments)
    monkeypatch.setattr(persistent, "_build", lambda plans: None)
    assert planner._plan_cached(config, "auto", True, H100, None, True).strategy == "persistent"
    planner._plan_cached.cache_clear()


def test_live_plan_builds_nothing_persistent_where_fused_is_chosen(monkeypatch):
    """v43: only the chosen strategy's kernels are built while planning (a call that runs fused compiles nothing
    persistent)."""
    from ecornn import planner
    from ecornn.engines import persistent, persistent_capacity as cap
    monkeypatch.setattr(persistent, "_props", cap.h100_properties)
    monkeypatch.setattr(planner, "get_engine", lambda name: persistent if name == "persistent" else _AnyConfig())
    built = []
    monkeypatch.setattr(persistent, "_build", built.append)
    monkeypatch.setattr(planner, "_predict", lambda name, *args: 1.0 if name == "fused" else 2.0)
    assert planner._plan_cached(cfg(1024, 8), "auto", False, H100, None, True).strategy == "fused"
    assert built == []
    planner._plan_cached.cache_clear()


class _AnyConfig:
    """An engine stub whose check accepts every configuration."""
    def check(self, config, training=False):
        return None


def test_fp32_split_forwards_are_predicted_by_their_own_terms():
    """Where the engine's rule runs the fp32 forward split on the tensor cores (v13/v14), the plan says
    how many mma each weight tile costs and the prediction follows the split constants; FFMA
    configurations keep the grid terms, and a training plan adds the fp32 backward."""
    import dataclasses
    from ecornn import costmodel
    from ecornn.planner import persistent_fit
    assert persistent_fit(cfg(1024, 4), H100)["split_mma"] == 2          # paired
    assert persistent_fit(cfg(1024, 16), H100)["split_mma"] == 6         # 3 mma x 2 N tiles
    assert "split_mma" not in persistent_fit(cfg(512, 2), H100)          # FFMA (the rule)
    assert persistent_fit(cfg(512, 4), H100)["split_mma"] == 4          # v41: 2 paired groups of 2, 2 mma each
    kernel = persistent_fit(cfg(896, 6), H100)                           # v43: the split, unclustered (7 units)
    assert (kernel["split_mma"], kernel["split_clusters"]) == (3, 1)
    base = costmodel.predict_persistent_us(cfg(896, 6), H100, kernel)
    slower = costmodel.predict_persistent_us(cfg(896, 6), H100, kernel, consts=dataclasses.replace(
        costmodel.DEFAULTS, split_mma_us=costmodel.DEFAULTS.split_mma_us + 1.0))
    assert slower - base == pytest.approx(3 * 0.896 ** 2)                # 3 mma x H^2 / 1e6
    clustered = persistent_fit(cfg(1024, 8), H100)                       # v43: clusters of 2, their own constants
    assert (clustered["split_mma"], clustered["split_clusters"]) == (3, 2)
    base = costmodel.predict_persistent_us(cfg(1024, 8), H100, clustered)
    for name in ("split_mma_us", "split_cluster_mma_us"):
        moved = costmodel.predict_persistent_us(cfg(1024, 8), H100, clustered,
                                                consts=dataclasses.replace(costmodel.DEFAULTS, **{name: 1.0}))
        assert moved - base == (pytest.approx(3 * 1.048576 * (1.0 - costmodel.DEFAULTS.split_cluster_mma_us))
                                if name == "split_cluster_mma_us" else 0.0)
    train = costmodel.predict_persistent_us(cfg(1024, 8), H100, persistent_fit(cfg(1024, 8), H100, True), True)
    assert train > base
    assert plan(cfg(512, 32), device=H100).strategy == "persistent"      # split; FFMA predicted slower than fused


def test_planner_follows_the_engines_fp32_tensor_core_flag(monkeypatch):
    from ecornn.engines import persistent
    from ecornn.planner import persistent_fit
    monkeypatch.setattr(persistent, "FP32_TENSOR_CORES", False)
    assert "split_mma" not in persistent_fit(cfg(1024, 8), H100)
    monkeypatch.setattr(persistent, "FP32_TENSOR_CORES", True)
    assert persistent_fit(cfg(512, 2), H100)["split_mma"] == 2          # wherever it fits


def test_in_kernel_projections_drop_the_forward_gemm_from_the_prediction():
    """v12/v15: where the forward computes x W_ih^T itself, the prediction leaves out the forward's
    projection GEMM (inference and training); the cluster kernel's inference keeps it. v48: the tensor-core
    kernel's own input product is in its step instead (costmodel.mma_forward_terms, products=2)."""
    from ecornn import costmodel
    from ecornn.planner import persistent_fit
    consts = costmodel.DEFAULTS
    for config, training in ((cfg(512, 1), False), (cfg(512, 2), True), (LSTMConfig(1024, 1024, 1, False, "bfloat16", 4, 256), True)):
        kernel = persistent_fit(config, H100, training)
        assert kernel["in_kernel_projection"], kernel
        with_gemm = costmodel.predict_persistent_us(config, H100, {**kernel, "in_kernel_projection": False}, training)
        projection = costmodel.forward_projection_us(config, H100, config.input_size, consts)   # v50
        groups = kernel.get("mma_groups", 1)
        own_product = (costmodel.mma_step_us(config, consts, groups, 2) - costmodel.mma_step_us(config, consts, groups, 1)
                       if kernel.get("mma") else 0.0)
        assert (config.dtype == "bfloat16") == (own_product > 0)
        assert with_gemm - costmodel.predict_persistent_us(config, H100, kernel, training) == pytest.approx(
            projection - own_product)
    assert not persistent_fit(cfg(512, 4), H100)["in_kernel_projection"]   # the GEMM (v15's rule)
    assert not persistent_fit(cfg(256, 1), H100)["in_kernel_projection"]   # the cluster kernel
