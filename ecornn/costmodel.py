"""A cost model with a physical shape: predicted microseconds per timestep for each GPU strategy.

persistent, per layer and step:  barrier (grid, or cluster for the v3 kernel) + exchange
                                 + recurrent FLOPs / (blocks x per-SM rate x eff)
                                 + a term in H x B (the vector every block reads each step)
fused, per layer and step:       max(launch floor, GEMM time) + pointwise, where the GEMM is bound
                                 by FLOPs at the unit's rate x efficiency(batch) or by re-reading the
                                 weights (from L2 when they fit, else HBM)
plus the input projection of all timesteps (one large GEMM), amortised per step. Training adds the
backward recurrence (about the forward's cost again) and the weight-gradient GEMMs.

The few constants are calibrated on the device (``python -m ecornn.run calibrate``) and cached per
device name and versions; without a cache, the defaults below (measured on an H100) apply.
"""
from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path

from .config import LSTMConfig
from .devices import DeviceSpec

BYTES = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2}


@dataclass(frozen=True)
class CostConstants:
    """Defaults: fitted to the full-grid planner sweep on the lent NVIDIA H200 (2026-11-21, fp32 and
    bf16 x inference and training x H 256..2048 x B 1..256, benchmarks/results/
    planner_sweep_final_h200.json; `calibrate --from-sweep`). No H100 was lent that day."""

    # The grid-kernel terms below predate persistent v6/v7 (they over-predict the H100's fp32 step by
    # ~1.2-2 us), yet on the H100 sweep of v7/v8 (results/planner_h100/, 160 cells) these defaults
    # pick within 10% of the fastest strategy in 155 cells (mean loss 1.3%, worst 1.67x); the H100
    # refit (results/planner_h100/calibration_h100.json) also gets 155, mean 1.0%, worst 1.48x, with
    # the misses moved, not removed, so the defaults stay. `calibrate` caches a fit per device.
    grid_sync_us: float = 1.2             # one grid-wide barrier (H100 132 blocks: 1.18; H200: 0.99)
    persistent_exchange_us: float = 1.13  # grid kernel: h through L2 + pointwise + loop overhead
    grid_tagged_step_us: float = 0.759    # v50: the grid kernel's fixed step where blocks exchange h by tagged
                                          # flags (no grid.sync), in place of the two above (which priced it 2.33);
                                          # fitted on the H200's two such cells (B=1; refit_fp32_forward_v50.py)
    cluster_step_us: float = 0.521        # cluster kernel: barrier + DSMEM push + pointwise (+ casts); v50: refitted
                                          # (was 1.33) on its one H200 cell, H=256 B=1
    persistent_efficiency: float = 1.0    # fraction of the FMA peak reached inside the loop
    persistent_vector_us: float = 0.517   # per 1000 hidden x batch elements read by every block
    persistent_batch2_us: float = 0.578   # per 100000 hidden x batch^2: per-lane accumulators and
                                          # shared-memory vector traffic grow with batch
    launch_us: float = 3.5                # one graph-replayed kernel node (GEMM or pointwise)
    gemm_efficiency: float = 1.0          # fp32 GEMM fraction of the FMA peak
    gemm_efficiency_16bit: float = 0.424  # 16-bit GEMM fraction of the tensor-core peak
    fused_fp32_batch_us: float = 0.616    # strict-fp32 skinny GEMMs: µs per 1000 hidden x batch
    l2_bandwidth_gbs: float = 9000.0      # weights re-read per step when they fit in L2
    # v45: the persistent fp32 backward recurrence (grid and rows kernels) per step: fixed + a factor on its FLOP term
    # at the FMA peak. Refitted (relative least squares, slopes >= 0; no vector slope survived) on the latest H200
    # fwd+bwd of 33 fp32 cells of results/persistent_v40-v44, their measured forwards subtracted: fwd+bwd within
    # 0.75-1.12 of measured, median 1.01 (1.55 x the forward's grid step had read them 0.97-2.35x, median ~1.5x)
    backward_step_us: float = 1.68
    backward_flop_factor: float = 4.45
    fused_backward_factor: float = 1.25   # fused backward steps / forward steps
    call_overhead_us: float = 40.0        # per call (Python, planning, launches outside the loop)
    # persistent v4 (fp16/bf16 on tensor cores): step = fixed + per 1e3 H*B of one batch group + per 1e6 H^2 x
    # groups x products (mma_forward_terms; weights streamed from shared memory when the registers are full);
    # v48: refitted (relative least squares, benchmarks/refit_mma_forward_v48.py) on 22 H200 whole forwards of
    # persistent v45-v48 (results/persistent_v48/refit_mma_forward_v48.md): 0.85-1.10 of measured, was 1.22-2.23
    mma_step_us: float = 1.306
    mma_vector_us: float = 0.0532
    mma_weights_us: float = 0.2879
    mma_tagged_saving_us: float = 0.45    # v5: a tagged forward plan skips grid.sync (H100 kernel
                                          # ablation: 0.31-0.77, median 0.44; the fit above is v4's)
    mma_bwd_step_us: float = 1.151        # training adds the backward recurrence: fixed part ...
    mma_bwd_us_per_kclock: float = 1.431  # ... + per 1000 of the backward plan's mma_step_clocks; v30:
                                          # refitted (relative least squares) on the 18 16-bit training
                                          # cells of results/persistent_v30/10_sweep_16bit.json (was 1.4 /
                                          # 2.4: H=1536 B=16 predicted at twice its time); v27's B <= 8
                                          # training picks are unchanged by it (24 of 24 within 10%); v48:
                                          # refitted after the forward (1.13 / 0.89 before) on 22 H200 fwd+bwd
                                          # of v45-v48: 0.81-1.14 of measured
    # persistent v13/v14 (fp32 forwards split into fp16 halves on the tensor cores, where
    # rules.fp32_split_pays): step = fixed + per 1e3 H*B (the hi and lo rows every block stages)
    # + per 1e6 H^2 x mma per weight tile (3, paired 2, times the N tiles); fitted to the H100 whole
    # forwards of results/persistent_v13 and persistent_v14 (12 cells, relative least squares after
    # the projection and call overhead; within 12% but H=1024 B=16 +12%, H=1536 B=2 -11%)
    # v50: refitted (relative least squares, benchmarks/refit_fp32_forward_v50.py) with the projection of
    # forward_projection_us on 13 H200 whole forwards of v47-v50 (was 1.68 / 0.089 / 0.21: 1.06-1.60x)
    split_step_us: float = 0.931
    split_vector_us: float = 0.117
    split_mma_us: float = 0.300
    # v43: the split forward on thread-block clusters of 2 (rules.cluster_split_pays), the same terms: each block
    # stages half the vector and hands partials over in proportion to it, and no vector slope survived the fit
    # (relative least squares, slopes >= 0, on 17 H200 whole forwards of results/persistent_v43 calls 2-7: within
    # 0.83-1.14 of measured, median 1.00; the unclustered constants had predicted them 1.16-1.60x)
    # v50: the fixed and mma terms refitted with forward_projection_us on 5 H200 cells of v44-v50 (was 1.65 / 0.084:
    # 0.72-0.87x with the new projection, 1.00-1.12x with the old); still no vector slope
    split_cluster_step_us: float = 1.450
    split_cluster_vector_us: float = 0.0
    split_cluster_mma_us: float = 0.304
    # v50: the persistent fp32 forward's input projection as the engine runs it from persistent.MIN_3XTF32_FLOPS on
    # (FP32_GEMMS "fp16split", v28/v48): x split into fp16 halves (one pass, µs per million x values) and three
    # products on the tensor cores. CUPTI at H=1024 B=8 (results/persistent_v48 call 1, v48's split by warps): the
    # GEMM 73.3 µs for 51.5 GFLOP (0.657 of the tensor peak), the split 6.8 µs for 2.1 M values. Until v49 the model
    # priced it as an SGEMM at the FMA peak, 3.4x that at H=1024 B=8.
    fp32_split_gemm_efficiency: float = 0.657
    fp32_split_us_per_mvalue: float = 3.24
    # fused v3 (fp16/bf16, one tensor-core kernel per step where fused_mma's size rule takes it)
    fused_mma_step_us: float = 3.25        # one graph node: launch + epilogue
    fused_mma_us_per_gflop: float = 31.6   # the step's product, L2-bound (no smem staging)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


