"""GPU strategy `persistent`: one cooperative kernel per layer runs all T steps with W_hh on chip.

Forward, per layer: the input projection of every step (x W_ih^T + b, gate-interleaved) is one
GEMM; then kernels/persistent_lstm.cu (PASS=0) runs the recurrence, both directions in one grid
when they fit (else one after the other). Backward, per layer from the top: the same kernel file
(PASS=1) runs the dh/dc recurrence with W_hh^T on chip and writes dz for every step; dX, dW_ih,
dW_hh and the bias gradients are GEMMs/reductions over all T*B rows afterwards.

Arithmetic is fp32 (FFMA) for every storage dtype: 16-bit inputs and weights are widened to fp32 on
the GPU, results are cast back (the cell state is fp32 throughout). The capacity model
(persistent_capacity.py) picks the tiles; before any launch the compiled kernel's registers, spills
and the occupancy API are checked, and NotSupported is raised where the grid cannot be co-resident
(a cooperative grid that is not co-resident would never pass its first grid.sync()).

v3 (forward only, `variant="cluster"`): when W_hh of a layer fits ONE thread-block cluster
(sm_90+, 8 blocks, or 16 with the non-portable cluster size), kernels/persistent_cluster.cu runs
each direction on its own cluster (one ordinary launch per layer) with a cluster barrier per step
and h exchanged through distributed shared memory. A training-mode cluster forward saves the same
reserve as v2, whose backward kernel consumes it. `variant="auto"` takes the cluster kernel for
inference only (CLUSTER_DEFAULT), on clusters of at most AUTO_MAX_CLUSTER blocks, and since v27 only
where rules.cluster_pays (a short step per block; else the grid kernel is faster).

v4 (fp16/bf16, `variant="mma"`): kernels/persistent_mma.cu keeps W_hh on chip as packed 16-bit
mma A-fragments (half the bytes of the widened fp32 tiles, so H=2048 fits) and runs the step's
product on tensor cores (fp32 accumulation, fp32 cell state, everything in global memory fp32).
Same kernel arguments and launch as the grid kernel. "auto" takes it for 16-bit dtypes where it
fits, forward and backward (else the widened grid kernel; the cluster kernel stays fp32-only under
"auto"). ``last_kinds`` records which kernel kind ran each pass of the latest call.

v5/v6: the tensor-core and grid kernels exchange the step's vector through a zeroed buffer, tagged
(no grid barrier) where capacity's rule says it pays, else under grid.sync() (TAGGED_EXCHANGE).
v6.1: fp32 input projections of >= MIN_3XTF32_FLOPS run as 3xTF32 (FP32_GEMMS). v7: the fp32
backward at H >= 1024, B >= 4, and wherever the grid backward does not fit, runs
kernels/persistent_bwd_rows.cu (split by gate rows; BACKWARD_BY_ROWS; kind "rows"). v9: training
calls with prepared weights replay CUDA graphs (persistent_train_graph); fp16/bf16 GEMMs take 16-bit
operands (SIXTEEN_BIT_GEMMS); ``refresh`` rewrites prepared weights in place, so graphs survive.
v12: the tensor-core forward computes x W_ih^T itself (packed W_ih tiles in shared memory) where
rules.input_projection_pays (tagged plans, B >= 4; IN_KERNEL_PROJECTION) instead of the GEMM.
v13: fp32 forwards run on the same tensor-core kernel with every weight and h split into fp16 hi/lo
halves (SPLIT=1, three mma per tile, ~22 significant bits) where rules.fp32_split_pays
(FP32_TENSOR_CORES: B >= 8, H >= 512); W_hh is scaled by a power of two first (split_halves), and
W_hh h0 goes into the first step's xw in fp32 (h0 is not bounded). The backward stays fp32.
v14: at B = 1, 2, 4 the split's hi and lo rows of h share one mma N tile (two mma per tile;
PAIRED_SPLIT). v15: the fp32 grid forward computes x W_ih^T itself too (W_ih rows in registers,
grid_with_input_projection) under the same flag, by input_projection_pays (tagged plans, B <= 2).
v16: tagged forwards at B <= 2 sleep before their warps' first poll (rules.poll_delay_pays; POLL_DELAY).
v17: a 16-bit x reaches the 16-bit GEMM or kernel as it is (DIRECT_16BIT_INPUT), and output, hT and cT
are views of one buffer (ONE_OUTPUT_BUFFER); persistent_graph replays on the caller's stream.
v18: tagged tensor-core forwards at B = 4, H >= 2048 wait longer (rules.long_poll_delay_pays).
v29: the fp32 split forward can compute x W_ih^T itself (IN_KERNEL_PROJECTION=True; rules.split_projection_pays
never takes it: slower than v28's GEMM): W_ih's hi tiles times x as gpu_blas.split_x_rows (row-scaled hi and lo
rows), x_hi W_lo^T one fp16 GEMM before the kernel (_split_input), W_hh h0 added at step 0.
v40: the fp32 split forward runs its batch in groups on blocks of their own too (BATCH_GROUPS; paired groups of 4
columns first, capacity._grouped_pass_plan, rules.split_groups_pay).
v41: the fp32 grid backward (FFMA) runs its batch in groups on blocks of their own (BACKWARD_GROUPS; the most groups
of 2 columns or more that fit, capacity.grid_backward_plan, rules.grid_backward_group_counts; fewer where one does
not build); the fp32 split forward in groups of 2 columns at B <= 8 where its k-tiles stay in registers.
v51: a 16-bit inference forward at B=4 from H=768 keeps half of its in-kernel projection's k-tiles; a GEMM before the
kernel covers the other inputs (INPUT_PART_K_TILES, capacity.with_input_part, rules.input_part_k_tiles,
input_part_projection): fewer W_ih tiles read from shared memory on every block's loop.
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
from collections import OrderedDict
from dataclasses import dataclass, field, replace

import numpy as np

from .. import gpu_blas
from ..arrays import data_address, is_gpu_array
from ..errors import NotSupported
from ..layouts import gate_deinterleave_as, gate_deinterleave_copy, gate_interleave, pad_columns
from ..layouts.persistent import (gather, gather_index, mma_fragment_order, pack_block_rows, pack_column_tiles,
                                 pack_mma_fragments, pack_split_fragments)
from ..weights import LayerWeights, slot
from . import persistent_capacity as capacity
from . import persistent_rules as rules
from . import batch_pad, persistent_graph, persistent_refresh, persistent_train_graph
from .. import flag_changes

name = "persistent"
device = "gpu"

SUPPORTED_DTYPES = ("float32", "float16", "bfloat16")
REG_COL_BACKOFF = 8  # register columns moved to shared memory per retry when a build spills
FINE_BACKOFF_BYTES = 64  # v58: a grid build with at most this much local memory (a few spilled registers) gives
                         # up one column a retry where 8 would fit too (fp32 H=1024 B=8's backward: 77 of 78, not 70)
CLUSTER_DEFAULT = "auto"  # fp32 inference: "auto" takes the cluster kernel where it fits and rules.cluster_pays
                          # (v27); True: wherever it fits (v3); False: never (the grid kernel)
POISON_OUTPUTS = False  # tests set True: outputs start as NaN, so an element no kernel wrote fails
VARIANTS = ("auto", "grid", "cluster", "mma")
MAX_CLUSTER = 16         # 16 needs CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED (set below)
AUTO_MAX_CLUSTER = 8     # "auto" skips 16-block plans: H=512 B=4 measured slower than the grid (H200)
_NON_PORTABLE_CLUSTER_ATTR = 14  # CUfunction_attribute value in cuda.h (CUDA 12/13)
FP32_GEMMS = "fp16split"  # fp32 input projections of >= MIN_3XTF32_FLOPS, fp32-accurate on tensor cores:
                          # "fp16split" (v28: fp16 halves of row-scaled operands, gpu_blas.matmul_fp16_split3),
                          # "onepass" (v25: one TF32 GEMM over a 3x longer reduction, gpu_blas.matmul_3xtf32_onepass),
                          # "3xtf32" (v6: three GEMMs, gpu_blas.matmul_3xtf32) or "strict" (cuBLAS SGEMM, the
                          # ablation; what all smaller projections run)
FP32_PROJECTION_LONG_FROM_K = 4096   # v35: an fp32 input projection reducing over this many inputs (or more) is
                                     # long (LONG_REDUCTIONS): the fp16-split GEMM's error grew with K (y 1.0e-6 of
                                     # float64 at 1024 inputs, 4.5e-6 at 4096, 9.4e-6 at 8192; SGEMM ~1e-6;
                                     # results/persistent_v35 call 18). v35: 8192; v36: 4096, so no single GEMM reads
                                     # past ~4.5e-6 (4096 / 6144 inputs in chunks: 1.2e-6, forward +3-5%, results/
                                     # persistent_v36 call 8). None: none is (the ablation)
MIN_3XTF32_FLOPS = 1e9    # H100, whole forward: v6 (three GEMMs) 4e9: 2.1 GFLOP (H=512 B=4) gained nothing, 4.3
                          # 0.08 us/step, 17 0.46; v25 (one pass) 1e9: H=512 B=4 -0.06 us/step against SGEMM
FP32_BACKWARD_GEMMS = "onepass"  # v22: the fp32 backward's dX, dW_ih and dW_hh GEMMs of >= MIN_3XTF32_BACKWARD_FLOPS
                                 # on 3xTF32 (v6.1 measured them slower when training ran eagerly: the splits'
                                 # launches; training replays graphs since v9): "onepass" (v25), "3xtf32" (v22,
                                 # three GEMMs each) or "strict" (SGEMM, the ablation)
FP32_LONG_REDUCTION_FROM_K = 2048   # v35: an fp32 backward GEMM whose reduction reaches this K is long
                                    # (LONG_REDUCTIONS): dX = dz W_ih (K = 4H), dW_ih and dW_hh (K = T B). On 3xTF32
                                    # the error grew with K (one pass: dx 9.5e-6 of float64 at K=4096, 1.4e-5 at
                                    # 6144, dW 1.2e-5 at 8000; SGEMM ~1e-6; results/persistent_v35 calls 13-15).
                                    # v35: 4096; v36: 2048, so no single GEMM reads past ~4.8e-6 (H=768 B=8 grads
                                    # 7.2e-6 -> 2.9e-6 in chunks, fwd+bwd +0.6-1.8%, results/persistent_v36 call 8).
                                    # None: none is (the ablation)
LONG_REDUCTIONS = "chunked"   # v36: how long fp32 reductions run: "chunked", the fp16-split projection and the one-pass
                              # backward GEMMs as one GEMM per LONG_REDUCTION_CHUNK of the reduction, fp32 adds between
                              # (gpu_blas.reduction_spans); "strict": cuBLAS SGEMM (v35, the ablation)
LONG_REDUCTION_CHUNK = 1024   # v36: one-pass dX at K=1024 2.4e-6 of float64 (a quarter of K=4096's, results/persistent_v35)
CHUNKED_GEMMS = ("fp16split", "onepass")   # v36: the FP32_GEMMS / FP32_BACKWARD_GEMMS modes whose split operands
                                           # can run in chunks
MIN_3XTF32_BACKWARD_FLOPS = 2e9   # H100, fwd+bwd: v22 (three GEMMs) 8e9: 4.3 GFLOP (H=512 B=8) +0.06 ms, 8.6
                                 # -0.04, 17 (H=1024 B=8) -0.31; v25 (one pass) 2e9: 4.3 (H=1024 B=2) -0.05,
                                 # 4.8 (H=768 B=4) -0.10, H=512 B=8 a tie
BACKWARD_BY_ROWS = "auto"  # fp32 backward: the rows kernel (v7) per rules.rows_backward_pays, or
                           # True / False forced (tests, ablation); the grid backward where it does not fit
SIXTEEN_BIT_GEMMS = True  # fp16/bf16: the GEMMs (projection, dX, dW) take 16-bit operands (cuBLAS, fp32
                          # accumulation and output): twice TF32's tensor-core rate, half the bytes;
                          # False: TF32 on fp32 copies (v5)
IN_KERNEL_PROJECTION = "auto"  # tensor-core and grid forwards: x W_ih^T inside the kernel (v12, v15) where it fits and
                               # rules.input_projection_pays; True: wherever it fits; False: one GEMM
                               # before the kernel (tests, the ablation)
FP32_TENSOR_CORES = "auto"  # fp32 forward split into fp16 halves on the tensor cores (v13) where
                            # rules.fp32_split_pays; True: wherever it fits; False: FFMA kernels
UNITS_FASTEST = True     # tensor-core kernels: the v11 pointwise thread order; False: the v10 one (ablation)
PAIRED_SPLIT = True      # fp32 split at B = 1, 2, 4: hi and lo vector rows in one N tile, 2 mma per tile (v14);
                         # False: 3 mma per tile (the ablation)
SPLIT_WORDS = True       # v28: the fp32 split's h as one tagged word per value (hi | lo, the lo's lowest bit the
                         # tag): half the polls; False: v13's hi and lo rows (the ablation)
POLL_DELAY = True        # tagged forwards at B <= 2: the first poll's delay (v16, rules.poll_delay_pays);
                         # False: none (the ablation)
DIRECT_16BIT_INPUT = True  # v17: a 16-bit x reaches the 16-bit GEMM or kernel as it is (its bits); False:
                           # through an fp32 copy and back (two conversion kernels; the ablation)
ONE_OUTPUT_BUFFER = True   # v17: output, hT and cT as views of one buffer (one cast kernel, one replay copy);
                           # False: three arrays (the ablation)
KERNEL_WRITES_16BIT = True  # v23: a 16-bit inference forward on the tensor cores stores y, hT and cT as the
                            # caller's 16-bit values (no cast kernel after it; v30: training forwards too,
                            # whose backward then takes y as it is); False: fp32, then a cast
GRID_KERNEL_BIAS = True     # v23: the fp32 grid forward adds the biases to its xw itself where its plan has
                            # room (capacity.with_kernel_bias; no add kernel before it); False: the
                            # projection adds them (the ablation)
X_PREFETCH = True           # v24: kernels that project x themselves prefetch all of x into L2 at their start;
                            # False: compiled without (X_PREFETCH=0, the ablation)
FAST_FP32_GATES = True      # v28: the fp32 kernels' gates on MUFU.EX2 / MUFU.RCP (~2^-21); False: expf / tanhf,
                            # compiled with FAST_FP32_GATES=0 (the ablation)
REGISTER_MODEL = "v19"    # tensor-core plans: register k-tiles by the v19 refit; "v4": the old model (ablation);
                          # "v19-kept": v19's tiles with the v4 model's (warps, units) kept everywhere (before v38);
                          # "v19-ranked": never kept (every pick by the v19 ranking; v38's bidirectional exploration)
TAGGED_WITH_WAIT = True  # v26: the tagged exchange past 4 polls per lane where the warps wait otherwise: 16-bit
                         # forwards at B <= 8 with the in-kernel projection, the paired split at B=4 with a
                         # long first-poll delay; False: v5's rule alone (the ablation)
BACKWARD_16BIT_GRADS = True  # v31: with a 16-bit dy of the layer's dtype, the mma backward's GEMMs write 16-bit
                             # gradients; False: fp32 GEMM outputs, cast after (v30)
BACKWARD_16BIT_DY = True     # v31: there, a kernel with late loads reads that dy (and a layer above's 16-bit
                             # dX) as it is; False, and elsewhere: converted to fp32 first (v30; it measured
                             # faster without the late loads)
BWD_LATE_LOADS = "auto"   # v31: the grid.sync mma backward (v32: the fp32 grid one, rules.FP32_LATE_LOAD_KINDS; the
                          # rows one only with True) loads the next step's inputs after the barrier (and
                          # reads the 16-bit dy, prefetched into L2) where rules.late_loads_pay; True: wherever
                          # grid.sync, False: nowhere (the ablation)
DEINTERLEAVE_BY_MEMCPY = True  # v31: 16-bit weight gradients deinterleave as 4 strided 2-D memcpys per matrix
XW_UNSCALE_IN_KERNEL = "auto"   # v32/v33: the fp32 split and grid forwards take the fp16-split GEMM's xw scaled (no
                                # pass over xw) and unscale it where they load it: "auto" where rules.split_xw_unscale_pays
                                # / grid_xw_unscale_pays, True wherever they can, False never (matmul_fp16_split3's pass)
XW_AT_LOAD = False   # v33: the split forward applies xw (its unscale, the biases) in the pointwise, after the polls;
                     # True: where loaded (v32: the ldexpf waited for the exponents before the polls), XW_AT_LOAD=1
H0_IN_PRODUCT = True   # v34: the split forward takes h0 itself into its step-0 product (scaled per batch column);
                       # False: the host's strict-fp32 W_hh h0 GEMV, added at step 0 (v32), H0_IN_PRODUCT=0
H0_WIDE_LOADS = True   # v57: the split forward's prologue reads h0 for its exponents by 16-byte loads, all in flight
                       # (ungrouped plans, H % 4 == 0); False: v34's rounds of 4 single loads (H0_WIDE_LOADS=0, the
                       # ablation)
POLL_SPIN_CYCLES = "auto"   # v35: tensor-core plans with a first-poll delay wait it by a clock64() spin where
                            # rules.poll_spin_cycles says (kernel define POLL_SPIN_CYCLES); an int: a spin of that
                            # many cycles on every such plan; 0: __nanosleep everywhere (the ablation)
SPLIT_READS_X = True   # v35: a replayed fp32 forward whose only reader of x is layer 0's fp16 split (fp16_split3) has
                       # it read the caller's x where it lies (the replay ring copies x no more); False: copied
GROUP_BARRIERS = False    # v30: True: grouped grid.sync plans synchronise each (direction, group) on a counter of
                          # its own (kernel GROUP_BARRIERS); measured slower than grid.sync() over the whole grid
                          # (results/persistent_v30, 14_), so an option only
BATCH_GROUPS = "auto"     # v30: 16-bit passes with the batch as groups on blocks of their own
                          # (capacity.grouped_plan) where rules.batch_groups_pay; True: wherever it fits;
                          # False: never (the ablation); v39: "auto" takes as many groups of 8 columns as
                          # fit (rules.batch_group_counts); an int G > 1: G groups wherever they fit (2: v38);
                          # v40: the fp32 split forward too ("auto": rules.split_group_counts, split_groups_pay;
                          # v41: groups of 2 columns first at B <= 8)
BACKWARD_GROUPS = "auto"   # v41: the fp32 grid backward with the batch as groups on blocks of their own
                           # (capacity.grid_backward_plan): "auto" the first count of rules.grid_backward_group_counts
                           # that fits; False: never (the ablation); an int G > 1: G groups where they fit
BATCH_PADDING = "auto"   # v47: under "auto", a call whose plans keep its batch in fewer groups than a batch up to
                         # rules.MAX_BATCH_PADDING columns larger runs as that batch, the added columns zero
                         # (layouts.batch; an odd B as the next even one); an int P: up to P columns; False: never
CUT_AT_COPY_OUT = True   # v48: a replayed padded inference forward's graph keeps the padded outputs and the replay cuts
                         # them as it copies them out (persistent_graph.CutOutputs); False: the graph cuts them (v47)
PAD_READS_X = True   # v48: a replayed padded inference forward pads the caller's x where it lies (batch_pad, the replay
                     # ring's fetched address) instead of a copy of it; False: copied, then padded (v47)
CLUSTER_K = "auto"  # v42: tensor-core forwards on thread-block clusters, each block 1/C of K (capacity.with_cluster_k):
                    # "auto" the fp32 split where rules.cluster_split_pays (clusters of 2, 8 warps; v44: its batch groups
                    # of 8 columns too); an int C > 1: every forward but v29's split projection on clusters of C (v44:
                    # grouped and with v12's projection too; an exploration); False: never
CLUSTER_WARPS = None          # v42: warps per block of forced plans (None: the plan's)
CLUSTER_POLL_DELAY_NS = None  # v42: clustered plans sleep this many ns before their first poll (None: the rules' wait,
                              # rules.CLUSTER_POLL_DELAY_NS as a spin of rules.SPLIT_POLL_SPIN_CYCLES)
CLUSTER_COOPERATIVE = True    # v42: launch them cooperatively (co-residency guaranteed); False: an ordinary launch
                              # after cuOccupancyMaxActiveClusters says every cluster is resident
STEP_CLOCKS = 0   # v37 diagnostic: > 0 compiles the tensor-core forward with clock marks of its first STEP_CLOCKS
                  # steps (kernels/step_clocks.cuh; read by benchmarks/diag_step_clocks_v37.py); 0: none
INPUT_PART_K_TILES = "auto"   # v51: 16-bit forwards with the in-kernel projection keep this many k-tiles per warp of it,
                              # a GEMM before the kernel the rest (capacity.with_input_part): "auto" where
                              # rules.input_part_k_tiles says, an int n wherever the plan has more, "half" half of
                              # the plan's, 0 never
INPUT_REG_K_TILES = "auto"   # v52: 16-bit forwards with the in-kernel projection keep this many of each warp's W_ih k-tiles
                             # in registers (capacity.with_input_reg_tiles; a build that spills moves them back first):
                             # "auto" where rules.input_reg_k_tiles says, an int n up to the plan's, "all" every one,
                             # 0 none
FORWARD_WARPS = None    # v52 (forced, tests and benches): an unclustered, ungrouped 16-bit tensor-core forward planned
                        # on blocks of this many warps (capacity.forward_on_warps), with the projection in the kernel
                        # where it fits; None: the plan's
DIAG_IN_K_TILES_USED = None   # v51 diagnostic (timing only, wrong sums): the tensor-core kernel's in-kernel input
                              # product over only its first n k-tiles (0: none), to bound what a cheaper one saves
POLL_BACKOFF_NS = "auto"   # v55: tagged tensor-core forwards' lanes sleep after an incomplete poll of the exchange
                           # (capacity.with_poll_delay, kernel define POLL_BACKOFF_NS): "auto" where
                           # rules.poll_backoff_ns says, an int that many ns on every such forward, 0 never
DIAG_X_STAGE_EVERY = None   # v55 diagnostic (timing only, wrong sums): the in-kernel projection stages x_{t+1} only
                            # every n-th step, to bound what staging several steps of x at once would save
DIAG_SPILL_BYTES_ACCEPTED = 0   # v61 diagnostic (timing only): a build with at most this many bytes of local memory is
                                # kept instead of backed off (a register share that spills a little, timed as it is)
TAGGED_EXCHANGE = "auto"  # grid and tensor-core kernels: tagged h/dz exchange (v5/v6) or grid.sync()
                          # per the capacity model's rule; True / False force one (tests, ablation)
last_kinds: dict = {}    # pass -> kernel kind ("grid", "cluster", "mma") of the latest call (tests, benchmarks)


def _cp():
    import cupy
    return cupy


def _props():
    from ..gpu import device_properties
    return device_properties()


def _device_id() -> int:
    return _cp().cuda.Device().id


def check(config, training: bool = False) -> None:
    """dtype and capacity of the forward pass (and of backward with training=True; a training-mode
    forward checks both itself before its first launch), at the batch the call runs as (v47)."""
    _check_dtype(config)
    _plans(run_config(config, training), training=training)


def built_plans(config, training: bool = False) -> dict:
    """The plans an "auto" call runs on this device after _built_plans' fallbacks (each still as asked: ``_final``
    gives its spill back-off's), or NotSupported. Compiles, cached."""
    return _built_plans(run_config(config, training), training, "auto")


