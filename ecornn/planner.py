"""Which strategy runs a call, and why.

``plan(config, strategy, training, device)`` excludes the strategies that cannot run the problem
on the device (with the reason), predicts µs per timestep for the rest with the cost model, and
picks the fastest. Without a GPU the plan is the reference. An explicit strategy is honoured or
raises NotSupported naming the limit.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

from . import costmodel
from .config import LSTMConfig
from .devices import DeviceSpec, current
from .engines import STRATEGIES, get_engine
from .errors import ConfigError, NotSupported

GPU_STRATEGIES = ("persistent", "fused")


@dataclass
class Plan:
    strategy: str
    reason: str
    predicted_us_per_step: float | None = None
    kernel_config: dict = field(default_factory=dict)
    rejected: dict = field(default_factory=dict)      # strategy -> why it cannot run
    predictions: dict = field(default_factory=dict)   # strategy -> predicted µs per step
    device: str = "cpu"

    def __str__(self):
        return f"{self.strategy}: {self.reason}"


def _mb(n: float) -> str:
    return f"{n / 2**20:.1f} MB"


def weight_bytes(config: LSTMConfig) -> int:
    """Recurrent weights of one layer (all directions) in the storage dtype."""
    return config.num_directions * config.gate_size * config.hidden_size * costmodel.BYTES[config.dtype]


def persistent_fit(config: LSTMConfig, device: DeviceSpec, training: bool = False,
                   tensor_cores: bool = True) -> dict:
    """Kernel configuration of the persistent strategy on ``device``, or NotSupported.
    ``tensor_cores=False``: the plans without the 16-bit tensor-core kernel (the engine's fallback)."""
    from .engines import persistent
    wide = persistent.padded_config(device.as_dict(), config, training)
    if wide.batch == config.batch:
        return _persistent_fit_at(config, device, training, tensor_cores)
    # v47: the engine runs it at a padded batch (once: the padded batch is not padded again)
    return {**_persistent_fit_at(wide, device, training, tensor_cores), "padded_batch": wide.batch}


def _persistent_fit_at(config: LSTMConfig, device: DeviceSpec, training: bool, tensor_cores: bool) -> dict:
    """persistent_fit at ``config``'s own batch."""
    from .engines import persistent, persistent_capacity
    props = device.as_dict()
    if tensor_cores:   # fp32: the split forward where the engine takes it (v13/v14; its FP32_TENSOR_CORES)
        passes = persistent_capacity.plan_config(props, config, training,
                                                 fp32_tensor_cores=persistent.FP32_TENSOR_CORES,
                                                 batch_groups=persistent.BATCH_GROUPS,
                                                 backward_groups=persistent.BACKWARD_GROUPS)
    else:
        passes = persistent_capacity.plan_grid_config(props, config, training,
                                                      backward_groups=persistent.BACKWARD_GROUPS)
    if tensor_cores and getattr(passes["forward"], "parts", 1) == 2:   # v43: the engine's cluster rule (v42)
        passes = {**passes, "forward": persistent.clustered_forward(props, passes["forward"])}
    forward = passes["forward"]
    kernel = {"blocks": forward.grid, "threads": forward.threads, "launches": forward.launches,
              "passes": {name: p.describe() for name, p in passes.items()},
              # v12/v15: the forward computes x W_ih^T itself (no projection GEMM before it)
              "in_kernel_projection": bool(getattr(forward, "in_kernel_projection", False))}
    if getattr(passes.get("backward"), "kind", None) == "grid":   # v41: the fp32 grid backward's batch groups
        kernel["backward_groups"] = passes["backward"].batch_groups
    if getattr(forward, "parts", 1) == 2:   # the fp32 split forward (fp32 kernels backward)
        # mma per weight tile of one block (v40: a block of a grouped split serves its group's columns, on 1/groups
        # of the blocks)
        kernel["split_mma"] = forward.mma_per_tile * forward.n_tiles * forward.batch_groups
        kernel["split_groups"] = forward.batch_groups
        kernel["split_clusters"] = forward.cluster_k
        if "backward" in passes:
            kernel["blocks"] = passes["backward"].grid
        return kernel
    if getattr(forward, "kind", "grid") == "mma":  # fp16/bf16 on tensor cores (no cluster variant)
        kernel["mma"] = True
        kernel["mma_tagged"] = bool(getattr(forward, "tagged", False))
        kernel["mma_groups"] = forward.batch_groups   # v30: the batch in groups on blocks of their own
        if "backward" in passes:
            kernel["mma_bwd_clocks"] = persistent_capacity.mma_step_clocks(passes["backward"])
        return kernel
    kernel["grid_tagged"] = bool(getattr(forward, "tagged", False))   # v50: flags between blocks, no grid.sync
    cluster = None if training else _cluster_forward(config, props)
    if cluster is not None:  # the engine's "auto" runs inference on one cluster per direction
        kernel["cluster_blocks"] = cluster.cluster
        kernel["in_kernel_projection"] = False
        kernel["passes"]["forward"] = f"forward: cluster kernel, {cluster.cluster} blocks per direction"
    return kernel


def _cluster_forward(config: LSTMConfig, props: dict):
    """The cluster plan the persistent engine's "auto" variant would run, or None."""
    from .engines import persistent, persistent_capacity
    try:
        plan = persistent_capacity.plan_cluster(props, config.hidden_size, config.batch,
                                                config.num_directions, persistent.AUTO_MAX_CLUSTER)
    except NotSupported:
        return None
    return plan if persistent.auto_takes_cluster(plan) else None


def _built_choice(config, training, live, predictions: dict, rejected: dict):
    """The fastest predicted strategy, or None. v43, live: a persistent choice only once the call's kernels built
    (cached: the call builds them anyway; only the chosen strategy's, so a call that runs fused compiles nothing
    persistent): plans that fit the capacity model but none of whose builds or fallbacks do (registers that spill
    past shared memory) are rejected here and the next strategy runs, instead of an error in the call."""
    while predictions:
        choice = min(predictions, key=predictions.get)
        if not live or choice != "persistent":
            return choice
        try:
            get_engine(choice).check_built(config, training)
            return choice
        except NotSupported as exc:
            rejected[choice] = exc.reason
            del predictions[choice]
    return None


def _feasible_kernel(strategy: str, config: LSTMConfig, device: DeviceSpec, live: bool,
                     training: bool) -> dict:
    """Kernel configuration for ``strategy``, or raise NotSupported with the reason."""
    if live:  # engine importable, GPU present, dtype supported, compiled kernel fits
        engine = get_engine(strategy)
        engine.check(config, training=training) if strategy == "persistent" else engine.check(config)
    if strategy == "persistent":
        kernel = persistent_fit(config, device, training)
        if live and kernel.get("mma") and not engine.runs_tensor_cores(config, training):
            kernel = persistent_fit(config, device, training, tensor_cores=False)  # what will run
        return kernel
    return {}


def _predict(strategy, config, device, kernel, training, consts) -> float:
    if strategy == "persistent":   # v47: at the batch the engine runs it as
        config = config.replace(batch=kernel.get("padded_batch", config.batch))
        return costmodel.predict_persistent_us(config, device, kernel, training, consts)
    return costmodel.predict_fused_us(config, device, training, consts)


@functools.lru_cache(maxsize=4)
def _constants_for(device_name: str) -> tuple:
    from .calibrate import versions  # lazy: versions reads cupy/torch if present
    return costmodel.load_constants(device_name, versions())


def _explain(choice, config, device, predictions, rejected) -> str:
    others = ", ".join(f"{s} {us:.1f}" for s, us in predictions.items() if s != choice)
    why = f"predicted {predictions[choice]:.1f} µs/step" + (f" vs {others}" if others else "")
    if choice == "persistent":
        why = (f"weights {_mb(weight_bytes(config))} per layer fit on-chip (capacity "
               f"{_mb(device.onchip_bytes)} on {device.sm_count} SMs); " + why)
    elif choice == "fused" and "persistent" in rejected:
        why += f"; persistent excluded: {rejected['persistent']}"
    return why


def plan(config: LSTMConfig, strategy: str = "auto", training: bool = False,
         device: DeviceSpec | None = None, constants: costmodel.CostConstants | None = None) -> Plan:
    """Choose the strategy for ``config``. ``device``: a DeviceSpec to plan for (default: the
    current GPU, or the reference when there is none). Plans are cached: every call of a training
    loop asks the same question."""
    if strategy not in STRATEGIES + ("auto",):
        raise ConfigError(f"strategy: expected one of {STRATEGIES + ('auto',)}, got {strategy!r}")
    live = device is None
    return _plan_cached(config, strategy, training, device or current(), constants, live)


@functools.lru_cache(maxsize=4096)
def _plan_cached(config, strategy, training, device, constants, live) -> Plan:
    if strategy == "reference" or (device is None and strategy == "auto"):
        why = "requested explicitly" if strategy == "reference" else "no CUDA GPU: the NumPy reference runs"
        return Plan("reference", why, costmodel.predict_reference_us(config, training))
    if device is None:
        get_engine(strategy)  # raises NotSupported: no GPU
    consts = constants or _constants_for(device.name)[0]
    candidates = GPU_STRATEGIES if strategy == "auto" else (strategy,)
    kernels, predictions, rejected = {}, {}, {}
    for name in candidates:
        try:
            kernels[name] = _feasible_kernel(name, config, device, live, training)
        except NotSupported as exc:
            rejected[name] = exc.reason
            continue
        predictions[name] = _predict(name, config, device, kernels[name], training, consts)
    choice = _built_choice(config, training, live, predictions, rejected)
    if choice is None:
        if strategy != "auto":
            raise NotSupported(strategy, rejected[strategy])
        return Plan("reference", "no GPU strategy can run this: " +
                    "; ".join(f"{k}: {v}" for k, v in rejected.items()),
                    costmodel.predict_reference_us(config, training), rejected=rejected, device=device.name)
    reason = "requested explicitly; " if strategy != "auto" else ""
    reason += _explain(choice, config, device, predictions, rejected)
    return Plan(choice, reason, predictions[choice], kernels[choice], rejected, predictions, device.name)