DEFAULTS = CostConstants()


def _rate_tflops(config: LSTMConfig, device: DeviceSpec, tensor: bool) -> float:
    if config.dtype in ("float16", "bfloat16") and tensor:
        return device.tensor_tflops
    return device.fp32_tflops


def _gemm_us(flops: float, config, device, consts) -> float:
    sixteen = config.dtype in ("float16", "bfloat16")
    efficiency = consts.gemm_efficiency_16bit if sixteen else consts.gemm_efficiency
    return flops / (_rate_tflops(config, device, True) * 1e12 * efficiency) * 1e6


def forward_projection_us(config: LSTMConfig, device: DeviceSpec, k_in: int, consts: CostConstants) -> float:
    """v50: one layer's x W_ih^T of the persistent forward per step, as the engine computes it: 16-bit operands on
    one GEMM; fp32 from MIN_3XTF32_FLOPS per call on as the fp16 split (the split of x once for every direction,
    three products per direction on the tensor cores, persistent._fp32_projection), smaller ones as an SGEMM."""
    from .engines.persistent import FP32_GEMMS, MIN_3XTF32_FLOPS
    flops = 2.0 * config.batch * config.gate_size * k_in * config.num_directions
    per_direction_call = flops / config.num_directions * config.seq_len   # what the engine's rule compares
    if config.dtype != "float32" or FP32_GEMMS != "fp16split" or per_direction_call < MIN_3XTF32_FLOPS:
        return _gemm_us(flops, config, device, consts)
    gemms = 3 * flops / (device.tensor_tflops * 1e12 * consts.fp32_split_gemm_efficiency) * 1e6
    return gemms + consts.fp32_split_us_per_mvalue * config.batch * k_in / 1e6