def check_built(config, training: bool = False) -> None:
    """check, and that the call's kernels (or a fallback's: _built_plans) compile and co-reside on this device;
    NotSupported otherwise. Compiles, cached (the planner's check of a persistent choice, v43)."""
    built_plans(config, training)


def runs_tensor_cores(config, training: bool = False) -> bool:
    """Whether "auto" runs this call on the tensor-core kernel after compiling it (False where the
    mma plans do not build on this device and the grid kernel takes over). Compiles, cached."""
    return built_plans(config, training)["forward"].kind == "mma"


def _check_dtype(config) -> None:
    if config.dtype not in SUPPORTED_DTYPES:
        raise NotSupported(name, f"dtype {config.dtype} (supported: {', '.join(SUPPORTED_DTYPES)})")


@functools.lru_cache(maxsize=256)
def _plans_for(props_items: tuple, config, training: bool, variant: str, by_rows, fp32_tensor_cores,
               reg_model: str = "v19", batch_groups="auto", backward_groups="auto") -> dict:
    props = dict(props_items)
    if variant == "mma":
        return capacity.plan_mma_config(props, config, training, reg_model, batch_groups, backward_groups)
    if variant == "auto":
        return capacity.plan_config(props, config, training, by_rows, fp32_tensor_cores, reg_model, batch_groups,
                                    backward_groups)
    return capacity.plan_grid_config(props, config, training, by_rows, backward_groups)


def _plans(config, training: bool, variant: str = "auto", by_rows=None, backward_groups=None, clusters=None) -> dict:
    """Capacity plans of a call, cached per (device, config, training, variant): planning is
    Python work. "auto": tensor-core plans for 16-bit dtypes where they fit, else grid plans.
    TAGGED_EXCHANGE True/False forces the grid and tensor-core plans' exchange (tests, the ablation);
    IN_KERNEL_PROJECTION True/False puts the tensor-core or grid forward's projection in the kernel wherever it
    fits / takes it out, UNITS_FASTEST=False the v10 pointwise thread order, PAIRED_SPLIT=False the
    split's 3 mma per tile at B <= 4, SPLIT_WORDS=False its hi and lo exchange rows, POLL_DELAY=False
    no first-poll delay, REGISTER_MODEL="v4" the tensor-core plans of the v4 register model, TAGGED_WITH_WAIT=False v5's exchange rule alone (tests, the
    ablations); BATCH_GROUPS True/False the grouped 16-bit passes (v30) wherever they fit / never,
    GROUP_BARRIERS=True a barrier per group in grouped grid.sync plans (measured slower; an option);
    BACKWARD_GROUPS False/an int the fp32 grid backward's batch groups (v41) never / that many (``backward_groups``,
    unless None, in its place: _built_plans' fallback); CLUSTER_K False/an int the forward on thread-block clusters
    (v42) never / of that many blocks (``clusters``, unless None, in its place)."""
    props = _props()
    props_items = tuple(sorted(props.items()))
    by_rows = BACKWARD_BY_ROWS if by_rows is None else by_rows
    backward_groups = BACKWARD_GROUPS if backward_groups is None else backward_groups
    plans = _plans_for(props_items, config, training, variant, by_rows, FP32_TENSOR_CORES,
                       REGISTER_MODEL, BATCH_GROUPS, backward_groups)
    if not TAGGED_WITH_WAIT:
        plans = {k: capacity.without_tagged_wait(p) for k, p in plans.items()}
    if IN_KERNEL_PROJECTION != "auto" and plans["forward"].kind in ("mma", "grid"):
        forward = plans["forward"]
        if IN_KERNEL_PROJECTION:
            forward = capacity.with_input_projection(props, forward.without_input_projection(),
                                                     capacity.layer_input_sizes(config))
        else:   # v26: a plan tagged only for its projection goes back to grid.sync
            forward = capacity.without_input_projection(forward)
        plans = {**plans, "forward": capacity.with_kernel_bias(props, forward)}   # v23: as plan_grid_config does
    if FORWARD_WARPS and plans["forward"].kind == "mma":
        plans = {**plans, "forward": _on_warps(props_items, config, plans["forward"], int(FORWARD_WARPS))}
    if plans["forward"].kind == "mma" and plans["forward"].in_kernel_projection:
        plans = {**plans, "forward": _with_input_part(plans["forward"], INPUT_PART_K_TILES, training)}
        plans = {**plans, "forward": _with_input_reg_tiles(plans["forward"], INPUT_REG_K_TILES, training)}
    if not UNITS_FASTEST:
        plans = {k: replace(p, units_fastest=False) if p.kind == "mma" else p for k, p in plans.items()}
    if not PAIRED_SPLIT:
        plans = {k: replace(p, paired_split=False) if p.kind == "mma" else p for k, p in plans.items()}
    if not SPLIT_WORDS:
        plans = {k: capacity.without_split_words(p) for k, p in plans.items()}
    if GROUP_BARRIERS:
        plans = {k: replace(p, group_barriers=True) if p.kind == "mma" else p for k, p in plans.items()}
    if TAGGED_EXCHANGE != "auto":
        plans = {k: p.with_exchange(bool(TAGGED_EXCHANGE)) for k, p in plans.items()}
    if not GRID_KERNEL_BIAS:
        plans = {k: p.without_kernel_bias() if p.kind == "grid" else p for k, p in plans.items()}
    clusters = CLUSTER_K if clusters is None else clusters
    if clusters:
        plans = {**plans, "forward": _clustered(props_items, plans["forward"], clusters, CLUSTER_WARPS, POLL_DELAY,
                                                POLL_SPIN_CYCLES)}
    plans = {k: capacity.with_poll_delay(p, POLL_DELAY, POLL_SPIN_CYCLES, _backoff(k)) if p.kind in ("mma", "grid")
             else p for k, p in plans.items()}
    if CLUSTER_POLL_DELAY_NS is not None and getattr(plans["forward"], "cluster_k", 1) > 1:   # a sleep, no spin
        plans = {**plans, "forward": replace(plans["forward"], poll_delay_ns=int(CLUSTER_POLL_DELAY_NS),
                                             poll_spin_cycles=0)}
    return {k: capacity.with_late_loads(p, BWD_LATE_LOADS) for k, p in plans.items()}   # after the overrides


def _backoff(pass_name: str):
    """v55: the repoll backoff asked of ``pass_name``'s plan: POLL_BACKOFF_NS for forwards, none for backwards (not
    measured there)."""
    return POLL_BACKOFF_NS if pass_name == "forward" else 0


@functools.lru_cache(maxsize=256)
def _with_input_part(forward, k_tiles, training: bool):
    """v51: ``forward`` with its in-kernel projection cut to ``k_tiles`` (INPUT_PART_K_TILES; "auto":
    rules.input_part_k_tiles for inference, never for training: not measured there) and the rest a GEMM, where
    capacity.with_input_part applies. Cached: _plans runs on every eager call."""
    if k_tiles == "auto":
        k_tiles = 0 if training else rules.input_part_k_tiles(forward)
    elif k_tiles == "half":
        k_tiles = forward.input_k_tiles // 2
    return capacity.with_input_part(forward, k_tiles) if k_tiles else forward


@functools.lru_cache(maxsize=256)
def _with_input_reg_tiles(forward, k_tiles, training: bool):
    """v52: ``forward`` with ``k_tiles`` of each warp's W_ih k-tiles in registers (INPUT_REG_K_TILES; "auto":
    rules.input_reg_k_tiles, "all": every one) where capacity.with_input_reg_tiles applies. Cached."""
    if k_tiles == "auto":
        k_tiles = rules.input_reg_k_tiles(forward, training)
    elif k_tiles == "all":
        k_tiles = forward.input_k_tiles
    return capacity.with_input_reg_tiles(forward, k_tiles) if k_tiles else forward


@functools.lru_cache(maxsize=256)
def _on_warps(props_items: tuple, config, forward, warps: int):
    """v52 (FORWARD_WARPS): the 16-bit forward of ``config`` ungrouped on blocks of ``warps`` warps, else ``forward``."""
    plan = capacity.forward_on_warps(dict(props_items), config, warps)
    return forward if plan is None else plan


@functools.lru_cache(maxsize=256)
def _clustered(props_items: tuple, forward, clusters, warps, poll_delay, poll_spin):
    """v42: ``forward`` on thread-block clusters where capacity.with_cluster_k applies, with its first-poll wait
    (with_poll_delay), else as it is: "auto" where rules.cluster_split_pays (rules.CLUSTER_SPLIT_SIZE blocks of
    CLUSTER_SPLIT_WARPS warps), an int C every plan (``warps`` warps). Cached: _plans runs on every call, where
    rebuilding the plan cost 0.02 ms (0.007 cached; a CI-machine CPU)."""
    props = dict(props_items)
    if clusters == "auto":
        if not rules.cluster_split_pays(forward):
            return forward
        plan = capacity.with_cluster_k(props, forward, rules.CLUSTER_SPLIT_SIZE, rules.CLUSTER_SPLIT_WARPS)
    else:
        plan = capacity.with_cluster_k(props, forward, int(clusters), warps)
    return forward if plan is None else capacity.with_poll_delay(plan, poll_delay, poll_spin)


def clustered_forward(props: dict, forward):
    """``forward`` (a capacity plan for the device of ``props``) as the engine's CLUSTER_K runs it: on thread-block
    clusters where its rule applies (v42), else as it is. For the planner, which plans from the capacity model."""
    if not CLUSTER_K:
        return forward
    return _clustered(tuple(sorted(props.items())), forward, CLUSTER_K, CLUSTER_WARPS, POLL_DELAY, POLL_SPIN_CYCLES)


def plans_for(config, training: bool = False, variant: str = "auto") -> dict:
    """The capacity plans ({'forward': plan[, 'backward': plan]}) a call with ``variant`` would
    run on this device (before the compile-time checks), or NotSupported. A padded batch's (v47) plans are
    those of the batch it runs as (run_config)."""
    _check_dtype(config)
    return _plans(run_config(config, training, variant), training, variant)


def run_config(config, training: bool = False, variant: str = "auto"):
    """``config`` with the batch the call runs as on this device: the caller's, or a padded one (v47)."""
    if variant != "auto":
        return config
    return padded_config(_props(), config, training)


def padded_config(props: dict, config, training: bool = False):
    """v47: ``config`` at the batch "auto" runs it as on the device of ``props``: the smallest batch up to
    BATCH_PADDING (rules.MAX_BATCH_PADDING) columns larger whose plans split it into more batch groups (forward and
    backward counted together) than the caller's batch, or that plans where the caller's does not; else
    ``config``. The kernels' groups are equal, so an odd batch ran in one group (layouts.batch pads it)."""
    most = rules.MAX_BATCH_PADDING if BATCH_PADDING == "auto" else int(BATCH_PADDING)
    if not most:
        return config
    batch = _padded_batch(tuple(sorted(props.items())), config, training, most, BACKWARD_BY_ROWS,
                          FP32_TENSOR_CORES, REGISTER_MODEL, BATCH_GROUPS, BACKWARD_GROUPS)
    return config if batch == config.batch else config.replace(batch=batch)


@functools.lru_cache(maxsize=256)
def _padded_batch(props_items: tuple, config, training: bool, most: int, *plan_flags) -> int:
    def groups(batch):   # batch groups of the plans at ``batch``, None where they do not fit
        try:
            plans = _plans_for(props_items, config.replace(batch=batch), training, "auto", *plan_flags)
        except NotSupported:
            return None
        return sum(getattr(plan, "batch_groups", 1) for plan in plans.values())
    have = groups(config.batch)
    for batch in range(config.batch + 1, config.batch + most + 1):
        more = groups(batch)
        if more is not None and (have is None or more > have):
            return batch
    return config.batch


# ---- weights ----------------------------------------------------------------------------------
@dataclass
class PreparedLayer:
    w_ih: object   # [4H, K] gate-interleaved fp32
    w_hh: object   # [4H, H] gate-interleaved fp32
    bias: object   # [4H] b_ih + b_hh, gate-interleaved fp32
    w_ih_parts: tuple = None   # gpu_blas.tf32_parts(w_ih), made at the first 3xTF32 projection
    w_ih_16bit: object = None  # w_ih in the layer's 16-bit storage, made at the first 16-bit GEMM
    w_ih_split16: tuple = None  # v28: gpu_blas.fp16_split3(w_ih, True), made at the first fp16-split projection
    w_ih_split3: dict = field(default_factory=dict)  # v25: {transposed: gpu_blas.tf32_split3 of w_ih.T / w_ih},
                                                     # made at the first one-pass projection / dX
    w_ih_split3_chunked: dict = field(default_factory=dict)   # v36: {(transposed, chunk): the same in chunks}
    w_ih_split16_chunked: dict = field(default_factory=dict)  # v36: {chunk: w_ih_split16 in chunks}

    def input_weight_parts(self) -> tuple:
        if self.w_ih_parts is None:
            from ..gpu_blas import tf32_parts
            self.w_ih_parts = tf32_parts(self.w_ih)
        return self.w_ih_parts

    def input_weight_split3(self, transposed: bool, chunk=None):
        """w_ih.T [3K, 4H] (the projection's; a view of [4H, 3K]) or w_ih [12H, K] (dX's) as the right
        operand of gpu_blas.matmul_3xtf32_onepass (v36: split in ``chunk``s of the reduction)."""
        from ..gpu_blas import tf32_split3
        made = self.w_ih_split3 if chunk is None else self.w_ih_split3_chunked
        key = transposed if chunk is None else (transposed, chunk)
        if key not in made:
            made[key] = tf32_split3(self.w_ih.T if transposed else self.w_ih, 0, False, chunk)
        return made[key]

    def input_weight_split16(self, chunk=None) -> tuple:
        """(w_ih's rows as fp16 (lo, hi, hi) parts [4H, 3K], their exponents [4H]): the right operand of
        gpu_blas.matmul_fp16_split3 (v36: split in ``chunk``s of the reduction)."""
        from ..gpu_blas import fp16_split3
        if chunk is not None:
            if chunk not in self.w_ih_split16_chunked:
                self.w_ih_split16_chunked[chunk] = fp16_split3(self.w_ih, True, chunk=chunk)
            return self.w_ih_split16_chunked[chunk]
        if self.w_ih_split16 is None:
            self.w_ih_split16 = fp16_split3(self.w_ih, True)
        return self.w_ih_split16

    def input_weight_exponents16(self):
        """The exponents [4H] of w_ih's fp16-split rows (the same in every chunked split): from a split made
        before, else from a new unchunked one."""
        made = [self.w_ih_split16] if self.w_ih_split16 is not None else list(self.w_ih_split16_chunked.values())
        return (made[0] if made else self.input_weight_split16())[1]

    def input_weight_16bit(self, dtype: str):
        if self.w_ih_16bit is None:   # exact: the fp32 copy was made from 16-bit weights
            self.w_ih_16bit = _storage16(self.w_ih, dtype)
        return self.w_ih_16bit


@dataclass
class PersistentWeights:
    hidden: int
    slots: list                                   # PreparedLayer per (layer, direction)
    tiles: dict = field(default_factory=dict)     # (layer, pass, kind, tile shape) -> packed [D, ...]
    dtype: str = "float32"                        # storage dtype (the mma kernel's 16-bit format)
    tile_plans: dict = field(default_factory=dict)  # tiles key -> (layer, directions, plan): refresh repacks
    graphs: OrderedDict = field(default_factory=OrderedDict)  # inference forwards (persistent_graph)
    training_sets: OrderedDict = field(default_factory=OrderedDict)  # training (persistent_train_graph)
    refresh_graphs: OrderedDict = field(default_factory=OrderedDict)  # persistent_refresh
    tile_index: dict = field(default_factory=dict)  # tiles key -> gather_index of its pack (refresh)
    last_refresh_key: tuple = None                # the sources of the latest refresh (persistent_refresh)
    last_lookup: tuple = None                     # v61: (stamp, key) of the latest replay (persistent_graph._lookup)


def prepare(config, weights) -> PersistentWeights:
    """Gate-interleaved fp32 copies (tiles for the kernels are packed per plan and cached here)."""
    cp, hidden = _cp(), config.hidden_size
    slots = []
    for w in weights:
        f32 = [cp.asarray(a).astype(cp.float32) for a in w]
        slots.append(PreparedLayer(gate_interleave(f32[0], hidden), gate_interleave(f32[1], hidden),
                                   gate_interleave(f32[2] + f32[3], hidden)))
    return PersistentWeights(hidden, slots, dtype=config.dtype)


def refresh(prepared: PersistentWeights, config, weights) -> None:
    """New values of the same-shaped ``weights`` into ``prepared``'s own arrays: the fp32 copies,
    then every cached derivative (packed tiles, biases, 16-bit and 3xTF32 copies) rebuilt in place.
    The captured graphs read these addresses, so they stay valid and replay the new values (a
    training step refreshes instead of preparing again). From the second refresh from the same
    source arrays on, the refresh itself replays a CUDA graph (persistent_refresh). Ordered on the
    current stream: calls issued before it read the old values, later ones the new; a reserve whose
    backward has not run yet would mix both, so refresh after the backwards of the calls that used
    the old values."""
    _check_same_shapes(prepared, weights)
    for key, (_, _, plan) in prepared.tile_plans.items():   # built outside any capture: they live
        if not _is_split(plan):                              # with the prepared weights
            _tile_index(prepared, key)
    if not persistent_refresh.refresh(prepared, config, weights, _refresh_eager):
        _refresh_eager(prepared, config, weights)


def _check_same_shapes(prepared: PersistentWeights, weights) -> None:
    got = [(tuple(w.w_ih.shape), tuple(w.w_hh.shape)) for w in weights]
    want = [(tuple(s.w_ih.shape), tuple(s.w_hh.shape)) for s in prepared.slots]
    if got != want:
        raise ValueError(f"refresh: expected weights shaped as prepared ({len(want)} layer-directions, "
                         f"H={prepared.hidden}, [W_ih, W_hh] shapes {want}), got {len(got)}: {got}")


def _refresh_eager(prepared: PersistentWeights, config, weights) -> None:
    """The refresh, launch by launch (what a refresh graph captures): one casting copy per fp32 copy,
    one gather per packed tile (the packs are pure layouts: _tile_index), then the 16-bit and 3xTF32
    copies from the new fp32 ones. Bitwise what a fresh prepare and packing would hold."""
    cp, hidden = _cp(), prepared.hidden
    for old, w in zip(prepared.slots, weights):
        _interleave_into(old.w_ih, w.w_ih, hidden)
        _interleave_into(old.w_hh, w.w_hh, hidden)
        _interleave_into(old.bias, cp.asarray(w.b_ih).astype(cp.float32) + cp.asarray(w.b_hh).astype(cp.float32),
                         hidden)
        if old.w_ih_parts is not None:
            from ..gpu_blas import tf32_parts
            for part, made in zip(old.w_ih_parts, tf32_parts(old.w_ih)):
                cp.copyto(part, made)
        from ..gpu_blas import fp16_split3, tf32_split3
        splits16 = dict(old.w_ih_split16_chunked)
        if old.w_ih_split16 is not None:
            splits16[None] = old.w_ih_split16
        for chunk, split in splits16.items():
            for part, made in zip(split, fp16_split3(old.w_ih, True, chunk=chunk)):
                cp.copyto(part, made)
        splits3 = dict(((t, None), a) for t, a in old.w_ih_split3.items()) | old.w_ih_split3_chunked
        for (transposed, chunk), split in splits3.items():
            cp.copyto(split, tf32_split3(old.w_ih.T if transposed else old.w_ih, 0, False, chunk))
        if old.w_ih_16bit is not None:
            cp.copyto(old.w_ih_16bit, _storage16(old.w_ih, prepared.dtype))
    for key, packed in prepared.tiles.items():
        if key[0] == "bias":                     # _biases: [D, 4H]
            s0 = slot(key[1], 0, packed.shape[0])
            for d in range(packed.shape[0]):
                cp.copyto(packed[d], prepared.slots[s0 + d].bias)
            continue
        if key[0] == "xw_col_exp":               # _xw_column_exponents: [D, 4H]
            s0 = slot(key[1], 0, packed.shape[0])
            for d in range(packed.shape[0]):
                cp.copyto(packed[d], prepared.slots[s0 + d].input_weight_exponents16())
            continue
        if key[0] in ("unscale", "input_lo"):    # rewritten with their split tiles
            continue
        layer, directions, plan = prepared.tile_plans[key]
        if _is_split(plan):                      # values, not a layout: split the refreshed fp32 copies again
            _split_tiles_into(prepared, key, layer, directions, plan)
            continue
        index, matrix = _tile_index(prepared, key), _tile_matrix(key)
        for d in range(directions):
            s = slot(layer, d, directions)
            source = (_bits16(getattr(weights[s], matrix)) if plan.kind == "mma"   # the framework's 16-bit values
                      else getattr(prepared.slots[s], matrix))                    # the refreshed fp32 copy
            gather(source, index, packed[d].view(source.dtype))


def _interleave_into(dst, src, hidden: int) -> None:
    """gate_interleave(src) cast into ``dst`` (C order) by one strided copy."""
    cp = _cp()
    src = cp.asarray(src)
    cp.copyto(dst.reshape((hidden, 4) + dst.shape[1:]), src.reshape((4, hidden) + src.shape[1:]).swapaxes(0, 1),
              casting="unsafe")


def _bits16(a):
    """A 16-bit array's bits as uint16, C order."""
    cp = _cp()
    a = cp.ascontiguousarray(cp.asarray(a))
    if a.dtype.itemsize != 2:
        raise ValueError(f"refresh: expected 16-bit weights for the tensor-core tiles, got {a.dtype}")
    return a.view(cp.uint16)


def _tile_index(prepared: PersistentWeights, key):
    """gather_index of the pack behind ``prepared.tiles[key]`` (cached): the same transforms as _tiles,
    on element indices. mma tiles index the framework's gate-blocked 16-bit W_hh, the others the
    gate-interleaved fp32 copy."""
    if key not in prepared.tile_index:
        layer, directions, plan = prepared.tile_plans[key]
        matrix = _tile_matrix(key)
        rows, cols = getattr(prepared.slots[slot(layer, 0, directions)], matrix).shape
        interleave = plan.kind == "mma"   # its source is the framework's gate-blocked weights

        def layout(ids):
            return _pack(plan, gate_interleave(ids, prepared.hidden) if interleave else ids, order_only=True,
                         matrix=matrix)
        prepared.tile_index[key] = gather_index(layout, rows, cols, _cp())
    return prepared.tile_index[key]


def _tiles(prepared: PersistentWeights, layer: int, directions: int, plan, matrix: str = "w_hh"):
    """Packed tiles of all directions of ``layer`` for ``plan`` ([D, blocks, ...]): the recurrent
    weights, or with matrix="w_ih" the input weights of an in-kernel projection (v12)."""
    key = _tile_key(layer, plan, matrix)
    if key not in prepared.tiles:
        if _is_split(plan):
            tiles, unscale, low = _split_pack(prepared, layer, directions, plan, matrix)
            prepared.tiles[key], prepared.tiles[("unscale", key)] = tiles, unscale
            if low is not None:
                prepared.tiles[("input_lo", key)] = low
        else:
            mats = [getattr(prepared.slots[slot(layer, d, directions)], matrix) for d in range(directions)]
            prepared.tiles[key] = _cp().stack([_pack(plan, m, matrix=matrix) for m in mats])
        prepared.tile_plans[key] = (layer, directions, plan)
    return prepared.tiles[key]


# ---- v13: fp32 W_hh as fp16 hi/lo halves for the tensor cores ---------------------------------------
SPLIT_MAX_WEIGHT = 2.0 ** 14   # the scaled max|w| lands in (2^13, 2^14]: fp16's max is 65504, and tiny weights
                               # would lose precision as fp16 subnormals
SPLIT_LO_SCALE = 2048.0        # the kernel's kLoScale: lo = (w - hi) * 2^11 stays a normal fp16