def _per_layer_inputs(config: LSTMConfig):
    for layer in range(config.num_layers):
        yield layer, config.layer_input_size(layer)


def persistent_step_terms(config: LSTMConfig, device: DeviceSpec, blocks: int) -> tuple:
    """(FLOP term in µs at 100% efficiency, H*B/1e3, H*B^2/1e5) of one forward step of one layer."""
    rate = _rate_tflops(config, device, tensor=False) * 1e12 / device.sm_count  # fp32 FMAs always
    flops = 2.0 * config.batch * config.gate_size * config.hidden_size * config.num_directions
    hb = config.hidden_size * config.batch * config.num_directions
    return flops / (blocks * rate) * 1e6, hb / 1e3, hb * config.batch / 1e5


def predict_persistent_us(config: LSTMConfig, device: DeviceSpec, kernel: dict,
                          training: bool = False, consts: CostConstants = DEFAULTS) -> float:
    """Predicted µs per timestep. ``kernel``: the capacity model's choice — ``blocks`` of the grid
    kernel, ``cluster_blocks`` when inference runs the cluster kernel, ``in_kernel_projection`` when
    the forward computes x W_ih^T itself (v12, v15: no projection GEMM before it; the kernel's own
    share is in its step terms, measured about even with it where the engine's rule takes it)."""
    total = 0.0
    for _, k_in in _per_layer_inputs(config):
        # the backward's dX and dW_ih GEMMs (2 x projection) as v45 fitted the backward with them
        projection = _gemm_us(2.0 * config.batch * config.gate_size * k_in * config.num_directions,
                              config, device, consts)
        forward_projection = (0.0 if kernel.get("in_kernel_projection")
                              else forward_projection_us(config, device, k_in, consts))
        grid_fixed = (consts.grid_tagged_step_us if kernel.get("grid_tagged")
                      else consts.grid_sync_us + consts.persistent_exchange_us)
        grid_step = _persistent_step(config, device, kernel["blocks"], grid_fixed, consts)
        backward_step = _backward_step(config, device, kernel["blocks"], consts)
        if kernel.get("split_mma"):   # the fp32 split forward; the backward stays on the fp32 kernels
            total += split_step_us(config, kernel["split_mma"], consts, kernel.get("split_groups", 1),
                                   kernel.get("split_clusters", 1)) + forward_projection
            if training:
                total += backward_step + 2 * projection + _gemm_us(
                    2.0 * config.batch * config.gate_size * config.hidden_size * config.num_directions,
                    config, device, consts)
        elif kernel.get("mma"):
            step = (mma_step_us(config, consts, kernel.get("mma_groups", 1), mma_products(kernel))
                    - (consts.mma_tagged_saving_us if kernel.get("mma_tagged") else 0.0))
            total += step + forward_projection
            if training:  # the backward's cost follows its own plan's issue/staging clocks
                total += (consts.mma_bwd_step_us + consts.mma_bwd_us_per_kclock * kernel["mma_bwd_clocks"] / 1e3
                          + 2 * projection) + _gemm_us(
                    2.0 * config.batch * config.gate_size * config.hidden_size * config.num_directions,
                    config, device, consts)
        elif training:
            total += grid_step + backward_step + 2 * projection + forward_projection
            total += _gemm_us(2.0 * config.batch * config.gate_size * config.hidden_size * config.num_directions,
                              config, device, consts)
        elif kernel.get("cluster_blocks"):
            total += _persistent_step(config, device, kernel["cluster_blocks"], consts.cluster_step_us,
                                      consts) + forward_projection
        else:
            total += grid_step + forward_projection
    return total + consts.call_overhead_us / config.seq_len