def _is_split(plan) -> bool:
    return plan.kind == "mma" and plan.parts == 2


def split_halves(w, xp):
    """(hi, lo, unscale) of fp32 ``w``: w * scale = hi + lo / 2^11 (both fp16-exact fp32 arrays, hi
    rounded to nearest) with scale = 2^-e the power of two that brings max|w| into
    (SPLIT_MAX_WEIGHT / 2, SPLIT_MAX_WEIGHT], unscale = 1 / scale as a [1] fp32 array. Computed on the
    device (no host sync: refresh runs inside graph captures)."""
    peak = xp.abs(w).max().astype(xp.float32)
    exponent = xp.clip(xp.ceil(xp.log2(xp.maximum(peak, xp.float32(1e-30)) / xp.float32(SPLIT_MAX_WEIGHT))),
                       -100, 100)
    scale = xp.exp2(-exponent).astype(xp.float32)
    scaled = w * scale
    hi = scaled.astype(xp.float16).astype(xp.float32)
    lo = ((scaled - hi) * xp.float32(SPLIT_LO_SCALE)).astype(xp.float16).astype(xp.float32)
    return hi, lo, (1 / scale).reshape(1).astype(xp.float32)


def _split_pack(prepared: PersistentWeights, layer: int, directions: int, plan, matrix: str = "w_hh"):
    """([D, blocks, ...] split tiles, [D] unscale factors, None) of ``layer``'s W_hh for ``plan``; v29,
    the W_ih of the split's in-kernel projection: (its hi fragments, [D] unscale factors, its lo halves
    [D, 4H, K] as fp16: the right operand of the x_hi W_lo^T GEMM)."""
    cp = _cp()
    tiles, unscales, lows = [], [], []
    for d in range(directions):
        hi, lo, unscale = split_halves(getattr(prepared.slots[slot(layer, d, directions)], matrix), cp)
        if matrix == "w_ih":
            tiles.append(pack_mma_fragments(hi, plan.input_tile_shape(), False))
            lows.append(lo.astype(cp.float16))
        else:
            tiles.append(pack_split_fragments(hi, lo, plan.tile_shape()))
        unscales.append(unscale)
    return cp.stack(tiles), cp.concatenate(unscales), cp.stack(lows) if lows else None


def _split_tiles_into(prepared: PersistentWeights, key, layer: int, directions: int, plan) -> None:
    tiles, unscale, low = _split_pack(prepared, layer, directions, plan, _tile_matrix(key))
    _cp().copyto(prepared.tiles[key], tiles)
    _cp().copyto(prepared.tiles[("unscale", key)], unscale)
    if low is not None:
        _cp().copyto(prepared.tiles[("input_lo", key)], low)


def _split_unscale(prepared: PersistentWeights, layer: int, plan):
    """The unscale factors of ``layer``'s split tiles (made with them by _tiles): [D] of W_hh, or with
    the in-kernel projection (v29) [D, 2] of W_hh and W_ih."""
    hh = prepared.tiles[("unscale", _tile_key(layer, plan, "w_hh"))]
    if not plan.in_kernel_projection:
        return hh
    return _cp().stack((hh, prepared.tiles[("unscale", _tile_key(layer, plan, "w_ih"))]), axis=1)


def _tile_key(layer: int, plan, matrix: str) -> tuple:
    if matrix == "w_ih":
        return (layer, "input", plan.kind, plan.input_tile_shape())
    return (layer, plan.pass_name, plan.kind, plan.tile_shape())


def _tile_matrix(key: tuple) -> str:
    """Which weights the tiles under ``key`` hold ("w_ih" or "w_hh")."""
    return "w_ih" if key[1] == "input" else "w_hh"


def _pack(plan, matrix_values, order_only=False, matrix="w_hh"):
    """``plan``'s tile of the gate-interleaved [4H, H] W_hh (transposed for the grid and mma
    backward; rows: the forward's rows), or of the [4H, K] W_ih (matrix="w_ih": the mma forward's
    in-kernel projection, same rows; v51: its first input_part_from columns where the kernel covers only those).
    ``order_only``: the pure-layout part (mma: the values in
    fragment order, not yet packed into 16-bit pairs), which _tile_index applies to indices."""
    cp = _cp()
    shape = plan.input_tile_shape() if matrix == "w_ih" else plan.tile_shape()
    transpose = matrix == "w_hh" and plan.pass_name == "backward" and plan.kind != "rows"
    if matrix == "w_ih" and getattr(plan, "input_part", False):   # v51: the kernel's share of the inputs only
        matrix_values = matrix_values[:, :plan.input_part_from]
    m = cp.ascontiguousarray(matrix_values.T if transpose else matrix_values)
    if plan.kind == "rows":
        return pack_column_tiles(m, shape)
    if plan.kind != "mma":
        return pack_block_rows(m, shape)
    if order_only:
        return mma_fragment_order(m, shape)
    # the fp32 copies hold the 16-bit values exactly: packing re-rounds nothing
    return pack_mma_fragments(m, shape, plan.dtype == "bfloat16")


# ---- kernels ----------------------------------------------------------------------------------
def _register_tiles(plan) -> int:
    """How much of ``plan``'s tile lives in registers (columns, k-tiles for the mma kernel, weights
    per thread for the rows kernel)."""
    if plan.kind == "rows":
        return plan.cols_per_thread * 4 * plan.units
    return plan.reg_k_tiles if plan.kind == "mma" else plan.reg_cols


def _fewer_register_tiles(plan, props: dict, local_bytes: int | None = None):
    """``plan`` after its build spilled (``local_bytes``: the build's local memory, if known): part of its register
    tile moved to shared memory, or NotSupported when nothing is left to move or the remainder does not fit shared
    memory."""
    what = f"{plan.kind} {plan.pass_name} kernel"
    if plan.kind == "rows":   # all its weights must be registers: the grid backward takes over
        raise NotSupported(name, f"{what} spills registers ({plan.describe()})")
    if plan.kind == "mma" and plan.input_reg_k_tiles:   # v52: first the projection's register tiles, half at a time
        return capacity.with_input_reg_tiles(plan, plan.input_reg_k_tiles // 2)
    if plan.kind in ("mma", "grid") and plan.in_kernel_projection:   # then the optional projection
        return capacity.without_input_projection(plan)
    if _register_tiles(plan) == 0:
        raise NotSupported(name, f"{what} uses local memory even without register tiles")
    if plan.kind == "mma":
        smaller = plan.with_reg_tiles(plan.reg_k_tiles - 1)
    else:
        smaller = plan.with_reg_cols(max(0, plan.reg_cols - REG_COL_BACKOFF))
    room = props["smem_per_block_optin"] - (capacity.MMA_STATIC_SMEM_BYTES if plan.kind == "mma" else 0)
    if smaller.smem_bytes > room and _moves_outputs(plan):   # v58: the output delta's registers before NotSupported
        return plan.without_moved_outputs()
    if smaller.smem_bytes > room:
        raise NotSupported(name, f"{what}: the tile spills registers and the remainder does not fit "
                                 f"shared memory ({smaller.smem_bytes} > {room} B)")
    if plan.kind == "grid" and local_bytes is not None and local_bytes <= FINE_BACKOFF_BYTES:
        # v58: a near miss gives up one column, where the coarse step would also fit: a plan the coarse back-off
        # gives up on keeps its fallback (fp32 H=1536 B=3's FFMA forward at 22 columns read 4.81 us/step against its
        # split fallback's 4.24: results/persistent_v58 call 11)
        return plan.with_reg_cols(plan.reg_cols - 1)
    return smaller


def _moves_outputs(plan) -> bool:
    """v58: whether ``plan`` is a tensor-core forward built with the output delta (v56; OUT_DELTA)."""
    return plan.kind == "mma" and plan.pass_name == "forward" and plan.moves_outputs


def _flag_defines() -> dict:
    """Compile-time constants that engine flags (ablations) set on every persistent kernel."""
    return {**({} if X_PREFETCH else {"X_PREFETCH": 0}), **({} if FAST_FP32_GATES else {"FAST_FP32_GATES": 0}),
            **({"XW_AT_LOAD": 1} if XW_AT_LOAD else {}), **({} if H0_IN_PRODUCT else {"H0_IN_PRODUCT": 0}),
            **({} if H0_WIDE_LOADS else {"H0_WIDE_LOADS": 0}),
            **({"STEP_CLOCKS": int(STEP_CLOCKS)} if STEP_CLOCKS else {}),
            **({} if DIAG_IN_K_TILES_USED is None else {"DIAG_IN_K_TILES_USED": int(DIAG_IN_K_TILES_USED)}),
            **({} if DIAG_X_STAGE_EVERY is None else {"DIAG_X_STAGE_EVERY": int(DIAG_X_STAGE_EVERY)})}


def _module(plan, cooperative: bool = True):
    """The compiled module of ``plan`` under the engine's flags (cached by gpu.compile_module)."""
    from ..gpu import compile_module
    return compile_module(plan.kernel_file, {**plan.defines(), **_flag_defines()}, cooperative=cooperative)


def kernel_global(plan, name: str):
    """(final plan, MemoryPointer) of the module global ``name`` of ``plan``'s build on this device (after its
    spill back-off): v37's step clocks."""
    final, _ = _kernel(plan, _device_id())
    return final, _module(final).get_global(name)


def _compile_without_spills(plan, function: str, cooperative: bool):
    """(plan, RawKernel) of the first build of ``plan`` (or of it with fewer register tiles) that
    uses no local memory, with its dynamic shared memory set."""
    props = _props()
    while True:
        kern = _module(plan, cooperative).get_function(function)
        if kern.local_size_bytes <= DIAG_SPILL_BYTES_ACCEPTED:
            break
        plan = _fewer_register_tiles(plan, props, kern.local_size_bytes)
    kern.max_dynamic_shared_size_bytes = plan.smem_bytes
    return plan, kern


def _remembered(build):
    """Cache a kernel build per (plan, device), its NotSupported too: a plan that does not build
    (spills, not co-resident) is not compiled again on every call that falls back from it."""
    outcomes = {}

    @functools.wraps(build)
    def cached(plan, device_id: int):
        key = (plan, device_id, X_PREFETCH, FAST_FP32_GATES, XW_AT_LOAD, H0_IN_PRODUCT, STEP_CLOCKS, CLUSTER_COOPERATIVE,
               DIAG_IN_K_TILES_USED, DIAG_X_STAGE_EVERY, H0_WIDE_LOADS, FINE_BACKOFF_BYTES, DIAG_SPILL_BYTES_ACCEPTED)
        if key not in outcomes:
            try:
                outcomes[key] = (build(plan, device_id), None)
            except NotSupported as exc:
                outcomes[key] = (None, exc)
        result, error = outcomes[key]
        if error is not None:
            raise error
        return result
    return cached


@_remembered
def _kernel(plan, device_id: int):
    """(plan, RawKernel) with 0 spill bytes and a co-resident grid, or NotSupported (grid and mma
    plans: the same kernel names and arguments in persistent_lstm.cu and persistent_mma.cu)."""
    props = _props()
    function = f"persistent_lstm_{'fwd' if plan.pass_name == 'forward' else 'bwd'}"
    clustered = getattr(plan, "cluster_k", 1) > 1
    plan, kern = _compile_without_spills(plan, function, cooperative=CLUSTER_COOPERATIVE or not clustered)
    per_sm = _occupancy(kern, plan)
    if clustered:
        clusters = _max_active_clusters(kern, plan)
        if clusters is None or clusters * plan.cluster_k < plan.grid:
            raise NotSupported(name, f"{plan.pass_name} grid of {plan.grid} blocks in clusters of {plan.cluster_k} "
                                     f"cannot be co-resident ({clusters} active clusters; kernel uses "
                                     f"{kern.num_regs} registers/thread, {plan.smem_bytes} B shared memory)")
    if per_sm * props["sm_count"] < plan.grid:
        raise NotSupported(name, f"{plan.pass_name} grid of {plan.grid} blocks cannot be co-resident "
                                 f"({per_sm} block(s)/SM x {props['sm_count']} SMs; kernel uses "
                                 f"{kern.num_regs} registers/thread, {plan.smem_bytes} B shared memory)")
    return plan, kern


def _occupancy(kern, plan) -> int:
    cp = _cp()
    return cp.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
        kern.kernel.ptr, plan.threads, plan.smem_bytes)


def kernel_report(plan) -> dict:
    """What the compiled kernel of ``plan`` uses (for benchmarks and notes)."""
    final, kern = _kernel(plan, _cp().cuda.Device().id)
    tiles = {"mma": "reg_k_tiles", "rows": "register_weights"}.get(final.kind, "reg_cols")
    return {"kind": final.kind, "registers": kern.num_regs, "local_bytes": kern.local_size_bytes,
            "smem_bytes": final.smem_bytes, tiles: _register_tiles(final), "grid": final.grid,
            "threads": final.threads, "occupancy_per_sm": _occupancy(kern, final),
            "describe": final.describe()}


def _build(plans: dict) -> None:
    """Compile every pass and check co-residency (raises NotSupported) before the first launch."""
    for plan in plans.values():
        build = _cluster_kernel if isinstance(plan, capacity.ClusterPlan) else _kernel
        build(plan, _cp().cuda.Device().id)


def _built_plans(config, training: bool, variant: str) -> dict:
    """Plans of the call, compiled and checked (NotSupported before any launch). Fallbacks, in
    order: the forward without thread-block clusters (v42) where the clustered one does not build or co-reside; the
    fp32 grid backward in fewer batch groups, then none (v41), where the grouped one does not
    build (its registers spill and the rest does not fit shared memory: H=768 B=16 in 4 groups, H=512 B=24 in
    12); the grid backward instead of the rows backward (v7) where the latter does not build;
    under "auto", the fp32 grid kernel instead of tensor-core plans that do not build or co-reside; v43: under "auto",
    an fp32 call's split forward ("mma") where the FFMA forward does not build (H=1536 B=3: its tile spills past shared
    memory; the split builds)."""
    attempts = [(variant, None), (variant, False)]
    if variant == "auto":
        attempts += [("mma", None), ("mma", False)] if config.dtype == capacity.MMA_SPLIT_DTYPE else []
        attempts += [("grid", None), ("grid", False)]
    first_error, tried = None, []
    for plan_variant, by_rows in attempts:
        for clusters in (None, False):   # v42: a clustered forward that does not build or co-reside: none
            for backward_groups in _backward_group_fallbacks(config, training):
                try:
                    plans = _plans(config, training, plan_variant, by_rows, backward_groups, clusters)
                    if plans in tried:
                        continue
                    tried.append(plans)
                    _build(plans)
                    return plans
                except NotSupported as exc:
                    first_error = first_error or exc
    raise first_error


def _backward_group_fallbacks(config, training: bool):
    """v41: the fp32 grid backward's group settings _built_plans tries in turn (a training call's): BACKWARD_GROUPS's,
    then under "auto" each count of rules.grid_backward_group_counts whose grouped plan fits
    (capacity.grouped_grid_backward), then none. A generator: the fallbacks are planned only when a build failed,
    not on every call."""
    yield None
    if not training:
        return
    if BACKWARD_GROUPS == "auto" and config.dtype == "float32":
        props = _props()
        yield from (g for g in rules.grid_backward_group_counts(config.batch)
                    if capacity.grouped_grid_backward(props, config, g) is not None)
    yield False


def _final(plan):
    """``plan`` as built (after any spill back-off: fewer register tiles, no in-kernel projection)."""
    return _kernel(plan, _cp().cuda.Device().id)[0]