def mma_step_terms(config: LSTMConfig, groups: int = 1) -> tuple:
    """(H*B/1e3, H^2/1e6) of one forward step of one layer of the tensor-core persistent kernel; v30:
    with the batch in ``groups`` groups on blocks of their own, B is one group's (each block stages
    only its group's vector)."""
    return (config.hidden_size * (config.batch // groups) * config.num_directions / 1e3,
            config.hidden_size ** 2 * config.num_directions / 1e6)


def mma_forward_terms(config: LSTMConfig, groups: int = 1, products: int = 1) -> tuple:
    """v48: the tensor-core forward step's (H*B/1e3 of one group, H^2/1e6 x groups x products): with the batch in
    ``groups`` groups each block holds ``groups`` times the weight rows, and with the input projection in the kernel
    (``products`` = 2) it multiplies W_ih too (v30's and v12's plans; before v48 the weights term was H^2 alone,
    1.2-2.2x high on today's plans)."""
    hb, hh = mma_step_terms(config, groups)
    return hb, hh * groups * products


def mma_products(kernel: dict) -> int:
    """2 where the tensor-core forward computes x W_ih^T itself (the capacity model's ``in_kernel_projection``)."""
    return 2 if kernel.get("in_kernel_projection") else 1


def mma_step_us(config: LSTMConfig, consts: CostConstants, groups: int = 1, products: int = 1) -> float:
    hb, hh = mma_forward_terms(config, groups, products)
    return consts.mma_step_us + consts.mma_vector_us * hb + consts.mma_weights_us * hh


def split_step_terms(config: LSTMConfig, mma_per_tile: int, groups: int = 1) -> tuple:
    """(H*B/1e3, mma per weight tile x H^2/1e6) of one split forward step of one layer; mma_per_tile
    counts every N tile (the plan's mma_per_tile x n_tiles; v40, the batch in ``groups`` groups: x groups, B one
    group's)."""
    hb, hh = mma_step_terms(config, groups)
    return hb, mma_per_tile * hh


def split_step_us(config: LSTMConfig, mma_per_tile: int, consts: CostConstants, groups: int = 1,
                  clusters: int = 1) -> float:
    """One split forward step; v43, ``clusters`` > 1: on thread-block clusters (the split_cluster_* constants)."""
    hb, mma_hh = split_step_terms(config, mma_per_tile, groups)
    if clusters > 1:
        return consts.split_cluster_step_us + consts.split_cluster_vector_us * hb + consts.split_cluster_mma_us * mma_hh
    return consts.split_step_us + consts.split_vector_us * hb + consts.split_mma_us * mma_hh


def _backward_step(config, device, blocks, consts) -> float:
    """v45: one step of the fp32 backward recurrence (grid or rows kernel) of ``blocks`` blocks."""
    flop_us, _, _ = persistent_step_terms(config, device, blocks)
    return consts.backward_step_us + consts.backward_flop_factor * flop_us


def _persistent_step(config, device, blocks, fixed_us, consts) -> float:
    """One grid-kernel (or cluster-kernel) forward step."""
    flop_us, hb, hbb = persistent_step_terms(config, device, blocks)
    return (fixed_us + flop_us / consts.persistent_efficiency + consts.persistent_vector_us * hb
            + consts.persistent_batch2_us * hbb)


def predict_fused_us(config: LSTMConfig, device: DeviceSpec, training: bool = False,
                     consts: CostConstants = DEFAULTS) -> float:
    weight_bytes = config.gate_size * config.hidden_size * BYTES[config.dtype]
    bandwidth = consts.l2_bandwidth_gbs if weight_bytes * config.num_directions <= device.l2_bytes / 2 \
        else device.mem_bandwidth_gbs
    per_layer = []
    for _, k_in in _per_layer_inputs(config):
        flops = 2.0 * config.batch * config.gate_size * config.hidden_size
        gemm = max(_gemm_us(flops, config, device, consts), weight_bytes / (bandwidth * 1e3))
        if config.dtype == "float32":  # cuBLAS's strict-fp32 kernels for N = batch <= 64 run far
            gemm += consts.fused_fp32_batch_us * config.hidden_size * min(config.batch, 64) / 1e3
        step = max(consts.launch_us, gemm) + consts.launch_us  # GEMM node + pointwise node
        if _fused_mma_step(config):  # one tensor-core node with the pointwise epilogue
            step = consts.fused_mma_step_us + consts.fused_mma_us_per_gflop * flops / 1e9
        projection = _gemm_us(2.0 * config.batch * config.gate_size * k_in, config, device, consts)
        directions = config.num_directions
        layer = directions * step / (1.6 if directions == 2 else 1.0) + directions * projection
        if training:
            layer += consts.fused_backward_factor * directions * step + 2 * directions * projection \
                + directions * _gemm_us(flops, config, device, consts)
        per_layer.append(layer)
    # wavefront: layers overlap, so the slowest layer dominates and the others add partly
    slowest = max(per_layer)
    return slowest + 0.35 * (sum(per_layer) - slowest) + consts.call_overhead_us / config.seq_len


def _fused_mma_step(config: LSTMConfig) -> bool:
    """Whether the fused engine's size rule runs this config's steps as one mma kernel."""
    from .engines import fused_mma
    from .engines.fused import FusedOptions
    return fused_mma.mma_decision(config, FusedOptions())[0]


def predict_reference_us(config: LSTMConfig, training: bool = False) -> float:
    """NumPy on a host core: about 5 GFLOP/s for these small per-step GEMMs."""
    return config.flops_per_step() * (3.0 if training else 1.0) / 5e9 * 1e6


# ---- calibration cache ------------------------------------------------------------------------
def cache_dir() -> Path:
    return Path(os.environ.get("ECORNN_CACHE", Path.home() / ".cache" / "ecornn"))


def cache_key(device_name: str, versions: dict) -> str:
    parts = [device_name] + [f"{k}-{v}" for k, v in sorted(versions.items())]
    return "_".join("".join(c if c.isalnum() or c in ".-" else "-" for c in p) for p in parts)


def load_constants(device_name: str, versions: dict) -> tuple:
    """(constants, source): the calibrated constants for this device and versions, else DEFAULTS."""
    path = cache_dir() / f"calibration_{cache_key(device_name, versions)}.json"
    if path.exists():
        data = json.loads(path.read_text())
        known = {f.name for f in dataclasses.fields(CostConstants)}
        return CostConstants(**{k: v for k, v in data["constants"].items() if k in known}), str(path)
    return DEFAULTS, "defaults (H100)"


def save_constants(device_name: str, versions: dict, consts: CostConstants, measurements: list) -> Path:
    path = cache_dir() / f"calibration_{cache_key(device_name, versions)}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"device": device_name, "versions": versions,
                                "constants": consts.to_json(), "measurements": measurements}, indent=2))
    return path