def _launch(plan, args_before_dir: tuple, directions: int, bias=None, input_tiles=None, input_size: int = 0,
            unscale=None, x_at=None, out16=False, states16=False, dz16=False, dy16=False, xw_exponents=None,
            xw_part=None, out_at=None, out_shift=0):
    """Launch ``plan``'s kernel once per direction group (dir0 follows ``args_before_dir``). The
    kernels take their zeroed exchange buffer next; the mma forward then the biases [D, 4H] (its xw
    comes without them), the packed W_ih tiles and input size of an in-kernel projection (v12;
    null and 0 otherwise), a zeroed barrier word (one memset with the exchange buffer) and the [D]
    unscale factors of split tiles (v13; null otherwise) and the replay ring's fetched addresses where
    it reads the caller's x there (v21, ``x_at``; null otherwise), whether it stores its outputs as
    16-bit values and whether it reads h0 and c0 as such (v23, ``out16``, ``states16``), and the row and
    column exponents of an xw left scaled by the fp16-split GEMM (v32, ``xw_exponents``; nulls otherwise) and the GEMM's
    share of x W_ih^T where the kernel's projection covers only part of the inputs (v51, ``xw_part``; null). The grid
    forward takes the biases (v15 with its in-kernel projection, v23 with kernel_bias; else null), the
    W_ih tiles and input size of its in-kernel projection (v15; null, 0 otherwise) and xw's exponents
    (v33, as the mma forward). The mma backward
    takes whether it stores dz as 16-bit values (v30, ``dz16``), whether it reads dy as such (v31,
    ``dy16``) and the barrier words. v56: the mma forward last takes the replay ring's fetched words and which outputs
    move by its delta (``out_at``, ``out_shift``; null and 0 otherwise: _moved_outputs)."""
    cp = _cp()
    final, kern = _kernel(plan, cp.cuda.Device().id)
    shape = final.exchange_shape(directions)
    words = int(np.prod(shape))
    with persistent_graph.on_front_branch():   # v59: in a capture, beside the projection (FrontBranch)
        zeroed = cp.zeros(words + 32 * shape[0], cp.uint32)   # barrier words, each on a 128-byte line of its own
                                                              # (v30: one per direction and batch group)
    persistent_graph.join_front_branch()   # the kernel reads h0, c0 and the zeroed words
    tail = (zeroed[:words].reshape(shape),)
    if final.kind == "mma" and final.pass_name == "forward":
        tail += (bias, input_tiles if input_tiles is not None else _null(), np.int32(input_size), zeroed[words:],
                 unscale if unscale is not None else _null(), x_at if x_at is not None else _null(),
                 np.int32(bool(out16)), np.int32(bool(states16)))
        tail += tuple(xw_exponents) if xw_exponents is not None else (_null(), _null())
        if final.input_part and xw_part is None:
            raise ValueError(f"{final.describe()}: the GEMM's share of the projection (xw_part) expected, got none")
        tail += (xw_part if final.input_part else _null(),)
        tail += (out_at if out_at is not None else _null(), np.int32(out_shift))
    elif final.kind == "mma":
        tail += (np.int32(bool(dz16)), np.int32(bool(dy16)), zeroed[words:])
    elif final.kind == "grid" and final.pass_name == "forward":
        tail += (bias if bias is not None else _null(), input_tiles if input_tiles is not None else _null(),
                 np.int32(input_size))
        tail += tuple(xw_exponents) if xw_exponents is not None else (_null(), _null())
    for launch in range(final.launches):
        kern((final.grid,), (final.threads,), args_before_dir + (np.int32(launch),) + tail,
             shared_mem=final.smem_bytes)


def _null():
    return np.uint64(0)


# ---- v3: cluster kernel ---------------------------------------------------------------------------
@functools.lru_cache(maxsize=256)
def _cluster_plan_for(props_items: tuple, hidden: int, batch: int, directions: int):
    return capacity.plan_cluster(dict(props_items), hidden, batch, directions, MAX_CLUSTER)


def cluster_plan(config):
    """The cluster forward plan of ``config`` on this device, or NotSupported (no launch)."""
    if config.dtype not in SUPPORTED_DTYPES:
        raise NotSupported(name, f"dtype {config.dtype} (supported: {', '.join(SUPPORTED_DTYPES)})")
    props = _props()
    return _cluster_plan_for(tuple(sorted(props.items())), config.hidden_size, config.batch,
                             config.num_directions)


class _LaunchConfig(ctypes.Structure):   # CUlaunchConfig (cuda.h)
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                ("attrs", ctypes.c_void_p), ("numAttrs", ctypes.c_uint)]


def _libcuda():
    """The driver library CuPy runs on (None where it cannot be loaded)."""
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None


def _allow_non_portable_cluster(kern) -> None:
    lib = _libcuda()
    rc = -1 if lib is None else lib.cuFuncSetAttribute(ctypes.c_void_p(kern.kernel.ptr),
                                                       _NON_PORTABLE_CLUSTER_ATTR, 1)
    if rc != 0:
        raise NotSupported(name, f"cluster of more than 8 blocks: could not set the non-portable cluster "
                                 f"size attribute (libcuda {'missing' if lib is None else f'error {rc}'})")


def _max_active_clusters(kern, plan):
    """cuOccupancyMaxActiveClusters for the launch, or None where the driver call is unavailable."""
    lib = _libcuda()
    if lib is None or not hasattr(lib, "cuOccupancyMaxActiveClusters"):
        return None
    config = _LaunchConfig(plan.grid, 1, 1, plan.threads, 1, 1, plan.smem_bytes, None, None, 0)
    count = ctypes.c_int(0)
    rc = lib.cuOccupancyMaxActiveClusters(ctypes.byref(count), ctypes.c_void_p(kern.kernel.ptr),
                                          ctypes.byref(config))
    return count.value if rc == 0 else None


@_remembered
def _cluster_kernel(plan, device_id: int):
    """(plan, RawKernel) with 0 spill bytes and every direction's cluster resident at once, or
    NotSupported. An ordinary launch: the cluster size is compiled in (__cluster_dims__)."""
    plan, kern = _compile_without_spills(plan, "persistent_cluster_fwd", cooperative=False)
    if plan.cluster > 8:
        _allow_non_portable_cluster(kern)
    per_sm = _occupancy(kern, plan)
    clusters = _max_active_clusters(kern, plan)
    if per_sm < 1 or (clusters is not None and clusters < plan.directions):
        raise NotSupported(name, f"cluster kernel: {plan.directions} cluster(s) of {plan.cluster} blocks cannot "
                                 f"be resident at once ({per_sm} block(s)/SM, {clusters} active cluster(s); "
                                 f"{kern.num_regs} registers/thread, {plan.smem_bytes} B shared memory)")
    return plan, kern


def cluster_kernel_report(plan) -> dict:
    """What the compiled cluster kernel of ``plan`` uses (for benchmarks and notes)."""
    final, kern = _cluster_kernel(plan, _device_id())
    return {"registers": kern.num_regs, "local_bytes": kern.local_size_bytes, "smem_bytes": final.smem_bytes,
            "reg_cols": final.reg_cols, "grid": final.grid, "cluster": final.cluster,
            "threads": final.threads, "occupancy_per_sm": _occupancy(kern, final),
            "max_active_clusters": _max_active_clusters(kern, final), "describe": final.describe()}


def _launch_cluster(plan, args: tuple):
    final, kern = _cluster_kernel(plan, _device_id())
    persistent_graph.join_front_branch()   # v59: the kernel reads h0 and c0
    kern((final.grid,), (final.threads,), args, shared_mem=final.smem_bytes)


def auto_takes_cluster(plan) -> bool:
    """Whether variant "auto" runs this fitting cluster plan for an inference forward (CLUSTER_DEFAULT:
    "auto" where rules.cluster_pays, True wherever it fits; at most AUTO_MAX_CLUSTER blocks)."""
    if not CLUSTER_DEFAULT or plan.cluster > AUTO_MAX_CLUSTER:
        return False
    return CLUSTER_DEFAULT is True or rules.cluster_pays(capacity.cluster_issue_slots(plan), plan.batch)


def _cluster_choice(config, training: bool, variant: str):
    """The (built) cluster plan when this call runs the cluster kernel, else None. "cluster" raises
    NotSupported where it does not fit; "auto" uses it for inference where auto_takes_cluster."""
    if variant not in VARIANTS:
        raise ValueError(f"variant: expected one of {VARIANTS}, got {variant!r}")
    if variant in ("grid", "mma") or (variant == "auto" and (training or not CLUSTER_DEFAULT)):
        return None
    if variant == "auto" and config.dtype in capacity.MMA_DTYPES:
        return None   # 16-bit: the tensor-core kernel first, then the grid kernel
    try:
        plan = cluster_plan(config)
        if variant == "auto" and not auto_takes_cluster(plan):
            return None
        _cluster_kernel(plan, _device_id())
    except NotSupported:
        if variant == "cluster":
            raise
        return None
    return plan


# ---- forward ----------------------------------------------------------------------------------
@dataclass
class LayerSave:
    layer_input: object   # [T, B, K] fp32 (after dropout); layer 0 with 16-bit GEMMs: x as given (v17; its
                          # shape is all the backward reads, the GEMMs take layer_input_16bit)
    output: object        # [T, B, D*H] fp32 (h_t of every direction)
    gates: object         # [D, T, B, 4H] activated, gate-interleaved
    cells: object         # [D, T, B, H]
    layer_input_16bit: object = None   # layer_input as _storage16 (16-bit GEMMs), else None


@dataclass
class PersistentReserve:
    config: object
    plans: dict
    weights: PersistentWeights
    h0: object
    c0: object
    layers: list = field(default_factory=list)
    dropout_masks: dict = field(default_factory=dict)
    capture_graphs: object = None   # set by a graph-eligible forward: called by the first backward
    caller_batch: int = None        # v47: the caller's batch where config's is padded (layouts.batch), else None


def _f32(a):
    cp = _cp()
    return cp.ascontiguousarray(a.astype(cp.float32, copy=False))


def _tf32_for(config) -> bool:
    """16-bit dtypes run their GEMMs (input projection, dX, dW) on TF32 tensor cores: fp16 and bf16
    values are exact in TF32 (10-bit mantissa, 8-bit exponent), and fp32 GEMMs cost ~1.3 us/step of
    a 16-bit forward at H=1024 (notes_persistent.md, v2). fp32 keeps fp32 accuracy (strict, or 3xTF32
    for large input projections: FP32_GEMMS)."""
    return config.dtype in capacity.MMA_DTYPES


def _gemm_dtype(config):
    """The 16-bit operand type of the layer GEMMs (SIXTEEN_BIT_GEMMS), or None: fp32 operands."""
    return config.dtype if SIXTEEN_BIT_GEMMS and config.dtype in capacity.MMA_DTYPES else None


def _storage_dtype(dtype: str):
    from . import fused
    return fused.storage_dtype(dtype)


def _storage16(a, dtype: str):
    """``a`` (fp32, or already ``dtype``) as a contiguous array of the 16-bit storage of ``dtype``
    (fp16, or bf16 as raw uint16 words; round to nearest even): an operand of the 16-bit GEMMs."""
    from . import fused   # its conversion kernel (kernels/fused_pointwise.cu)
    cp = _cp()
    if a.dtype.name == dtype and DIRECT_16BIT_INPUT:   # already these values: their bits are the storage (v17)
        a = cp.ascontiguousarray(a)
        if data_address(a) % 16:   # the tensor-core kernel loads x 16 bytes at a time
            a = a.copy()
        return a.view(fused.storage_dtype(dtype))
    a = _f32(a)
    out = cp.empty(a.shape, fused.storage_dtype(dtype))
    cols = a.shape[-1]
    rows = a.size // cols
    convert = fused.kernels(dtype, True, _device_id()).f32_to_storage
    convert(((cols + 127) // 128, min(rows, 65535)), (128,),
            (a, np.int32(cols), out, np.int32(cols), np.int32(rows), np.int32(cols)))
    return out


def _matmul(a, b, out=None, *, accumulate=False, tf32=False, a_parts=None, b_parts=None, a3=None, b3=None,
            chunk=None, a_type="float32"):
    """``a @ b`` into fp32 ``out`` (new if None; added to it with accumulate=True). fp32 operands:
    TF32 with tf32=True, 3xTF32 when ``b_parts`` (tf32_parts(b); ``a_parts`` too where made before)
    are given, one-pass 3xTF32 when ``b3`` (tf32_split3(b, 0, False); ``a3`` likewise) is, else
    strict fp32 (``chunk``, v36: the one pass's operands split in chunks of the reduction, one GEMM each);
    ``a_type`` fp16/bf16: 16-bit operands (_storage16), fp32 accumulation."""
    cp = _cp()
    if out is None:
        out = cp.empty((a.shape[0], b.shape[1]), cp.float32)
    beta = 1.0 if accumulate else 0.0
    if tf32 or a_type != "float32" or is_gpu_array(a):   # ecornn's cuBLAS binding: graph-capturable
        from ..gpu_blas import matmul, matmul_3xtf32, matmul_3xtf32_onepass
        if b3 is not None:
            return matmul_3xtf32_onepass(a, b, out, beta=beta, a3=a3, b3=b3, chunk=chunk)
        if b_parts is not None:
            return matmul_3xtf32(a, b, out, beta=beta, a_parts=a_parts, b_parts=b_parts)
        return matmul(a, b, out, beta=beta, tf32=tf32, a_type=a_type)
    if accumulate:
        out += a @ b
        return out
    return cp.matmul(a, b, out=out)


def _fp32_projection_mode(rows: int, prep, tf32: bool) -> str:
    """How an fp32 projection of ``rows`` rows is computed: TF32 ("strict" with tf32) with ``tf32``; else,
    from MIN_3XTF32_FLOPS on a GPU, as FP32_GEMMS says, unless its reduction over the inputs is long and that
    GEMM cannot run in chunks (v35, v36); else "strict"."""
    flops = 2.0 * rows * prep.w_ih.shape[0] * prep.w_ih.shape[1]
    if tf32 or flops < MIN_3XTF32_FLOPS or not is_gpu_array(prep.w_ih):
        return "strict"
    long_k = _is_long(prep.w_ih.shape[1], FP32_PROJECTION_LONG_FROM_K)
    return "strict" if long_k and not (LONG_REDUCTIONS == "chunked" and FP32_GEMMS in CHUNKED_GEMMS) else FP32_GEMMS


def _is_long(k: int, from_k) -> bool:
    """v35: whether a reduction over ``k`` is long (from ``from_k``; None: never)."""
    return from_k is not None and k >= from_k


def _reduction_chunk(k: int, from_k):
    """v36: the chunk a long fp32 tensor-core reduction over ``k`` runs in (LONG_REDUCTION_CHUNK where
    LONG_REDUCTIONS is "chunked"), else None: one GEMM."""
    return LONG_REDUCTION_CHUNK if LONG_REDUCTIONS == "chunked" and _is_long(k, from_k) else None


def _projection_chunk(prep):
    """v36: the chunk of an fp32 projection's reduction over the layer's inputs (None: one GEMM)."""
    return _reduction_chunk(prep.w_ih.shape[1], FP32_PROJECTION_LONG_FROM_K)


def _fp32_projection(flat, prep, out, tf32: bool, split=None):
    """out = flat W_ih^T on fp32 operands (_fp32_projection_mode; the weight side prepared). Returns
    flat's one-pass split (``split``: made for an earlier direction of the same input) or None."""
    mode, chunk = _fp32_projection_mode(flat.shape[0], prep, tf32), _projection_chunk(prep)
    if mode == "fp16split":   # v28
        from ..gpu_blas import fp16_split3, matmul_fp16_split3
        split = fp16_split3(flat, False, _x_reference(flat), chunk) if split is None else split
        matmul_fp16_split3(*split, *prep.input_weight_split16(chunk), out, chunk=chunk)
        return split
    if mode == "onepass":
        from ..gpu_blas import matmul_3xtf32_onepass, tf32_split3
        split = tf32_split3(flat, 1, True, chunk) if split is None else split
        matmul_3xtf32_onepass(flat, prep.w_ih.T, out, a3=split, b3=prep.input_weight_split3(True, chunk), chunk=chunk)
        return split
    b_parts = tuple(p.T for p in prep.input_weight_parts()) if mode == "3xtf32" else None
    _matmul(flat, prep.w_ih.T, out, tf32=tf32, b_parts=b_parts)
    return split


def _x_reference(flat):
    """v35: the replay ring's fetched addresses where the capture in progress has ``flat`` (the graph's x
    buffer) read by reference (split_reads_x), else None."""
    return persistent_graph.input_reference(flat) if SPLIT_READS_X else None


def _input_projections(layer_input, preps, tf32=False, with_bias=True, input_16bit=None, gemm_dtype=None):
    """[D, T, B, 4H]: every direction's x W_ih^T (+ b) (one GEMM each, written in place). With
    ``gemm_dtype``, a 16-bit GEMM on ``input_16bit`` (layer_input as _storage16)."""
    cp = _cp()
    steps, batch, k = layer_input.shape   # with gemm_dtype only its shape is read (it may be 16-bit)
    out = cp.empty((len(preps), steps * batch, preps[0].w_ih.shape[0]), cp.float32)
    split = None   # v25: the input's one-pass 3xTF32 split, made once for both directions
    for d, prep in enumerate(preps):
        if gemm_dtype is not None:
            _matmul(input_16bit.reshape(steps * batch, k), prep.input_weight_16bit(gemm_dtype).T, out[d],
                    a_type=gemm_dtype)
        else:
            split = _fp32_projection(layer_input.reshape(steps * batch, k), prep, out[d], tf32, split)
        if with_bias:
            out[d] += prep.bias
    return out.reshape(len(preps), steps, batch, -1)


def input_part_projection(x16, preps, plan):
    """v51 (plan.input_part): [D, T, B, 4H] x W_ih^T over the input columns from plan.input_part_from on, without
    biases: one 16-bit GEMM per direction on both operands' column ranges as views (no copies); zeros where the
    layer's input ends within the kernel's share."""
    from ..gpu_blas import matmul_rows
    cp = _cp()
    steps, batch, k = x16.shape
    k0, rows, cols = plan.input_part_from, steps * batch, preps[0].w_ih.shape[0]
    if k <= k0:
        return cp.zeros((len(preps), steps, batch, cols), cp.float32)
    out = cp.empty((len(preps), rows, cols), cp.float32)
    x_rest = cp.ascontiguousarray(x16).reshape(rows, k)[:, k0:]
    for d, prep in enumerate(preps):
        matmul_rows(x_rest, prep.input_weight_16bit(plan.dtype)[:, k0:], out[d], rows=rows, cols=cols, inner=k - k0,
                    lda=k, ldb=k, ldc=cols, a_type=plan.dtype)
    return out.reshape(len(preps), steps, batch, cols)


def _scaled_split_projections(layer_input, preps):
    """v32: ([D, T, B, 4H] every direction's x W_ih^T as the fp16-split GEMM leaves it, in its operands'
    scaled units and without biases; x's row exponents [T B]). The split kernel unscales each value
    where it loads it (xw_exponents), so no pass reads and writes xw for that."""
    from ..gpu_blas import fp16_split3, matmul_fp16_split3
    steps, batch, k = layer_input.shape
    out = _cp().empty((len(preps), steps * batch, preps[0].w_ih.shape[0]), np.float32)
    flat = layer_input.reshape(steps * batch, k)
    chunk = _projection_chunk(preps[0])
    split = fp16_split3(flat, False, _x_reference(flat), chunk)
    for d, prep in enumerate(preps):
        matmul_fp16_split3(*split, *prep.input_weight_split16(chunk), out[d], unscale=False, chunk=chunk)
    return out.reshape(len(preps), steps, batch, -1), split[1]


def _xw_column_exponents(prepared: PersistentWeights, layer: int, directions: int):
    """[D, 4H] exponents of ``layer``'s fp16-split W_ih rows (the xw columns' units): one direction's
    own array, two directions' stacked once (rewritten by refresh)."""
    s0 = slot(layer, 0, directions)
    if directions == 1:
        return prepared.slots[s0].input_weight_exponents16()
    key = ("xw_col_exp", layer)
    if key not in prepared.tiles:
        prepared.tiles[key] = _cp().stack([p.input_weight_exponents16() for p in prepared.slots[s0:s0 + directions]])
    return prepared.tiles[key]


def _unscales_xw_in_kernel(config, built, prep) -> bool:
    """Whether a forward's xw comes from the fp16-split GEMM left scaled, unscaled by the kernel where it
    loads it (XW_UNSCALE_IN_KERNEL): v32 the split forward, v33 the fp32 grid forward that adds its biases
    (kernel_bias: the scaled xw comes without them); "auto": where rules.split_xw_unscale_pays /
    rules.grid_xw_unscale_pays."""
    split, grid = _is_split(built), built.kind == "grid" and built.kernel_bias
    if not XW_UNSCALE_IN_KERNEL or not (split or grid) or built.in_kernel_projection \
            or _fp32_projection_mode(config.seq_len * config.batch, prep, _tf32_for(config)) != "fp16split":
        return False
    if XW_UNSCALE_IN_KERNEL == "auto":
        return rules.split_xw_unscale_pays(built) if split else rules.grid_xw_unscale_pays(built)
    return True


def _biases(prepared: PersistentWeights, layer: int, directions: int):
    """[D, 4H] biases of ``layer`` (the mma forward adds them itself), cached with the tiles."""
    key = ("bias", layer)
    if key not in prepared.tiles:
        s0 = slot(layer, 0, directions)
        prepared.tiles[key] = _cp().stack([p.bias for p in prepared.slots[s0:s0 + directions]])
    return prepared.tiles[key]


def _output_layout(config) -> tuple:
    """(offset, shape) of the forward's output, hT and cT in one buffer, each 256 bytes aligned, and its size."""
    return persistent_graph.packed_layout(((config.seq_len, config.batch, config.num_directions * config.hidden_size),
                                           config.state_shape, config.state_shape))


def _output_views(config, dtype=np.float32):
    """(buffer, (output, hT, cT)): the three outputs (fp32, or v23's 16-bit) as views of one buffer
    (v17), so a 16-bit forward casts them with one kernel and a graph replay copies them out with one memcpy."""
    if not ONE_OUTPUT_BUFFER:
        return None, tuple(_output(shape, dtype) for shape in (config.output_shape, config.state_shape,
                                                                config.state_shape))
    layout, size = _output_layout(config)
    buffer = _output((size,), dtype)
    return buffer, persistent_graph.buffer_views(buffer, layout)


def _output(shape, dtype=np.float32):
    """A buffer every element of which a kernel writes (NaN-poisoned under tests; 16-bit storage words:
    0x7fff, a NaN in fp16 and in bf16)."""
    cp = _cp()
    if not POISON_OUTPUTS:
        return cp.empty(shape, dtype)
    return cp.full(shape, 0x7fff if np.dtype(dtype).kind == "u" else np.nan, dtype)


@contextlib.contextmanager
def _last_kinds_kept():
    """last_kinds as the call ran it, whatever a capture inside (which runs the call again) records."""
    kinds = dict(last_kinds)
    try:
        yield
    finally:
        last_kinds.clear()
        last_kinds.update(kinds)


_modes = {}   # v60: variant -> (flag_changes.assignments when it was built, its mode)


def _graph_mode(variant) -> tuple:
    """What a captured graph depends on besides the configuration and dtypes: built again only after an assignment
    to a flag module (v60: ~1.4 µs per replay after a device sync, before the launch), hashed once."""
    made, changes = _modes.get(variant), flag_changes.assignments   # the count read before the flags
    if made is not None and made[0] == changes:
        return made[1]
    mode = flag_changes.HashedTuple(_mode_items(variant))
    _modes[variant] = (changes, mode)
    return mode


def _mode_items(variant) -> tuple:
    return (variant, TAGGED_EXCHANGE, FP32_GEMMS, MIN_3XTF32_FLOPS, FP32_BACKWARD_GEMMS, MIN_3XTF32_BACKWARD_FLOPS,
            BACKWARD_BY_ROWS, SIXTEEN_BIT_GEMMS,
            IN_KERNEL_PROJECTION, UNITS_FASTEST, FP32_TENSOR_CORES, PAIRED_SPLIT, SPLIT_WORDS, POLL_DELAY,
            DIRECT_16BIT_INPUT, ONE_OUTPUT_BUFFER, REGISTER_MODEL, KERNEL_WRITES_16BIT, GRID_KERNEL_BIAS, X_PREFETCH,
            FAST_FP32_GATES, TAGGED_WITH_WAIT, CLUSTER_DEFAULT, AUTO_MAX_CLUSTER, BATCH_GROUPS, GROUP_BARRIERS,
            BACKWARD_16BIT_GRADS, BACKWARD_16BIT_DY, BWD_LATE_LOADS, DEINTERLEAVE_BY_MEMCPY,
            XW_UNSCALE_IN_KERNEL, XW_AT_LOAD, H0_IN_PRODUCT, H0_WIDE_LOADS, FINE_BACKOFF_BYTES, SPLIT_READS_X,
            gpu_blas.UNSCALE_BY_FOURS, gpu_blas.SPLIT_BY_WARPS,
            POLL_SPIN_CYCLES, FP32_LONG_REDUCTION_FROM_K, FP32_PROJECTION_LONG_FROM_K, LONG_REDUCTIONS,
            LONG_REDUCTION_CHUNK, STEP_CLOCKS, DIAG_IN_K_TILES_USED, DIAG_X_STAGE_EVERY, DIAG_SPILL_BYTES_ACCEPTED,
            POLL_BACKOFF_NS,
            INPUT_PART_K_TILES, INPUT_REG_K_TILES,
            FORWARD_WARPS, CLUSTER_K, CLUSTER_WARPS,
            CLUSTER_POLL_DELAY_NS, CLUSTER_COOPERATIVE,
            BATCH_PADDING, rules.MAX_BATCH_PADDING, PAD_READS_X, batch_pad.PAD_BY_KERNEL, CUT_AT_COPY_OUT)


def forward(config, x, weights, h0, c0, *, training=False, dropout=0.0, rng=None, prepared=None,
            variant="auto"):
    """Calls with prepared weights replay CUDA graphs from the second call on (inference:
    persistent_graph; training: persistent_train_graph); everything else runs eagerly."""
    if training:
        return _training_forward(config, x, weights, h0, c0, dropout, rng, prepared, variant)
    mode = _graph_mode(variant)
    replayed = persistent_graph.replay(prepared, config, mode, x, h0, c0)
    if replayed is not None:
        kind, outputs = replayed
        last_kinds.clear()
        last_kinds["forward"] = kind
        return (*outputs, None)
    result = _forward_eager(config, x, weights, h0, c0, prepared=prepared, variant=variant)

    def rerun(x_, h0_, c0_):   # the captured part: the caller's dtypes in; out too where the casts are captured
        out = _forward_eager(config, x_, weights, h0_, c0_, prepared=prepared, variant=variant,
                             cast=persistent_graph.CAPTURE_OUTPUT_CASTS, cut=not CUT_AT_COPY_OUT)
        return (*out[:3], last_kinds["forward"])
    projection_in_kernel = kernel_reads_x(config, x, variant)
    with _last_kinds_kept():   # v59: a front branch where an input projection precedes the kernel (measured: fp32)
        persistent_graph.capture(prepared, config, mode, x, h0, c0, rerun,
                                 x_by_reference=projection_in_kernel
                                 or split_reads_x(config, x, variant, prepared) or pad_reads_x(config, x, variant),
                                 front_branch=not projection_in_kernel)
    return result


def _training_forward(config, x, weights, h0, c0, dropout, rng, prepared, variant):
    """A replayed training set where one is free, else eager (and graph-eligible calls let their
    backward capture the first set)."""
    graphs = persistent_train_graph.wanted(prepared, config, dropout, x)
    mode = _graph_mode(variant)

    def run_forward(x_, h0_, c0_):   # what a set's forward graph captures
        return _forward_eager(config, x_, weights, h0_, c0_, training=True, prepared=prepared, variant=variant)
    runners = (run_forward, _backward_eager)
    if graphs:
        replayed = persistent_train_graph.replay_forward(prepared, config, mode, x, h0, c0, runners)
        if replayed is not None:
            last_kinds.clear()
            last_kinds["forward"] = replayed[3].training_set.reserve.plans["forward"].kind
            return replayed
    out = _forward_eager(config, x, weights, h0, c0, training=True, dropout=dropout, rng=rng,
                         prepared=prepared, variant=variant)
    if graphs:
        out[3].capture_graphs = functools.partial(persistent_train_graph.capture_first, prepared, config, mode,
                                                  persistent_train_graph.like((x, h0, c0)), runners)
    return out


def _forward_eager(config, x, weights, h0, c0, *, training=False, dropout=0.0, rng=None, prepared=None,
                   variant="auto", cast=True, cut=True):
    """The forward, launch by launch; ``cast=False`` leaves the outputs fp32 (graph capture). v47: at a padded
    batch (run_config) on zero-padded x, h0 and c0, the outputs cut back to the caller's columns (``cut=False``,
    v48: left at the padded batch, for a captured graph to cut as it copies them out). v48: the inputs padded by
    one launch (batch_pad), x read where the caller has it when a capture hands it over so (pad_reads_x)."""
    wide = run_config(config, training, variant)
    if wide.batch == config.batch:
        return _forward_at_batch(config, x, weights, h0, c0, training=training, dropout=dropout, rng=rng,
                                 prepared=prepared, variant=variant, cast=cast)
    x_at = persistent_graph.input_reference(x) if PAD_READS_X and batch_pad.kernel_pads(x) else None
    persistent_graph.join_front_branch()   # v59: the padding reads h0 and c0
    x, h0, c0 = batch_pad.pad_inputs((x, h0, c0), wide.batch, x_at=x_at)
    y, hT, cT, reserve = _forward_at_batch(wide, x, weights, h0, c0, training=training, dropout=dropout, rng=rng,
                                           prepared=prepared, variant=variant, cast=cast, caller_batch=config.batch)
    if reserve is not None:
        reserve.caller_batch = config.batch
    if not cut:
        return y, hT, cT, reserve
    return (*_caller_columns(config, (y, hT, cT)), reserve)


def _caller_columns(config, outputs) -> tuple:
    """v47: the first config.batch columns of a padded forward's (output, hT, cT), in one buffer (v17) like
    an unpadded forward's."""
    _, views = _output_views(config, outputs[0].dtype)
    return batch_pad.first_columns_of(outputs, config.batch, outs=views)


def _forward_at_batch(config, x, weights, h0, c0, *, training=False, dropout=0.0, rng=None, prepared=None,
                      variant="auto", cast=True, caller_batch=None):
    """``caller_batch`` (v47, a padded batch): the dropout masks drawn for the caller's columns, as unpadded."""
    cp = _cp()
    _check_dtype(config)
    cluster = _cluster_choice(config, training, variant)       # NotSupported before any launch
    grid_variant = "grid" if variant == "cluster" else variant
    plans = _built_plans(config, training, grid_variant) if cluster is None or training else {}
    if cluster is not None:
        plans = {**plans, "forward": cluster}                  # backward (training) stays v2
    last_kinds.clear()
    last_kinds["forward"] = plans["forward"].kind
    prep = prepared if prepared is not None else prepare(config, weights)
    steps, batch, hidden, dirs = config.seq_len, config.batch, config.hidden_size, config.num_directions
    layer_in = x   # the caller's dtype: converted to fp32 only where something reads fp32
    fwd = plans["forward"]   # one plan for every layer: what it reads and adds is decided once
    built = _final(fwd) if fwd.kind in ("mma", "grid") else fwd
    projection_in_kernel, x16_dtype, reads_f32 = _input_reads(config, fwd, built)
    in_kernel_bias = adds_biases(fwd, built)
    gemm_dtype = _gemm_dtype(config)
    out16 = cast and _kernel_writes_16bit(config, x, fwd, reads_f32)   # v30: training too (y is saved 16-bit)
    out_dtype = x.dtype if out16 else np.float32
    # v23: h0 and c0 read by the kernel as they are (inference: the backward reads c0 as fp32)
    states16 = out16 and not training and h0.dtype == x.dtype and c0.dtype == x.dtype
    h0, c0 = _states_for_kernels(h0, c0, states16)
    reserve = PersistentReserve(config, plans, prep, h0, c0)
    drawn = (steps, caller_batch or batch, dirs * hidden)   # dropout masks: the caller's columns, as unpadded
    packed, (y_last, h_final, c_final) = _output_views(config, out_dtype)
    moved = _moved_outputs(packed, training, _moves_outputs(built))
    for layer in range(config.num_layers):
        s0 = slot(layer, 0, dirs)
        layer_in_16bit = _storage16(layer_in, x16_dtype) if x16_dtype else None
        if reads_f32:
            layer_in = _f32(layer_in)
        split = _is_split(built)
        preps = prep.slots[s0:s0 + dirs]
        xw_exponents = None
        if projection_in_kernel and split:   # v29: x as the split kernel's scaled rows, x_hi W_lo^T after them
            xin = _split_input(layer_in, prep, layer, dirs, built)
        elif _unscales_xw_in_kernel(config, built, preps[0]):   # v32
            xin, row_exp = _scaled_split_projections(layer_in, preps)
            xw_exponents = (row_exp, _xw_column_exponents(prep, layer, dirs))
        elif projection_in_kernel:   # v12 / v15: the kernel reads x (16-bit / fp32) and W_ih tiles itself
            xin = layer_in_16bit if fwd.kind == "mma" else layer_in
        else:
            xin = cp.ascontiguousarray(_input_projections(layer_in, preps, _tf32_for(config),
                                                          not in_kernel_bias, layer_in_16bit, gemm_dtype))
        y = y_last if layer == config.num_layers - 1 else _output((steps, batch, dirs * hidden), out_dtype)
        gates = _output((dirs, steps, batch, 4 * hidden)) if training else None
        cells = _output((dirs, steps, batch, hidden)) if training else None
        states = slice(s0, s0 + dirs)
        args = (_tiles(prep, layer, dirs, fwd), xin, h0[states], c0[states],
                y, h_final[states], c_final[states],
                gates if training else _null(), cells if training else _null(),
                np.int32(steps), np.int32(hidden), np.int32(fwd.units))
        if split:
            args = args[:2] + (split_h0(h0[states], preps, projection_in_kernel),) + args[3:]
        if fwd is cluster:
            _launch_cluster(fwd, args + (np.int32(dirs * hidden),))
        elif projection_in_kernel and split:   # v29
            input_tiles = _tiles(prep, layer, dirs, built, "w_ih")
            _launch(fwd, args + (np.int32(fwd.blocks_per_dir), np.int32(dirs * hidden)), dirs,
                    _biases(prep, layer, dirs), input_tiles, config.layer_input_size(layer),
                    unscale=_split_unscale(prep, layer, built), **moved(layer == config.num_layers - 1))
        elif projection_in_kernel:   # v21: a capture may hand the kernel the caller's x by reference
            x_at = persistent_graph.input_reference(xin) if fwd.kind == "mma" else None
            xw_part = input_part_projection(xin, preps, built) if built.kind == "mma" and built.input_part else None
            _launch(fwd, args + (np.int32(fwd.blocks_per_dir), np.int32(dirs * hidden)), dirs,
                    _biases(prep, layer, dirs), _tiles(prep, layer, dirs, built, "w_ih"),
                    config.layer_input_size(layer), x_at=x_at, out16=out16, states16=states16, xw_part=xw_part,
                    **moved(layer == config.num_layers - 1))
        else:
            _launch(fwd, args + (np.int32(fwd.blocks_per_dir), np.int32(dirs * hidden)), dirs,
                    _biases(prep, layer, dirs) if in_kernel_bias else None,
                    unscale=_split_unscale(prep, layer, built) if split else None, out16=out16,
                    states16=states16, xw_exponents=xw_exponents, **moved(layer == config.num_layers - 1))
        if training:
            reserve.layers.append(LayerSave(layer_in, y, gates, cells, layer_in_16bit))
        layer_in = y
        if training and dropout > 0 and layer < config.num_layers - 1:
            mask = (rng.random(drawn) >= dropout).astype(np.float32) / np.float32(1.0 - dropout)
            reserve.dropout_masks[layer] = cp.asarray(pad_columns(mask, batch) if caller_batch else mask)
            layer_in = y * reserve.dropout_masks[layer]
    if cast and x.dtype != np.float32 and not out16:   # one cast of the three outputs together
        if packed is None:
            y_last, h_final, c_final = (a.astype(x.dtype) for a in (y_last, h_final, c_final))
        else:
            y_last, h_final, c_final = persistent_graph.buffer_views(packed.astype(x.dtype), _output_layout(config)[0])
    return y_last, h_final, c_final, reserve if training else None


MOVE_Y, MOVE_STATES = 1, 2   # v56: the out_shift bits (persistent_mma.cu's kMoveY: y; kMoveStates: hT and cT)


def _moved_outputs(packed, training: bool, mma_forward: bool):
    """v56: ``moved(last_layer)`` -> the keyword arguments of a layer's tensor-core forward launch that let a replay
    move its outputs into the caller's new buffer (persistent_graph.output_reference: in a capture with a ring, the
    packed buffer recorded; y moves on the last layer only, hT and cT on every layer), or none."""
    out_at = persistent_graph.output_reference(packed) if mma_forward and not training else None
    if out_at is None:
        return lambda last_layer: {}
    return lambda last_layer: {"out_at": out_at, "out_shift": (MOVE_Y if last_layer else 0) | MOVE_STATES}


def adds_biases(fwd, built) -> bool:
    """Whether the forward kernel of plan ``fwd`` (``built``: as compiled) adds the biases itself: the
    tensor-core kernel, an in-kernel projection (v12, v15), a grid plan with kernel_bias (v23); else
    the projection's xw gets them from an add kernel."""
    return fwd.kind == "mma" or (built.kind == "grid" and (built.in_kernel_projection or built.kernel_bias))


def _kernel_writes_16bit(config, x, fwd, reads_f32: bool) -> bool:
    """v23: whether a forward's kernels (v30: training ones too) store y, hT and cT as x's 16-bit values: the
    tensor-core kernel, x in the layer's dtype, and no layer reading fp32 (a layer's 16-bit y then
    feeds the next layer as the rounding to 16 bits it would get anyway)."""
    return (KERNEL_WRITES_16BIT and fwd.kind == "mma" and config.dtype in capacity.MMA_DTYPES
            and x.dtype.name == config.dtype and not reads_f32)


def _input_reads(config, fwd, built) -> tuple:
    """(projection in the kernel, 16-bit dtype of the layer input's copy or None, whether x is read
    as fp32) of a forward of plan ``fwd`` (``built``: as compiled, after any spill back-off)."""
    projection_in_kernel = built.kind in ("mma", "grid") and built.in_kernel_projection
    if projection_in_kernel and _is_split(built):   # v29: the split kernel reads split_x_rows of fp32 x
        return True, None, True
    gemm_dtype = _gemm_dtype(config)
    x16_dtype = config.dtype if projection_in_kernel and fwd.kind == "mma" else gemm_dtype
    reads_f32 = (not DIRECT_16BIT_INPUT or gemm_dtype is None   # fp32 GEMM operands (projection, dW_ih)
                 or (projection_in_kernel and fwd.kind != "mma"))    # the grid kernel reads fp32 x
    return projection_in_kernel, x16_dtype, reads_f32


def kernel_reads_x(config, x, variant: str = "auto") -> bool:
    """v21: whether an inference forward's only reader of ``x`` is layer 0's tensor-core kernel (its
    in-kernel projection on x's own 16-bit values), so a replayed graph may hand the kernel the
    caller's x instead of a copy (persistent_graph.KERNEL_READS_X)."""
    if config.dtype not in capacity.MMA_DTYPES or x.dtype.name != config.dtype or not DIRECT_16BIT_INPUT:
        return False
    if run_config(config, False, variant).batch != config.batch:   # v47: the kernel reads the padded copy of x
        return False
    fwd, built = _inference_forward(config, variant)
    if fwd.kind != "mma":   # (the cluster kernel's too)
        return False
    projection_in_kernel, _, reads_f32 = _input_reads(config, fwd, built)
    return projection_in_kernel and not reads_f32 and not built.input_part   # v51: the GEMM reads x too


def _inference_forward(config, variant: str) -> tuple:
    """(plan, plan as built) of an inference forward's kernel, as _forward_eager picks it."""
    fwd = _cluster_choice(config, False, variant)
    if fwd is None:
        fwd = _built_plans(config, False, "grid" if variant == "cluster" else variant)["forward"]
    return fwd, _final(fwd) if fwd.kind in ("mma", "grid") else fwd


def split_reads_x(config, x, variant: str = "auto", prepared=None) -> bool:
    """v35: whether an inference forward's only reader of fp32 ``x`` is layer 0's fp16 split of it (the
    fp16-split projection's gpu_blas.fp16_split3), so a replayed graph may hand it the caller's x
    instead of a copy (SPLIT_READS_X)."""
    if not SPLIT_READS_X or config.dtype != "float32" or x.dtype != np.float32 or prepared is None:
        return False
    if run_config(config, False, variant).batch != config.batch:   # v47: the split reads the padded copy of x
        return False
    if _input_reads(config, *_inference_forward(config, variant))[0]:   # the kernel projects x itself
        return False
    return _fp32_projection_mode(config.seq_len * config.batch, prepared.slots[0], _tf32_for(config)) == "fp16split"


def pad_reads_x(config, x, variant: str = "auto") -> bool:
    """v48: whether a replayed padded inference forward (run_config) pads x where the caller has it
    (batch_pad.pad_inputs at the replay ring's fetched address, PAD_READS_X), so the graph copies x once."""
    return bool(PAD_READS_X) and batch_pad.kernel_pads(x) and run_config(config, False, variant).batch != config.batch


def _split_input(layer_in, prep: PersistentWeights, layer: int, directions: int, plan):
    """The v29 split kernel's layer input (kernels/persistent_mma.cu, SplitInput): gpu_blas.split_x_rows
    of the fp32 layer input with room for x_hi W_lo^T [D, T B, 4H], filled by one fp16 GEMM per
    direction (fp32 accumulation: exact products, the scaled units the kernel undoes)."""
    from .. import gpu_blas
    _tiles(prep, layer, directions, plan, "w_ih")   # (makes the lo halves with the tiles)
    rows, k, gates = layer_in.shape[0] * layer_in.shape[1], layer_in.shape[2], 4 * prep.hidden
    split = gpu_blas.split_x_rows(layer_in, layer_in.shape[1], directions * rows * gates)
    x_hi, _, _, tail = gpu_blas.split_x_parts(split, rows, k)
    low = prep.tiles[("input_lo", _tile_key(layer, plan, "w_ih"))]
    products = tail.reshape(directions, rows, gates)
    for d in range(directions):
        gpu_blas.matmul(x_hi, low[d].T, products[d], a_type="float16")
    return split


def split_h0(h0, preps, projection_in_kernel: bool):
    """The split forward's h0 argument: h0 (v34, H0_IN_PRODUCT: the kernel scales it into its product), or
    W_hh h0 computed here in strict fp32 (fp16 halves hold h0 only scaled: it is unbounded), as with v29's
    in-kernel projection, whose step-0 product starts from the input product."""
    if H0_IN_PRODUCT and not projection_in_kernel:
        return h0
    persistent_graph.join_front_branch()   # v59: the product reads h0
    return _initial_recurrence(h0, preps)


def _states_for_kernels(h0, c0, states16: bool) -> tuple:
    """h0 and c0 as the forward kernels read them: C-ordered, in x's 16-bit dtype (``states16``) or fp32. v59: where
    that takes a cast or copy, which reads them now, a capture's front branch (their copy) is joined first."""
    def ready(a):
        return a.flags.c_contiguous and (states16 or a.dtype == np.float32)
    if not (ready(h0) and ready(c0)):
        persistent_graph.join_front_branch()
    return tuple(_cp().ascontiguousarray(a) if states16 else _f32(a) for a in (h0, c0))


def _initial_recurrence(h0, preps):
    """h0[d] W_hh^T [D, B, 4H] (gate-interleaved, strict fp32): the split kernel's first step adds it (v32:
    every split forward; before, v29's only, the others' host added it to xw)."""
    out = _cp().empty((len(preps), h0.shape[1], preps[0].w_hh.shape[0]), np.float32)
    for d, prep in enumerate(preps):
        _matmul(h0[d], prep.w_hh.T, out[d])
    return out


# ---- backward ---------------------------------------------------------------------------------
@dataclass
class ShiftedHidden:
    """h_{t-1} of every t without the copy _previous_hidden makes (v30, 16-bit GEMMs): the direction's
    outputs [T*B, H] (a contiguous view) shifted one step, h0 [B, H] at the sequence's start."""
    outputs: object
    h0: object
    reverse: bool


def _hidden_operand(output, h0, direction: int, hidden: int, shifted: bool):
    """What dW_hh is taken against: a ShiftedHidden where ``shifted`` and the direction's outputs are
    contiguous (one direction, T > 1), else _previous_hidden's copy."""
    flat = output[..., direction * hidden:(direction + 1) * hidden].reshape(-1, hidden)
    if shifted and flat.flags.c_contiguous and flat.shape[0] > h0.shape[0]:
        return ShiftedHidden(flat, h0, direction == 1)
    return _previous_hidden(output, h0, direction, hidden)


def _shifted_hidden_grad(op, h_prev: ShiftedHidden, tf32: bool, a_type: str, out=None):
    """dW_hh = op^T h_{t-1} as two GEMMs on views: the B rows at the sequence's start against h0, the
    rest against the outputs one step before them (into ``out``: fp32, or v31 16-bit, if given)."""
    b = h_prev.h0.shape[0]
    if h_prev.reverse:
        body_dz, edge_dz, body_h = op[:-b], op[-b:], h_prev.outputs[b:]
    else:
        body_dz, edge_dz, body_h = op[b:], op[:b], h_prev.outputs[:-b]
    out = _matmul(edge_dz.T, h_prev.h0, out, tf32=tf32, a_type=a_type)
    return _matmul(body_dz.T, body_h, out, accumulate=True, tf32=tf32, a_type=a_type)


def _previous_hidden(output, h0, direction: int, hidden: int):
    """h_{t-1} in processing order for every t, [T, B, H]."""
    cp = _cp()
    h = output[..., direction * hidden:(direction + 1) * hidden]
    if direction == 1:
        return cp.concatenate([h[1:], h0[None]], axis=0)
    return cp.concatenate([h0[None], h[:-1]], axis=0)


def _weight_grads(dz, layer_input, h_prev, hidden: int, dtype, tf32: bool = False, dz_operand=None,
                  a_type="float32", parts=None) -> LayerWeights:
    """Framework-layout gradients in ``dtype`` from interleaved fp32 dz [T*B, 4H] (v31's mma backward's
    16-bit dz: _layer_grads_16bit); the GEMMs take ``dz_operand`` (dz as _storage16, with 16-bit
    ``layer_input`` / ``h_prev`` and ``a_type``) when given. ``parts``: Fp32BackwardParts, the fp32
    GEMMs that run as 3xTF32 (v22, v25). The bias gradient is a GEMM against ones on fp32 dz (CuPy's
    column sum over T*B rows took 57 us at H=1024 B=8 T=256, v9); deinterleaving casts in the same pass."""
    op = dz if dz_operand is None else dz_operand
    parts = parts or Fp32BackwardParts()
    d_w_ih = _matmul(op.T, layer_input.reshape(dz.shape[0], -1), tf32=tf32, a_type=a_type, **parts.d_w_ih)
    if isinstance(h_prev, ShiftedHidden):
        d_w_hh = _shifted_hidden_grad(op, h_prev, tf32, a_type)
    else:
        d_w_hh = _matmul(op.T, h_prev.reshape(dz.shape[0], -1), tf32=tf32, a_type=a_type, **parts.d_w_hh)
    d_b = gate_deinterleave_as(_matmul(dz.T, _cp().ones((dz.shape[0], 1), np.float32))[:, 0], hidden, dtype)
    return LayerWeights(gate_deinterleave_as(d_w_ih, hidden, dtype), gate_deinterleave_as(d_w_hh, hidden, dtype),
                        d_b, d_b.copy())


@dataclass
class Fp32BackwardParts:
    """The fp32 backward's GEMMs that run as 3xTF32, as _matmul's keywords of their prepared operands
    ({}: strict SGEMM): dW_ih = dz^T x, dW_hh = dz^T h_{t-1}, dX = dz W_ih; ``x``: the layer input's
    part, shared by the directions. v22: tf32_parts (a_parts, b_parts); v25: tf32_split3 (a3, b3)."""
    d_w_ih: dict = field(default_factory=dict)
    d_w_hh: dict = field(default_factory=dict)
    d_x: dict = field(default_factory=dict)
    x: object = None


def _runs_3xtf32(config, rows: int, k: int) -> bool:
    """An fp32 backward GEMM over ``rows`` rows of dz [rows, 4H] and a k-wide operand runs as 3xTF32
    (FP32_BACKWARD_GEMMS, MIN_3XTF32_BACKWARD_FLOPS)."""
    return (config.dtype == "float32" and FP32_BACKWARD_GEMMS in ("3xtf32", "onepass")
            and 2.0 * rows * 4 * config.hidden_size * k >= MIN_3XTF32_BACKWARD_FLOPS)


def _fp32_backward_parts(config, flat_dz, flat_input, h_prev, slot_weights, input_part=None):
    """The Fp32BackwardParts of one direction (``input_part``: the layer input's, made for an earlier
    direction)."""
    rows = flat_dz.shape[0]
    if not is_gpu_array(flat_dz):
        return Fp32BackwardParts()
    on_x = _runs_3xtf32(config, rows, flat_input.shape[-1])   # dW_ih and dX, by the FLOP rule
    with_dx = on_x and _reduction_on_3xtf32(4 * config.hidden_size)   # dX reduces over 4H
    with_x = on_x and _reduction_on_3xtf32(rows)   # dW_ih and dW_hh reduce over the T B rows
    with_h = _runs_3xtf32(config, rows, config.hidden_size) and _reduction_on_3xtf32(rows)
    if not (with_x or with_h or with_dx):
        return Fp32BackwardParts()
    if FP32_BACKWARD_GEMMS == "onepass":
        return _onepass_backward_parts(flat_dz, flat_input, h_prev, slot_weights, input_part, with_x, with_h, with_dx)
    return _three_gemm_backward_parts(flat_dz, flat_input, h_prev, slot_weights, input_part, with_x, with_h, with_dx)


def _reduction_on_3xtf32(k: int) -> bool:
    """v35: whether an fp32 backward GEMM reducing over ``k`` may run as 3xTF32: a short reduction, or (v36) a
    long one in chunks (FP32_LONG_REDUCTION_FROM_K, LONG_REDUCTIONS; one pass only); else strict."""
    long_k = _is_long(k, FP32_LONG_REDUCTION_FROM_K)
    return not long_k or (LONG_REDUCTIONS == "chunked" and FP32_BACKWARD_GEMMS in CHUNKED_GEMMS)


def _backward_chunk(k: int):
    """v36: the chunk of a one-pass backward GEMM's reduction over ``k`` (None: one GEMM)."""
    return _reduction_chunk(k, FP32_LONG_REDUCTION_FROM_K)


def _three_gemm_backward_parts(flat_dz, flat_input, h_prev, slot_weights, input_part, with_x: bool, with_h: bool,
                               with_dx: bool):
    """v22: the operands of three TF32 GEMMs per product (tf32_parts)."""
    rows = flat_dz.shape[0]
    from ..gpu_blas import tf32_parts
    dz = tf32_parts(flat_dz)
    dz_t = tuple(p.T for p in dz)
    x = (input_part or tf32_parts(flat_input)) if with_x else None
    return Fp32BackwardParts(
        d_w_ih={"a_parts": dz_t, "b_parts": x} if with_x else {},
        d_w_hh={"a_parts": dz_t, "b_parts": tf32_parts(h_prev.reshape(rows, -1))} if with_h else {},
        d_x={"a_parts": dz, "b_parts": slot_weights.input_weight_parts()} if with_dx else {}, x=x)


def _onepass_backward_parts(flat_dz, flat_input, h_prev, slot_weights, input_part, with_x: bool, with_h: bool,
                            with_dx: bool):
    """v25: the one-pass operands. dz is split twice: along 4H for dX and along the rows for the
    weight gradients, whose reduction runs over the T*B rows; v36: long reductions in chunks."""
    from ..gpu_blas import tf32_split3
    rows = flat_dz.shape[0]
    by_rows, by_gates = _backward_chunk(rows), _backward_chunk(flat_dz.shape[1])
    # dz^T [4H, 3 rows]: a view of [3 rows, 4H], for the weight gradients
    dz_rows = tf32_split3(flat_dz.T, 1, True, by_rows) if with_x or with_h else None
    x = (input_part if input_part is not None else tf32_split3(flat_input, 0, False, by_rows)) if with_x else None
    d_x = {"a3": tf32_split3(flat_dz, 1, True, by_gates), "b3": slot_weights.input_weight_split3(False, by_gates),
           "chunk": by_gates} if with_dx else {}
    return Fp32BackwardParts(
        d_w_ih={"a3": dz_rows, "b3": x, "chunk": by_rows} if with_x else {},
        d_w_hh={"a3": dz_rows, "b3": tf32_split3(h_prev.reshape(rows, -1), 0, False, by_rows), "chunk": by_rows}
        if with_h else {},
        d_x=d_x, x=x)


def backward(reserve, dy, dhT, dcT, retain=False):
    """Gradients from a forward's reserve (a graph-replayed one replays its set's backward graph;
    ``retain``: its set stays leased until the reserve is garbage-collected, not just until this
    backward); the first eager backward of a graph-eligible configuration captures its training set."""
    if isinstance(reserve, persistent_train_graph.GraphReserve):
        last_kinds["backward"] = reserve.training_set.reserve.plans["backward"].kind
        return persistent_train_graph.backward(reserve, dy, dhT, dcT, _backward_eager, retain)
    result = _backward_eager(reserve, dy, dhT, dcT)
    if reserve.capture_graphs is not None:
        with _last_kinds_kept():
            reserve.capture_graphs(backward_inputs=(dy, dhT, dcT))
    return result


def _backward_eager(reserve: PersistentReserve, dy, dhT, dcT):
    """v47: a padded forward's reserve takes dy, dhT and dcT with zero columns added (so the added columns'
    gradients are zero and the weights' are the caller's columns' alone) and gives dx, dh0, dc0 cut back."""
    if reserve.caller_batch is None:
        return _backward_at_batch(reserve, dy, dhT, dcT)
    wide = reserve.config.batch
    dx, dh0, dc0, grads = _backward_at_batch(reserve, *batch_pad.pad_inputs((dy, dhT, dcT), wide))
    return (*batch_pad.first_columns_of((dx, dh0, dc0), reserve.caller_batch), grads)


def _backward_at_batch(reserve: PersistentReserve, dy, dhT, dcT):
    config = reserve.config
    plan = reserve.plans.get("backward")
    if plan is None:
        raise NotSupported(name, "backward needs a reserve from a training-mode forward")
    last_kinds["backward"] = plan.kind
    steps, batch, hidden, dirs = config.seq_len, config.batch, config.hidden_size, config.num_directions
    dhT, dcT = _f32(dhT), _f32(dcT)
    gemm_dtype = _gemm_dtype(config)
    tf32 = _tf32_for(config) and gemm_dtype is None
    to_operand = (lambda a: _storage16(a, gemm_dtype)) if gemm_dtype else (lambda a: a)  # noqa: E731
    h0_operand = to_operand(reserve.h0)
    dh0 = _output(config.state_shape)
    dc0 = _output(config.state_shape)
    grads = [None] * (config.num_layers * dirs)
    dz16 = plan.kind == "mma" and gemm_dtype is not None   # v30: the GEMMs' operand, stored by the kernel
    direct16 = dz16 and BACKWARD_16BIT_GRADS and dy.dtype.name == config.dtype   # v31: 16-bit gradients out
    d_out = dy   # the layer's dy: the caller's, then the layer above's dX (16-bit where direct16, one direction)
    for layer in reversed(range(config.num_layers)):
        if layer in reserve.dropout_masks:
            d_out = _f32(d_out) * reserve.dropout_masks[layer]
        save = reserve.layers[layer]
        s0 = slot(layer, 0, dirs)
        states = slice(s0, s0 + dirs)
        dy16 = dz16 and d_out.dtype.itemsize == 2 and BACKWARD_16BIT_DY and plan.loads_late   # v31: read as it is
        dz = _output((dirs, steps, batch, 4 * hidden), _storage_dtype(gemm_dtype) if dz16 else np.float32)
        _launch(plan, (
            _tiles(reserve.weights, layer, dirs, plan), _storage16(d_out, gemm_dtype) if dy16 else _f32(d_out),
            save.gates, save.cells,
            reserve.c0[states], dhT[states], dcT[states], dz, dh0[states], dc0[states],
            np.int32(steps), np.int32(hidden), np.int32(plan.units), np.int32(plan.blocks_per_dir),
            np.int32(dirs * hidden)), dirs, dz16=dz16, dy16=dy16)
        output_operand = to_operand(save.output)
        h_prevs = [_hidden_operand(output_operand, h0_operand[s0 + d], d, hidden, shifted=gemm_dtype is not None)
                   for d in range(dirs)]
        if dz16:
            d_out = _layer_grads_16bit(config, reserve, layer, dz, h_prevs, grads, dy.dtype if direct16 else None)
        else:
            d_out = _layer_grads(config, reserve, layer, dz, h_prevs, grads, dy.dtype, tf32)
    dtype = dy.dtype
    cast = lambda a: a.astype(dtype, copy=False)  # noqa: E731
    return (cast(d_out), cast(dh0), cast(dc0), grads)   # grads: already in dy's dtype


def _layer_grads(config, reserve, layer: int, dz, h_prevs, grads, dtype, tf32: bool):
    """One layer's weight gradients (into ``grads``, in ``dtype``) and dX [T, B, input] (fp32) from its
    interleaved dz (fp32; with 16-bit GEMM operands where SIXTEEN_BIT_GEMMS, the kernel then not mma)."""
    cp = _cp()
    steps, batch, hidden, dirs = config.seq_len, config.batch, config.hidden_size, config.num_directions
    gemm_dtype = _gemm_dtype(config)
    a_type = gemm_dtype or "float32"
    save, s0 = reserve.layers[layer], slot(layer, 0, dirs)
    d_in = cp.zeros((steps * batch, save.layer_input.shape[-1]), cp.float32)
    dz_operand = _storage16(dz, gemm_dtype) if gemm_dtype else dz
    input_operand = save.layer_input_16bit if gemm_dtype else save.layer_input
    input_part = None   # v22: the layer input's 3xTF32 operand, made by the first direction that needs it
    for d in range(dirs):
        s = s0 + d
        flat_dz = dz[d].reshape(steps * batch, 4 * hidden)
        flat_operand = dz_operand[d].reshape(steps * batch, 4 * hidden)
        slot_weights = reserve.weights.slots[s]
        parts = _fp32_backward_parts(config, flat_dz, input_operand.reshape(steps * batch, -1), h_prevs[d],
                                     slot_weights, input_part)   # none for 16-bit layers (_runs_3xtf32)
        input_part = parts.x if parts.x is not None else input_part
        grads[s] = _weight_grads(flat_dz, input_operand, h_prevs[d], hidden, dtype, tf32, flat_operand, a_type,
                                 parts)
        w_ih = slot_weights.input_weight_16bit(gemm_dtype) if gemm_dtype else slot_weights.w_ih
        _matmul(flat_operand, w_ih, d_in, accumulate=True, tf32=tf32, a_type=a_type, **parts.d_x)
    return d_in.reshape(steps, batch, -1)


def _layer_grads_16bit(config, reserve, layer: int, dz, h_prevs, grads, out16):
    """v31: one layer's weight gradients (into ``grads``) and dX [T, B, input] from the mma backward's
    16-bit dz. With ``out16`` (the caller's 16-bit dy dtype) every GEMM rounds its fp32 sums to it
    itself (dX too where one direction gives it whole; two are summed in fp32), and the weight
    gradients' deinterleave is a 16-bit copy; else the GEMMs write fp32. (dz stays gate-interleaved:
    v31's gate-blocked stores measured no faster in the kernel, notes v31.)"""
    steps, batch, hidden, dirs = config.seq_len, config.batch, config.hidden_size, config.num_directions
    a_type = _gemm_dtype(config)
    save, s0 = reserve.layers[layer], slot(layer, 0, dirs)
    rows, inputs = steps * batch, save.layer_input.shape[-1]
    grad_dtype = out16 if out16 is not None else np.float32
    framework = lambda a: _framework_rows(a, hidden, grad_dtype)  # noqa: E731
    d_in = _output((rows, inputs), grad_dtype if dirs == 1 else np.float32)
    ones = _ones16((rows, 1), a_type)
    for d in range(dirs):
        s = s0 + d
        flat_dz = dz[d].reshape(rows, 4 * hidden)
        d_w_ih = _matmul(flat_dz.T, save.layer_input_16bit.reshape(rows, -1), _output((4 * hidden, inputs), grad_dtype),
                         a_type=a_type)
        d_w_hh = _output((4 * hidden, hidden), grad_dtype)
        if isinstance(h_prevs[d], ShiftedHidden):
            _shifted_hidden_grad(flat_dz, h_prevs[d], False, a_type, d_w_hh)
        else:
            _matmul(flat_dz.T, h_prevs[d].reshape(rows, -1), d_w_hh, a_type=a_type)
        d_b = framework(_matmul(flat_dz.T, ones, _output((4 * hidden, 1), grad_dtype), a_type=a_type)[:, 0])
        grads[s] = LayerWeights(framework(d_w_ih), framework(d_w_hh), d_b, d_b.copy())
        w_ih = reserve.weights.slots[s].input_weight_16bit(a_type)
        _matmul(flat_dz, w_ih, d_in, accumulate=d > 0, a_type=a_type)
    return d_in.reshape(steps, batch, -1)


def _framework_rows(a, hidden: int, dtype):
    """gate_deinterleave_as(a, hidden, dtype); a 16-bit GPU array already of that dtype by memcpys
    (layouts.gate_deinterleave_copy: 45 us per training call at H=1024 by CuPy's strided copy, v31)."""
    if DEINTERLEAVE_BY_MEMCPY and is_gpu_array(a) and a.dtype == np.dtype(dtype) and a.dtype.itemsize == 2:
        return gate_deinterleave_copy(a, hidden)
    return gate_deinterleave_as(a, hidden, dtype)


def _ones16(shape, dtype: str):
    """Ones in the 16-bit storage of ``dtype`` (bf16's 1.0 is the word 0x3F80): the bias gradient's operand."""
    if dtype == "bfloat16":
        return _cp().full(shape, 0x3F80, np.uint16)
    return _cp().ones(shape, np.float16)


flag_changes.count_assignments(__name__)   # v60: assignments to these flags counted
