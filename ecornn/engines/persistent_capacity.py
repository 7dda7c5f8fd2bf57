"""Capacity model of the persistent kernels: does a configuration fit on a device, and how.

Pure Python, no GPU needed: the inputs are a device-properties dict (as ``ecornn.gpu.
device_properties()`` returns: sm_count, regs_per_sm, smem_per_sm, smem_per_block_optin) and the
problem sizes. One block per SM (``__launch_bounds__(threads, 1)``); a block owns ``units`` hidden
units, i.e. ``rows_per_unit * units`` rows of the recurrent matrix (forward: the 4 gate rows of W_hh,
K = H; backward: one row of W_hh^T, K = 4H). Each lane keeps ``reg_cols`` of its ``cols_per_lane``
columns in registers, the rest in shared memory, next to the step's vector (K x B) and the
reduction buffers. The register estimate (44 + rows_per_lane * (B + 2) registers of overhead, the weights
on top) was calibrated against ``nvcc -Xptxas -v`` for sm_90 (0 spills at 128 and 255 registers per
thread); the engine checks the compiled kernel's real usage and the occupancy API before launch.

v3 adds the cluster plans (``ClusterPlan``), v4 the tensor-core plans for fp16/bf16 (``MmaPlan``:
16 x 16 mma tiles, k-tiles in registers then shared memory), v7 the fp32 backward by gate rows
(``RowsPlan``); ``plan_config`` returns the plans the engine's "auto" variant runs (tensor-core
plans for 16-bit dtypes where they fit, else grid plans, with the rows backward per its rule).
Which of the fitting variants a plan takes (exchange, delays, projection, split, rows backward) is
persistent_rules' measured rules.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from ..errors import NotSupported
from . import persistent_rules as rules
from ..layouts.persistent import ColumnTileShape, MmaTileShape, TileShape

STRATEGY = "persistent"
WARP_CHOICES = (16, 8)
LANE_ROW_CHOICES = (32, 16, 8, 4, 2, 1)
MAX_ROWS_PER_LANE = 8
MAX_REGS_PER_THREAD = 255
REG_ALLOC_GRANULE = 8
SMEM_RESERVED_PER_BLOCK = 1024  # the driver keeps 1 KB of each block's shared memory
MMA_STATIC_SMEM_BYTES = 16      # v56: the tensor-core forward's static shared memory (its two output deltas)


@dataclass(frozen=True)
class _TiledPlan:
    """What the grid and the cluster plans share: blocks of ``warps`` warps whose lanes keep
    ``reg_cols`` of their ``cols_per_lane`` columns in registers, the rest in shared memory."""

    lane_rows: int
    rows_per_lane: int
    cols_per_lane: int
    reg_cols: int
    regs_per_thread: int    # estimate; the compiled kernel reports the real count
    smem_bytes: int

    @property
    def threads(self) -> int:
        return 32 * self.warps

    @property
    def smem_weight_cols(self) -> int:
        return self.cols_per_lane - self.reg_cols

    def tile_shape(self) -> TileShape:
        return TileShape(blocks=self.blocks_per_dir, rows_per_block=self.rows_per_unit * self.units,
                         warps=self.warps, lane_rows=self.lane_rows,
                         rows_per_lane=self.rows_per_lane, cols_per_lane=self.cols_per_lane)

    def with_reg_cols(self, reg_cols: int):
        """The same tiling with fewer register columns (after a spill): more shared memory."""
        moved = (self.reg_cols - reg_cols) * self.rows_per_lane
        return replace(self, reg_cols=reg_cols, smem_bytes=self.smem_bytes + moved * self.threads * 4,
                       regs_per_thread=self.regs_per_thread - moved)


@dataclass(frozen=True)
class _LayerLaunch:
    """What every plan of one pass of one layer holds (grid, tensor-core and rows kernels): blocks of
    ``warps`` warps own ``units`` hidden units each, ``blocks_per_dir`` blocks per direction,
    ``directions_per_launch`` directions in one cooperative grid, ``launches`` launches (2 when the
    two directions run one after the other)."""

    hidden: int
    batch: int
    directions_per_launch: int
    launches: int
    units: int
    blocks_per_dir: int
    warps: int

    @property
    def threads(self) -> int:
        return 32 * self.warps

    @property
    def grid(self) -> int:
        return self.blocks_per_dir * self.directions_per_launch


class _PassGeometry:
    """What a grid-kernel plan and a tensor-core plan of one pass share: forward rows are the 4 gate
    rows of each unit (K = H), backward rows one row of W_hh^T per unit (K = 4H)."""

    @property
    def rows_per_unit(self) -> int:
        return 4 if self.pass_name == "forward" else 1

    @property
    def reduction_length(self) -> int:
        return self.hidden * (1 if self.pass_name == "forward" else 4)


@dataclass(frozen=True)
class KernelPlan(_PassGeometry, _TiledPlan, _LayerLaunch):
    """Tile and launch parameters of one persistent pass (forward or backward) of one layer."""

    kind = "grid"
    kernel_file = "persistent_lstm.cu"

    pass_name: str          # "forward" or "backward"
    tagged: bool = False    # v6 tagged exchange between steps (False: grid.sync; rules.grid_tagged_pays)
    input_cols: int = 0     # v15 forward: W_ih columns per lane in registers, x W_ih^T in the kernel
                            # (with_input_projection); 0: the input projection is a GEMM before it
    poll_delay_ns: int = 0  # v16: sleep before a warp's first poll of the tagged exchange (with_poll_delay)
    kernel_bias: bool = False   # v23 forward: the kernel adds the biases to xw (with_kernel_bias)
    late_loads: bool = False    # v32 backward: the next step's inputs loaded after grid.sync (with_late_loads)
    batch_groups: int = 1       # v41 backward: the layer's batch is batch_groups x batch columns, each group
                                # on blocks_per_dir blocks of its own (grouped_grid_backward)

    @property
    def grid(self) -> int:
        return self.blocks_per_dir * self.directions_per_launch * self.batch_groups

    @property
    def loads_late(self) -> bool:
        return self.pass_name == "backward" and self.late_loads and not self.tagged

    def defines(self) -> dict:
        """Compile-time constants of kernels/persistent_lstm.cu."""
        return {"PASS": 0 if self.pass_name == "forward" else 1, "BATCH": self.batch,
                "NWARPS": self.warps, "LANE_ROWS": self.lane_rows,
                "ROWS_PER_LANE": self.rows_per_lane, "COLS_PER_LANE": self.cols_per_lane,
                "REG_COLS": self.reg_cols, "TAGGED": int(self.tagged),
                **({"IN_COLS": self.input_cols} if self.input_cols else {}),
                **({"POLL_DELAY_NS": self.poll_delay_ns} if self.poll_delay_ns else {}),
                **({"KERNEL_BIAS": 1} if self.kernel_bias else {}),
                **({"BWD_LATE_LOADS": 1} if self.loads_late else {}),
                **({"GROUPS": self.batch_groups} if self.batch_groups > 1 else {})}

    @property
    def in_kernel_projection(self) -> bool:
        return self.input_cols > 0

    def input_tile_shape(self) -> TileShape:
        """How W_ih's rows of a block are cut (the same rows and lanes as tile_shape, input columns)."""
        return replace(self.tile_shape(), cols_per_lane=self.input_cols)

    def without_kernel_bias(self) -> "KernelPlan":
        """The same plan with the biases added to xw before the kernel (v22; with_kernel_bias undone)."""
        if not self.kernel_bias:
            return self
        return replace(self, kernel_bias=False, regs_per_thread=self.regs_per_thread - GRID_BIAS_REGS)

    def without_input_projection(self) -> "KernelPlan":
        """The same plan with the input projection as a GEMM before the kernel (the ablation)."""
        if not self.input_cols:
            return self
        regs, smem = grid_input_costs(self, self.input_cols)
        return replace(self, input_cols=0, regs_per_thread=self.regs_per_thread - regs,
                       smem_bytes=self.smem_bytes - smem)

    def exchange_shape(self, directions: int) -> tuple:
        """uint32 words of the exchange buffer [D][2][padded K * B] (zeroed before each launch):
        the step's vector laid out [k][b] as the blocks' shared memory holds it (v41: a region per
        direction and batch group, [D * groups][2][padded K * group's B])."""
        return (directions * self.batch_groups, 2, self.tile_shape().padded_cols * self.batch)

    def with_exchange(self, tagged: bool) -> "KernelPlan":
        """The same tiling with the other exchange (tagged plans keep two partial buffers)."""
        red = 4 * self.warps * self.batch * self.rows_per_lane * self.lane_rows
        return replace(self, tagged=tagged, smem_bytes=self.smem_bytes + red * (int(tagged) - int(self.tagged)))

    def describe(self) -> str:
        projection = f", input projection in the kernel ({self.input_cols} columns)" if self.input_cols else ""
        projection += LATE_LOADS_TEXT if self.loads_late else ""
        if self.batch_groups > 1:
            projection += f", the batch as {self.batch_groups} groups of {self.batch} on blocks of their own"
        return (f"{self.pass_name}: {self.grid} blocks x {self.threads} threads, {self.units} units/block, "
                f"{self.reg_cols}/{self.cols_per_lane} columns in registers, "
                f"{self.smem_bytes // 1024} KB smem, {self.launches} launch(es){projection}, "
                f"{exchange_text(self.tagged, self.poll_delay_ns)}")


LATE_LOADS_TEXT = ", next-step loads after the barrier"


def exchange_text(tagged: bool, poll_delay_ns: int, poll_spin_cycles: int = 0, poll_backoff_ns: int = 0) -> str:
    """How a plan's blocks pass the step's vector, for describe()."""
    if not tagged:
        return "grid.sync exchange"
    backoff = f", repolls after {poll_backoff_ns} ns" if poll_backoff_ns else ""
    if poll_delay_ns and poll_spin_cycles:
        return f"tagged exchange (first poll after a {poll_spin_cycles}-cycle spin{backoff})"
    if poll_delay_ns:
        return f"tagged exchange (first poll after {poll_delay_ns} ns{backoff})"
    return "tagged exchange" + (f" (repolls after {poll_backoff_ns} ns)" if poll_backoff_ns else "")


def choose_lanes(rows: int) -> tuple:
    """(lane_rows, rows_per_lane) covering ``rows`` with the least padding; then two rows per lane
    on 16+ lane rows (each shared-memory load of the vector feeds two rows, halving those loads,
    for one shuffle level at most); then the widest lanes (the shortest shuffle reduction)."""
    options = []
    for lane_rows in LANE_ROW_CHOICES:
        per_lane = -(-rows // lane_rows)
        if per_lane <= MAX_ROWS_PER_LANE:
            paired = per_lane == 2 and lane_rows >= 16
            options.append((per_lane * lane_rows - rows, not paired, -lane_rows, per_lane))
    if not options:
        return None
    _, _, neg_lane_rows, per_lane = min(options)
    return -neg_lane_rows, per_lane


def register_cap(props: dict, threads: int) -> int:
    per_thread = props["regs_per_sm"] // threads
    return min(MAX_REGS_PER_THREAD, per_thread - per_thread % REG_ALLOC_GRANULE)


GRID_REG_OVERHEAD = 44           # + rows_per_lane * (B + 2): calibrated on sm_90 (module docstring)


def smem_bytes(reduction_length_padded: int, batch: int, warps: int, rows_per_lane: int,
               tile_rows: int, smem_cols: int) -> int:
    """Shared memory of kernels/persistent_lstm.cu: the vector, the weight columns that are not in
    registers, and the warp partials (two buffers under the tagged exchange)."""
    red_buffers = 2 if rules.grid_tagged_pays(reduction_length_padded, batch, warps) else 1
    floats = (reduction_length_padded * batch + warps * smem_cols * rows_per_lane * 32
              + red_buffers * warps * batch * tile_rows)
    return 4 * floats


GRID_BIAS_REGS = 4   # v23: the unit's 4 biases, kept in registers through the steps (KernelPlan.kernel_bias)


def with_kernel_bias(props: dict, plan):
    """A grid forward ``plan`` that adds its biases itself (v23: the xw GEMM comes without them, no add
    kernel after it) where its register estimate has GRID_BIAS_REGS to spare for them; else ``plan``
    unchanged (its xw gets them from an add kernel). At the register cap (fp32 H=1280 B=16, H=1024
    B=8) they would spill (ptxas, sm_80 and sm_90)."""
    if plan.kind != "grid" or plan.pass_name != "forward" or plan.input_cols or plan.kernel_bias:
        return plan
    regs = plan.regs_per_thread + GRID_BIAS_REGS
    if regs > register_cap(props, plan.threads):
        return plan
    return replace(plan, kernel_bias=True, regs_per_thread=regs)


def _fit_tile(props, rows, k, units, batch, warps, reg_base, smem_of):
    """(lane_rows, rows_per_lane, cols_per_lane, reg_cols, regs_per_thread, smem_bytes) of a block
    of ``warps`` warps owning ``rows`` rows of length ``k`` (``units`` units), as many columns in
    registers as fit beside ``reg_base + rows_per_lane * (B + 2)`` registers of overhead; None if
    it cannot fit one block per SM. ``smem_of`` is the kernel's shared-memory formula."""
    lanes = choose_lanes(rows)
    if lanes is None or units * batch > 32 * warps:   # one pointwise thread per (unit, batch)
        return None
    lane_rows, rows_per_lane = lanes
    lane_k = 32 // lane_rows
    cols_per_lane = -(-k // (warps * lane_k))
    overhead = reg_base + rows_per_lane * (batch + 2)
    spare = register_cap(props, 32 * warps) - overhead
    if spare < 0:
        return None
    reg_cols = min(cols_per_lane, spare // rows_per_lane)
    smem = smem_of(warps * lane_k * cols_per_lane, batch, warps, rows_per_lane,
                   rows_per_lane * lane_rows, cols_per_lane - reg_cols)
    if smem > props["smem_per_block_optin"] or smem + SMEM_RESERVED_PER_BLOCK > props["smem_per_sm"]:
        return None
    return lane_rows, rows_per_lane, cols_per_lane, reg_cols, overhead + reg_cols * rows_per_lane, smem


def _candidate(props, pass_name, hidden, batch, directions, warps, units):
    """The plan for one (warps, units) choice, or None if it cannot fit one block per SM."""
    rows_per_unit, k = (4, hidden) if pass_name == "forward" else (1, 4 * hidden)
    tile = _fit_tile(props, rows_per_unit * units, k, units, batch, warps, GRID_REG_OVERHEAD, smem_bytes)
    if tile is None:
        return None
    lane_rows, rows_per_lane, cols_per_lane, reg_cols, regs, smem = tile
    return KernelPlan(hidden=hidden, batch=batch, directions_per_launch=directions, launches=1, units=units,
                      blocks_per_dir=-(-hidden // units), warps=warps, lane_rows=lane_rows,
                      rows_per_lane=rows_per_lane, cols_per_lane=cols_per_lane, reg_cols=reg_cols,
                      regs_per_thread=regs, smem_bytes=smem, pass_name=pass_name,
                      tagged=rules.grid_tagged_pays(warps * (32 // lane_rows) * cols_per_lane, batch, warps))


def _plan_for_directions(props, pass_name, hidden, batch, directions):
    """Fewest units per block (most blocks, least work each) that fits, over the warp choices.
    Larger tiles only get heavier, so a few sizes past the smallest are enough to try."""
    blocks_available = props["sm_count"] // directions
    if blocks_available < 1:
        return None
    smallest = -(-hidden // blocks_available)
    best = None
    for warps in WARP_CHOICES:
        for units in range(smallest, min(hidden, smallest + 8) + 1):
            plan = _candidate(props, pass_name, hidden, batch, directions, warps, units)
            if plan is not None:
                if best is None or _cost(plan) < _cost(best):
                    best = plan
                break
    return best


def _cost(plan: KernelPlan) -> tuple:
    """Rank fitting plans: fewer shared-memory weight reads per lane, then fewer units per block."""
    return (plan.smem_weight_cols * plan.rows_per_lane, plan.units, -plan.warps)


def plan_pass(props: dict, pass_name: str, hidden: int, batch: int, num_directions: int = 1) -> KernelPlan:
    """Tile/launch plan of one pass, both directions in one grid when they fit, else one after the
    other. Raises NotSupported naming the limit when not even one direction fits."""
    if pass_name not in ("forward", "backward"):
        raise ValueError(f"pass_name: expected 'forward' or 'backward', got {pass_name!r}")
    if not props.get("cooperative_launch", True):
        raise NotSupported(STRATEGY, "the device does not support cooperative launches")
    if num_directions == 2:
        both = _plan_for_directions(props, pass_name, hidden, batch, 2)
        if both is not None:
            return both
    one = _plan_for_directions(props, pass_name, hidden, batch, 1)
    if one is None:
        raise NotSupported(STRATEGY, _why_not(props, pass_name, hidden, batch))
    if num_directions == 2:
        fields = asdict(one)
        fields["launches"] = 2
        return KernelPlan(**fields)
    return one


def grid_input_costs(plan: KernelPlan, input_cols: int) -> tuple:
    """(registers per thread, shared-memory bytes) that the grid forward's in-kernel projection (v15)
    adds: the W_ih columns and the carried partials of each lane's rows, the lane's share of the
    x slice in flight; the staged x [k][b]."""
    slice_words = input_cols * (32 // plan.lane_rows) * plan.batch
    regs = plan.rows_per_lane * (input_cols + plan.batch) + -(-slice_words // 32)
    return regs, 4 * plan.warps * slice_words


def grid_with_input_projection(props: dict, plan: KernelPlan, input_sizes) -> KernelPlan:
    """``plan`` (a grid forward) computing x W_ih^T itself (v15) where W_hh is all in registers and
    the W_ih columns of the widest input fit beside it (registers) with the staged x (shared
    memory); otherwise ``plan`` unchanged. One plan serves every layer (narrower inputs: zero
    columns)."""
    if plan.pass_name != "forward" or plan.input_cols or plan.reg_cols < plan.cols_per_lane:
        return plan
    plan = plan.without_kernel_bias()   # the projecting kernel adds them its own way (v15)
    input_cols = -(-max(input_sizes) // (plan.warps * (32 // plan.lane_rows)))
    regs, smem = grid_input_costs(plan, input_cols)
    regs, smem = plan.regs_per_thread + regs, plan.smem_bytes + smem
    if regs > register_cap(props, plan.threads) or smem > props["smem_per_block_optin"] - SMEM_RESERVED_PER_BLOCK:
        return plan
    return replace(plan, input_cols=input_cols, regs_per_thread=regs, smem_bytes=smem)


def _why_not(props, pass_name, hidden, batch) -> str:
    weights = 4 * hidden * hidden * 4
    vector = (hidden if pass_name == "forward" else 4 * hidden) * batch * 4
    on_chip = props["sm_count"] * (props["regs_per_sm"] * 4 + props["smem_per_block_optin"])
    what = (f"{pass_name} recurrent weights of hidden_size={hidden} (fp32, {weights / 2**20:.1f} MiB) "
            f"plus batch={batch} vectors do not fit one block per SM on {props.get('name', 'this GPU')} "
            f"({props['sm_count']} SMs, at most {on_chip / 2**20:.1f} MiB of registers + shared memory)")
    if vector > props["smem_per_block_optin"] // 2:
        what += (f"; the step's {'h' if pass_name == 'forward' else 'dz'} vector alone needs "
                 f"{vector // 1024} KB of each block's {props['smem_per_block_optin'] // 1024} KB shared memory")
    return what


def plan_config(props: dict, config, training: bool, backward_by_rows="auto", fp32_tensor_cores="auto",
                reg_model: str = "v19", batch_groups="auto", backward_groups="auto") -> dict:
    """Plans the engine's "auto" variant runs for every pass a call needs ({'forward': plan[,
    'backward': plan]}): the tensor-core kernel for fp16/bf16 where it fits (MmaPlan), else the
    fp32 kernels (plan_grid_config); NotSupported when neither fits. fp32 forwards run split on the
    tensor cores (v13) where ``fp32_tensor_cores`` says so ("auto": rules.fp32_split_pays; True; False);
    ``backward_groups``: the fp32 grid backward's batch groups (v41, plan_grid_config)."""
    mma_error = None
    if config.dtype in MMA_DTYPES:
        try:
            return plan_mma_config(props, config, training, reg_model, batch_groups, backward_groups)
        except NotSupported as exc:
            mma_error = exc
    try:
        plans = plan_grid_config(props, config, training, backward_by_rows, backward_groups)
    except NotSupported as exc:
        if mma_error is None:
            raise
        # a 16-bit call: say why the tensor-core kernel did not fit first, the fp32 fallback's reason after
        raise NotSupported(STRATEGY, f"{mma_error.reason}; the fp32 kernels as fallback: {exc.reason}") from exc
    if config.dtype == MMA_SPLIT_DTYPE and fp32_tensor_cores:
        grouped = _grouped_pass_plan(props, config, "forward", reg_model, batch_groups)
        if grouped is not None:
            return {**plans, "forward": grouped}
        try:
            split = plan_mma(props, "forward", config.hidden_size, config.batch, config.num_directions,
                             MMA_SPLIT_DTYPE, reg_model)
        except NotSupported:
            return plans
        if fp32_tensor_cores is True or rules.fp32_split_pays(split):
            plans = {**plans, "forward": split_forward(props, split, config)}
    return plans


def split_forward(props: dict, split, config):
    """The fp32 split forward ``split`` with its input projection in the kernel where
    rules.split_projection_pays and it fits (v29), and its first-poll delay."""
    if rules.split_projection_pays(split):
        split = with_input_projection(props, split, layer_input_sizes(config))
    return with_poll_delay(split)


def plan_grid_config(props: dict, config, training: bool, backward_by_rows="auto", backward_groups="auto") -> dict:
    """Plans of the fp32 kernels for every pass, or NotSupported: the grid kernel
    (kernels/persistent_lstm.cu) forward; backward the rows kernel (v7) where ``backward_by_rows``
    ("auto": rules.rows_backward_pays; True; False) asks for it and it fits, else the grid kernel (v41:
    in batch groups per ``backward_groups``, see grid_backward_plan), and the rows kernel again (unless
    False) where the grid backward does not fit."""
    hidden, batch, dirs = config.hidden_size, config.batch, config.num_directions
    plans = {"forward": plan_pass(props, "forward", hidden, batch, dirs)}
    if rules.input_projection_pays(plans["forward"]):
        plans["forward"] = with_input_projection(props, plans["forward"], layer_input_sizes(config))
    plans["forward"] = with_kernel_bias(props, with_poll_delay(plans["forward"]))
    if training:
        wanted = rules.rows_backward_pays(hidden, batch) if backward_by_rows == "auto" else bool(backward_by_rows)
        rows = plan_backward_rows(props, hidden, batch, dirs) if backward_by_rows is not False else None
        if wanted and rows is not None:
            plans["backward"] = rows
        else:
            try:
                plans["backward"] = grid_backward_plan(props, config, backward_groups)
            except NotSupported:
                if rows is None:
                    raise
                plans["backward"] = rows
    return plans


def grid_backward_plan(props: dict, config, backward_groups="auto") -> KernelPlan:
    """The fp32 grid backward of ``config``: v41, its batch in groups on blocks of their own
    (grouped_grid_backward) for ``backward_groups`` ("auto": the first of rules.grid_backward_group_counts
    that fits; an int: that many where they fit; False: never), else
    the ungrouped plan (NotSupported where that does not fit either)."""
    if backward_groups not in ("auto", False) and (not isinstance(backward_groups, int) or backward_groups < 2):
        raise ValueError(f"backward groups: expected 'auto', False or an int >= 2, got {backward_groups!r}")
    counts = rules.grid_backward_group_counts(config.batch) if backward_groups == "auto" else (
        [] if backward_groups is False else [backward_groups])
    for groups in counts:
        grouped = grouped_grid_backward(props, config, groups)
        if grouped is not None:
            return grouped
    return plan_pass(props, "backward", config.hidden_size, config.batch, config.num_directions)


def grouped_grid_backward(props: dict, config, groups: int):
    """v41: the fp32 grid backward with the batch as ``groups`` groups of B/groups columns, each planned as
    a layer of that batch on 1/groups of the SMs (each block owns groups x the units, and stages only its
    group's dz); None where the batch does not split or a group does not fit."""
    if config.batch % groups:
        return None
    shares = {**props, "sm_count": props["sm_count"] // groups}
    try:
        plan = plan_pass(shares, "backward", config.hidden_size, config.batch // groups, config.num_directions)
    except NotSupported:
        return None
    return replace(plan, batch_groups=groups)


def largest_hidden(props: dict, batch: int, pass_name: str = "forward", step: int = 32,
                   limit: int = 8192) -> int:
    """The largest multiple of ``step`` hidden size that fits (0 if none)."""
    best = 0
    for hidden in range(step, limit + 1, step):
        try:
            plan_pass(props, pass_name, hidden, batch)
        except NotSupported:
            continue
        best = hidden
    return best


def predicted_us_per_step(plan: KernelPlan, clock_ghz: float = 1.75, sync_us: float = 1.2) -> float:
    """Rough forward step time: FMAs of the busiest block at 2 lanes-per-clock-efficiency plus the
    grid barrier and ~1 us of L2 latency for the vector and the pointwise update."""
    fmas_per_lane = plan.cols_per_lane * plan.rows_per_lane * plan.batch * plan.directions_per_launch
    clocks = fmas_per_lane * plan.warps / 4 / 0.5  # 4 schedulers, ~50% issue efficiency
    return plan.launches * (sync_us + 1.0 + clocks / (clock_ghz * 1e3))


# ---- v7: the backward by gate rows (kernels/persistent_bwd_rows.cu, fp32) ----
ROWS_REG_OVERHEAD = 40     # + weights (cols x 4U) + accumulators (cols x B) + B: ptxas 13.0 on sm_90
ROWS_WARP_CHOICES = (16, 8)


def rows_batch_stride(batch: int) -> int:
    """v45: the batch stride of the rows backward's partials (kernels/persistent_bwd_rows.cu, kBatchPad)."""
    return -(-batch // 4) * 4 if batch > 5 else batch


@dataclass(frozen=True)
class RowsPlan(_LayerLaunch):
    """The backward of one layer split by gate rows: a block owns ``units`` units, keeps their
    4 x units rows of W_hh (all H columns, ``cols_per_thread`` per thread) in registers and
    publishes partial dh for every unit; the owners sum them (kernels/persistent_bwd_rows.cu)."""

    kind = "rows"
    kernel_file = "persistent_bwd_rows.cu"
    pass_name = "backward"
    tagged = False

    cols_per_thread: int
    regs_per_thread: int    # estimate; the compiled kernel reports the real count
    smem_bytes: int = 0     # the kernel's shared memory is static
    late_loads: bool = False    # v32: the next step's inputs loaded after grid.sync (with_late_loads)

    @property
    def loads_late(self) -> bool:
        return self.late_loads

    def defines(self) -> dict:
        """Compile-time constants of kernels/persistent_bwd_rows.cu."""
        return {"BATCH": self.batch, "NWARPS": self.warps, "G_ROWS": 4 * self.units,
                "COLS_PER_THREAD": self.cols_per_thread, "BLOCKS": self.blocks_per_dir,
                **({"BWD_LATE_LOADS": 1} if self.loads_late else {})}

    def tile_shape(self) -> ColumnTileShape:
        return ColumnTileShape(blocks=self.blocks_per_dir, rows_per_block=4 * self.units,
                               threads=self.threads, cols_per_thread=self.cols_per_thread)

    def exchange_shape(self, directions: int) -> tuple:
        """fp32 partials [D][2][blocks][threads * cols_per_thread][B, v45: from B=6 rounded up to 4 (float4 stores)]."""
        return (directions, 2, self.blocks_per_dir * self.threads * self.cols_per_thread * rows_batch_stride(self.batch))

    def with_exchange(self, tagged: bool) -> "RowsPlan":
        """The rows kernel exchanges its partials under grid.sync() only."""
        return self

    def describe(self) -> str:
        return (f"backward by gate rows: {self.grid} blocks x {self.threads} threads, {self.units} units/block, "
                f"{self.cols_per_thread} columns x {4 * self.units} rows in registers, {self.launches} launch(es)"
                f"{LATE_LOADS_TEXT if self.loads_late else ''}")


def _rows_plan_for(props, hidden, batch, directions):
    blocks_available = props["sm_count"] // directions
    if blocks_available < 1:
        return None
    units = -(-hidden // blocks_available)
    for warps in ROWS_WARP_CHOICES:
        threads = 32 * warps
        cols = -(-hidden // threads)
        regs = ROWS_REG_OVERHEAD + cols * 4 * units + cols * batch + batch
        if units * batch <= threads and regs <= register_cap(props, threads):
            return RowsPlan(hidden=hidden, batch=batch, directions_per_launch=directions, launches=1, units=units,
                            blocks_per_dir=-(-hidden // units), warps=warps, cols_per_thread=cols,
                            regs_per_thread=regs)
    return None


def plan_backward_rows(props: dict, hidden: int, batch: int, num_directions: int = 1):
    """The rows backward plan (both directions in one grid when they fit, else one after the
    other), or None where its weights do not fit the registers (the grid backward then runs)."""
    if num_directions == 2:
        both = _rows_plan_for(props, hidden, batch, 2)
        if both is not None:
            return both
    one = _rows_plan_for(props, hidden, batch, 1)
    if one is not None and num_directions == 2:
        return replace(one, launches=2)
    return one


# ---- v3: one thread-block cluster per sequence (kernels/persistent_cluster.cu, forward only) ----
CLUSTER_SIZES = (8, 16)          # 8 is portable; 16 needs the non-portable-size function attribute
CLUSTER_WARP_CHOICES = (16, 8, 4)
CLUSTER_REG_OVERHEAD = 44        # + rows_per_lane * (B + 2): ptxas on sm_90 (184 regs at H=256 B=1)


@dataclass(frozen=True)
class ClusterPlan(_TiledPlan):
    """Tile and launch parameters of the cluster forward kernel of one layer: ``cluster`` blocks
    per direction (one cluster each), all directions in one launch."""

    hidden: int
    batch: int
    directions: int
    cluster: int
    units: int              # hidden units per block (the last block may own fewer)
    warps: int

    pass_name = "forward"
    rows_per_unit = 4
    launches = 1
    kind = "cluster"
    kernel_file = "persistent_cluster.cu"

    @property
    def blocks_per_dir(self) -> int:
        return self.cluster

    @property
    def grid(self) -> int:
        return self.cluster * self.directions

    def defines(self) -> dict:
        """Compile-time constants of kernels/persistent_cluster.cu."""
        return {"CLUSTER": self.cluster, "BATCH": self.batch, "NWARPS": self.warps,
                "LANE_ROWS": self.lane_rows, "ROWS_PER_LANE": self.rows_per_lane,
                "COLS_PER_LANE": self.cols_per_lane, "REG_COLS": self.reg_cols}

    def describe(self) -> str:
        return (f"cluster forward: {self.directions} cluster(s) of {self.cluster} blocks x {self.threads} "
                f"threads, {self.units} units/block, {self.reg_cols}/{self.cols_per_lane} columns in "
                f"registers, {self.smem_bytes // 1024} KB smem")


def cluster_smem_bytes(padded_cols: int, batch: int, warps: int, rows_per_lane: int, tile_rows: int,
                       smem_cols: int) -> int:
    """Two h buffers, the shared-memory weight columns, the per-warp partial sums."""
    return 4 * (2 * padded_cols * batch + warps * smem_cols * rows_per_lane * 32 + warps * batch * tile_rows)


def _cluster_candidate(props, hidden, batch, directions, cluster, warps):
    units = -(-hidden // cluster)
    tile = _fit_tile(props, 4 * units, hidden, units, batch, warps, CLUSTER_REG_OVERHEAD, cluster_smem_bytes)
    if tile is None:
        return None
    lane_rows, rows_per_lane, cols_per_lane, reg_cols, regs, smem = tile
    return ClusterPlan(hidden=hidden, batch=batch, directions=directions, cluster=cluster, units=units,
                       warps=warps, lane_rows=lane_rows, rows_per_lane=rows_per_lane,
                       cols_per_lane=cols_per_lane, reg_cols=reg_cols, regs_per_thread=regs, smem_bytes=smem)


def cluster_issue_slots(plan: ClusterPlan) -> int:
    """Per-scheduler issue slots of one step's matvec (FFMA + vector loads + shared-memory weight
    loads) plus the pointwise thread's per-warp partial loads: ranks plans of one configuration."""
    per_lane = (plan.cols_per_lane * (plan.rows_per_lane * plan.batch + 1)
                + plan.smem_weight_cols * plan.rows_per_lane)
    return max(1, plan.warps // 4) * per_lane + 4 * plan.warps


def plan_cluster(props: dict, hidden: int, batch: int, num_directions: int = 1,
                 max_cluster: int = 8) -> ClusterPlan:
    """The cluster forward plan (smallest cluster that holds W_hh, then the fewest issue slots),
    or NotSupported naming the limit. Co-residency rule: one block per SM and every direction's
    cluster resident at once (directions x cluster <= SMs); the engine also asks the occupancy API."""
    cc = tuple(props.get("compute_capability", (0, 0)))
    if cc < (9, 0):
        raise NotSupported(STRATEGY, f"the cluster kernel needs thread-block clusters (sm_90+); "
                                     f"{props.get('name', 'this GPU')} is sm_{cc[0]}{cc[1]}")
    sizes = [c for c in CLUSTER_SIZES if c <= max_cluster]
    for cluster in sizes:
        if num_directions * cluster > props["sm_count"]:
            continue
        plans = [p for w in CLUSTER_WARP_CHOICES
                 if (p := _cluster_candidate(props, hidden, batch, num_directions, cluster, w)) is not None]
        if plans:
            return min(plans, key=lambda p: (cluster_issue_slots(p), -p.warps))
    per_sm = (props["regs_per_sm"] * 4 + props["smem_per_block_optin"]) / 2**20
    raise NotSupported(STRATEGY, f"cluster kernel: recurrent weights of hidden_size={hidden} (fp32, "
                                 f"{16 * hidden * hidden / 2**20:.2f} MiB) plus batch={batch} vectors do not "
                                 f"fit one cluster of {'/'.join(map(str, sizes))} blocks (~{per_sm:.2f} MiB "
                                 f"of registers + shared memory per SM) with {num_directions} direction(s) "
                                 f"on {props['sm_count']} SMs")


def predicted_cluster_us_per_step(plan: ClusterPlan, clock_ghz: float = 1.75, barrier_us: float = 0.18,
                                  pointwise_us: float = 0.55) -> float:
    """Kernel-only forward step: matvec issue slots at ~70% issue efficiency, the fixed serial rest
    (__syncthreads, partial loads, activations, DSMEM push) and one cluster barrier. pointwise_us
    was 0.15 a priori; the H200 run (benchmarks/notes_persistent.md, v3) put it at ~0.55."""
    return cluster_issue_slots(plan) / 0.7 / (clock_ghz * 1e3) + pointwise_us + barrier_us


# ---- v4: tensor cores for 16-bit weights (kernels/persistent_mma.cu) ------------------------------
MMA_DTYPES = ("float16", "bfloat16")
MMA_WARP_CHOICES = (16, 8, 4)
BATCH_GROUPS = 2        # v30: groups of a grouped pass's batch (grouped_plan; v39: "auto" tries more first)
BATCH_GROUP_MIN = 5     # ... each of at least this many columns (v46: B = 10-14 in two groups; was 8, a full N tile)
SPLIT_GROUP_MIN = 2     # the fp32 split's narrowest groups (v41; v40's 4: paired hi and lo rows filled the N tile)
GROUP_WARPS = {"forward": 8,    # ... on blocks of this many warps (fp16 H=1024 B=16 forward, kernel alone:
               "backward": 16}  # 8 warps 2.31-2.45, 16 warps 2.72-2.86)
# Registers besides the register tiles (4 * m_tiles per k-tile) and the accumulators
# (4 * m_tiles * n_tiles * mma_acc_split), per (pass, warps), for plans that read some k-tiles from
# shared memory. v4 fitted them to the largest spill-free REG_K_TILES of representative plans on sm_90
# and sm_80 (ptxas 13.0); at 255 registers/thread ptxas hoists more shared-memory loads ahead of the
# mma chain, hence the larger figures for 8 and 4 warps.
MMA_REG_OVERHEAD_V4 = {("forward", 16): 64, ("forward", 8): 160, ("forward", 4): 160,
                       ("backward", 16): 76, ("backward", 8): 112, ("backward", 4): 112}
# v19: refitted on today's kernel (its 16-bit exchange staging since v5.1 needs fewer registers) with
# tools/fit_mma_registers.py --compiler nvrtc: the engine's own builds on the H100 (NVRTC + cooperative
# linking, whose ptxas needs more registers than nvcc's whole-program build at the same REG_K_TILES;
# results/persistent_v19/fit_mma_registers_nvrtc.*). 8-warp backwards keep 46-50 of 64 k-tiles
# (v4 model: 31), 8-warp forwards 9-12 (4-5), 16-warp forwards at H=2048 B <= 4 4 of 8 (3); 16-warp
# forwards need 2.5 more registers per batch row (fp16 H=1536 B=16 keeps 2 of 6: v4's 3 spilled).
MMA_REG_OVERHEAD_V19 = {("forward", 16): 37, ("forward", 8): 88, ("forward", 4): 160,
                        ("backward", 16): 76, ("backward", 8): 52, ("backward", 4): 112}
MMA_REG_PER_BATCH_V19 = {("forward", 16): 2.5}
# v19: with every k-tile in registers the shared-memory tile loop is gone and ptxas needs 40 + B:
# 16-warp backwards at H <= 1024 and B <= 8 keep all 16 k-tiles (128 registers, v4 model: 9; B=16
# spills there and keeps the partial 9), fp32 split forwards at H=1024 B=8 all 4.
MMA_FULL_REG_OVERHEAD_V19 = {("backward", 16): 40, ("forward", 16): 40}
MMA_FULL_REG_PER_BATCH_V19 = 1
# v19: a 16-warp forward with an odd number of shared-memory k-tiles (the unroll-by-2 loop's remainder)
# needs this many more (bf16 H=1792 B=4 keeps 3 of 7; nvcc: fp16 H=2112 B=4 spills 8 bytes at 4 of 9).
MMA_ODD_SMEM_TILES_REGS_V19 = {("forward", 16): 8}
MMA_REG_MODELS = ("v19", "v4", "v19-kept", "v19-ranked")   # v38: v19's tiles with v4's picks kept everywhere /
                                                            # never (the ablation / an exploration)
# ... plus one register per batch row above 16 (the pointwise and staging state grow with B): the
# overhead above was fitted at B <= 16; at H=512 B=64 (16 warps) ptxas needs 128 + 16 spilled bytes
# where the fit said 104, the engine's back-off then ran out of shared memory and "auto" fell back to
# the fp32 grid kernel (33 µs/step in the bf16 sweep instead of ~6).
MMA_REG_PER_BATCH_ABOVE_16 = 1
# v13: fp32 forwards on the tensor cores as fp16 hi/lo halves (SPLIT=1: twice the A tiles, three mma
# per tile). Besides tiles and accumulators ptxas 13.0 needed 45 (16 warps) and 72-94 (8 and 4 warps)
# registers with every k-tile in registers (sm_90 and sm_80: fp32 H=512/1024, B=1..8). v19: 16 warps
# with shared-memory k-tiles need more (fp32 H=1280 B=8 keeps 1 of 5, not 2), 8 warps less (H=1536
# B=4 keeps 6 of 12, not 5).
MMA_SPLIT_DTYPE = "float32"
MMA_SPLIT_REG_OVERHEAD_V4 = {("forward", 16): 48, ("forward", 8): 96, ("forward", 4): 96}
MMA_SPLIT_REG_OVERHEAD_V19 = {("forward", 16): 60, ("forward", 8): 72, ("forward", 4): 96}
PAIRED_SPLIT_BATCHES = (1, 2, 4)  # v14: 2B <= 8 vector rows fit one N tile, partner column by one shuffle
MMA_MIN_COMPUTE = (8, 0)          # mma.sync m16n8k16 with bf16 inputs
MMA_STAGE_CHUNK = 8               # float4 loads per lane in flight while staging (kStageChunk)
MMA_L2_ROUND_TRIP_CLOCKS = 400    # ~0.23 us at 1.75 GHz: ranks plans by their staging round trips


@dataclass(frozen=True)
class MmaPlan(_PassGeometry, _LayerLaunch):
    """Tile and launch parameters of one pass of the tensor-core kernel for one layer: a block of
    ``warps`` warps owns ``units`` hidden units (``m_tiles`` 16-row tiles), each warp ``k_tiles``
    16-column tiles of which the first ``reg_k_tiles`` live in registers, the rest in shared memory."""

    pass_name: str          # "forward" or "backward"
    dtype: str              # "float16" or "bfloat16"; "float32": the v13 hi/lo split (forward only)
    m_tiles: int
    k_tiles: int
    reg_k_tiles: int
    regs_per_thread: int    # estimate; the compiled kernel reports the real count
    smem_bytes: int
    tagged: bool = True     # v5 tagged exchange between steps (False: grid.sync; rules.tagged_exchange_pays)
    input_k_tiles: int = 0  # v12 forward: W_ih k-tiles per warp in shared memory, x W_ih^T in the kernel
                            # (with_input_projection); 0: the input projection is a GEMM before it
    input_part: bool = False  # v51: the kernel's product covers only the first input_part_from inputs, a GEMM
                              # before it the rest (with_input_part, INPUT_PART=1)
    input_reg_k_tiles: int = 0  # v52: of each warp's input_k_tiles, the first this many in registers, not shared
                                # memory (with_input_reg_tiles, IN_REG_K_TILES)
    units_fastest: bool = True  # v11 pointwise thread order where it applies (kernel's slot_of); False:
                                # the v10 order, UNITS_FASTEST=0 (the ablation)
    paired_split: bool = True   # v14: the split's hi and lo vector rows in one N tile where B is 1, 2 or 4
                                # (2 mma per tile); False: 3 mma, PAIRED_SPLIT=0 (the ablation)
    poll_delay_ns: int = 0      # v16: sleep before a warp's first poll of the tagged exchange (with_poll_delay)
    poll_spin_cycles: int = 0   # v35: that wait as a clock64() spin of this many SM cycles instead of
                                # __nanosleep(poll_delay_ns) (rules.poll_spin_cycles, with_poll_delay)
    poll_backoff_ns: int = 0    # v55: a lane's sleep after a poll that found its slice incomplete (rules.poll_backoff_ns,
                                # with_poll_delay; POLL_BACKOFF_NS)
    split_words: bool = True    # v28: the split's tagged exchange as one word per value (hi | lo, the lo's
                                # lowest bit the tag); False: v13's hi and lo rows, SPLIT_WORDS=0 (the ablation)
    group_barriers: bool = False  # v30: a grouped grid.sync plan synchronises each (direction, group) on its own
                                  # counter (GROUP_BARRIERS=1; measured slower than grid.sync(), an option)
    late_loads: bool = False    # v31: a grid.sync backward loads the next step's inputs after the barrier and
                                # reads a 16-bit dy, prefetched into L2 (BWD_LATE_LOADS=1; with_late_loads)
    batch_groups: int = 1       # v30 (16-bit layers): the layer's batch is batch_groups x batch columns, each
                                # group on blocks_per_dir blocks of its own (grouped_plan); batch is one group's
    cluster_k: int = 1          # v42 (tagged forwards, sm_90): clusters of cluster_k blocks each run one virtual
                                # block of cluster_k x warps warps and m_tiles m-tiles, a rank 1/cluster_k of K
                                # (with_cluster_k); units and blocks_per_dir stay a real block's and the grid's
    moves_outputs: bool = True  # v58 (forwards): a replay's outputs written by the output delta (v56); False: OUT_DELTA=0,
                                # the spill back-off's last step (without_moved_outputs), the host copies them out

    kind = "mma"
    kernel_file = "persistent_mma.cu"

    @property
    def grid(self) -> int:
        return self.blocks_per_dir * self.directions_per_launch * self.batch_groups

    @property
    def n_tiles(self) -> int:
        return -(-self.batch // 8)

    @property
    def parts(self) -> int:
        """16-bit halves per weight and per h value: 2 for the fp32 split (v13), else 1."""
        return mma_parts(self.dtype)

    @property
    def paired(self) -> bool:
        """The split's paired mma (kernel's kPaired): W_hi and W_lo each times [h_hi | h_lo] in one N tile."""
        return self.parts == 2 and self.paired_split and self.batch in PAIRED_SPLIT_BATCHES

    @property
    def mma_per_tile(self) -> int:
        """mma.sync per (m-tile, k-tile, n-tile): 1 for 16-bit, 3 for the split, 2 paired."""
        return 1 if self.parts == 1 else (2 if self.paired else 3)

    @property
    def tagged_rows(self) -> int:
        """Rows of the step's vector in the tagged exchange: B, or 2B for the split's hi and lo rows,
        B again with v28's split words."""
        return self.batch if self.parts == 2 and self.split_words else self.parts * self.batch

    @property
    def register_tiles(self) -> int:
        return self.reg_k_tiles

    @property
    def acc_split(self) -> int:
        return mma_acc_split(self.parts * self.m_tiles, self.n_tiles, self.k_tiles)

    def tile_shape(self) -> MmaTileShape:
        """How the packed tiles cut W_hh: per block, or (v42) per cluster's virtual block, whose packed tiles are in
        memory its ranks' tiles one after the other."""
        c = self.cluster_k
        return MmaTileShape(blocks=self.blocks_per_dir // c, rows_per_block=self.rows_per_unit * self.units * c,
                            warps=self.warps * c, m_tiles=self.m_tiles, k_tiles=self.k_tiles)

    def defines(self) -> dict:
        """Compile-time constants of kernels/persistent_mma.cu."""
        return {"PASS": 0 if self.pass_name == "forward" else 1, "BF16": int(self.dtype == "bfloat16"),
                "BATCH": self.batch, "NWARPS": self.warps, "M_TILES": self.m_tiles,
                "K_TILES": self.k_tiles, "REG_K_TILES": self.reg_k_tiles, "TAGGED": int(self.tagged),
                **({"SPLIT": 1} if self.parts == 2 else {}),
                **({"IN_K_TILES": self.input_k_tiles} if self.input_k_tiles else {}),
                **({"INPUT_PART": 1} if self.input_part else {}),
                **({"IN_REG_K_TILES": self.input_reg_k_tiles} if self.input_reg_k_tiles else {}),
                **({} if self.units_fastest else {"UNITS_FASTEST": 0}),
                **({"PAIRED_SPLIT": 0} if self.parts == 2 and not self.paired_split else {}),
                **({"SPLIT_WORDS": 0} if self.parts == 2 and not self.split_words else {}),
                **({"POLL_DELAY_NS": self.poll_delay_ns} if self.poll_delay_ns else {}),
                **({"POLL_SPIN_CYCLES": self.poll_spin_cycles} if self.poll_delay_ns and self.poll_spin_cycles else {}),
                **({"POLL_BACKOFF_NS": self.poll_backoff_ns} if self.tagged and self.poll_backoff_ns else {}),
                **({"GROUPS": self.batch_groups} if self.batch_groups > 1 else {}),
                **({"CLUSTER_K": self.cluster_k} if self.cluster_k > 1 else {}),
                **({"GROUP_BARRIERS": 1} if self.barrier_per_group else {}),
                **({"BWD_LATE_LOADS": 1} if self.loads_late else {}),
                **({} if self.moves_outputs or self.pass_name != "forward" else {"OUT_DELTA": 0})}

    @property
    def barrier_per_group(self) -> bool:
        """v30: a grouped grid.sync plan built with a counter per (direction, group) (GROUP_BARRIERS)."""
        return self.batch_groups > 1 and self.group_barriers and not self.tagged

    @property
    def loads_late(self) -> bool:
        """v31: a grid.sync backward built with BWD_LATE_LOADS (the engine then hands it a 16-bit dy)."""
        return self.pass_name == "backward" and self.late_loads and not self.tagged

    @property
    def in_kernel_projection(self) -> bool:
        return self.input_k_tiles > 0

    def input_tile_shape(self) -> MmaTileShape:
        """How W_ih's rows of a block are cut (the same rows as tile_shape, input columns)."""
        return replace(self.tile_shape(), k_tiles=self.input_k_tiles)

    @property
    def input_part_from(self) -> int:
        """v51: the first input column the GEMM before the kernel covers (INPUT_PART; the kernel's warps cover the
        columns below, 16 x input_k_tiles each)."""
        return 16 * self.input_k_tiles * self.warps * self.cluster_k

    def without_input_projection(self) -> "MmaPlan":
        """The same plan with the input projection as a GEMM before the kernel (the ablation)."""
        if not self.input_k_tiles:
            return self
        return replace(self, input_k_tiles=0, input_part=False, input_reg_k_tiles=0,
                       smem_bytes=self.smem_bytes - mma_input_smem_bytes(self.batch, self.warps, self.m_tiles,
                                                                         self.input_k_tiles, self.parts,
                                                                         self.input_reg_k_tiles),
                       regs_per_thread=self.regs_per_thread - mma_input_registers(self))

    def without_moved_outputs(self) -> "MmaPlan":
        """v58: the same forward with plain output stores (OUT_DELTA=0): a replay copies its outputs out."""
        return replace(self, moves_outputs=False)

    def exchange_shape(self, directions: int) -> tuple:
        """uint32 words of the exchange buffer [D][2][B][row] (zeroed before each launch) through which
        the blocks pass the step's vector (H values forward, 4H backward): one tagged word per value
        (rows rounded up to 4 words), or packed 16-bit values under grid.sync (rows rounded up to 8
        values, i.e. 4 words)."""
        k = self.hidden if self.pass_name == "forward" else 4 * self.hidden
        row = -(-k // 4) * 4 if self.tagged else -(-k // 8) * 4
        # split: the lo rows after the hi rows, or (v28, tagged) in the words' high halves; v30: a region
        # per (direction, batch group)
        return (directions * self.batch_groups, 2, self.tagged_rows if self.tagged else self.parts * self.batch, row)

    def describe(self) -> str:
        projection = f", input projection in the kernel ({self.input_k_tiles} k-tiles)" if self.input_k_tiles else ""
        if self.input_part:
            projection = (f", input projection in the kernel over inputs [0, {self.input_part_from}) "
                          f"({self.input_k_tiles} k-tiles), a GEMM over the rest")
        if self.input_reg_k_tiles:
            projection += f", {self.input_reg_k_tiles} of its k-tiles in registers"
        split = "" if self.parts == 1 else f" as fp16 hi/lo halves, {self.mma_per_tile} mma per tile"
        if self.batch_groups > 1:
            split += f", the batch as {self.batch_groups} groups of {self.batch} on blocks of their own"
            if self.barrier_per_group:
                split += ", a barrier per group"
        if self.loads_late:
            split += LATE_LOADS_TEXT
        if self.cluster_k > 1:
            split += f", clusters of {self.cluster_k} blocks, each 1/{self.cluster_k} of K"
        if not self.moves_outputs and self.pass_name == "forward":
            split += ", a replay's outputs copied out"
        return (f"{self.pass_name} (tensor cores, {self.dtype}{split}): {self.grid} blocks x {self.threads} threads, "
                f"{self.units} units/block, {self.reg_k_tiles}/{self.k_tiles} k-tiles in registers, "
                f"{self.smem_bytes // 1024} KB smem, {self.launches} launch(es){projection}, "
                f"{exchange_text(self.tagged, self.poll_delay_ns, self.poll_spin_cycles, self.poll_backoff_ns)}")

    def with_exchange(self, tagged: bool) -> "MmaPlan":
        """The same plan with the other exchange (same shared memory)."""
        return replace(self, tagged=tagged)

    def with_reg_tiles(self, reg_k_tiles: int) -> "MmaPlan":
        """The same tiling with fewer register k-tiles (after a spill): more shared memory."""
        moved = self.reg_k_tiles - reg_k_tiles
        a_tiles = self.parts * self.m_tiles
        return replace(self, reg_k_tiles=reg_k_tiles,
                       smem_bytes=self.smem_bytes + moved * a_tiles * self.threads * 16,
                       regs_per_thread=self.regs_per_thread - 4 * a_tiles * moved)


def mma_parts(dtype: str) -> int:
    return 2 if dtype == MMA_SPLIT_DTYPE else 1


def mma_acc_split(m_tiles: int, n_tiles: int, k_tiles: int) -> int:
    """Independent accumulator sets over k per warp (kernels/persistent_mma.cu, kAccSplit): at
    least 4 independent mma chains per warp where the k-tiles allow."""
    chains = m_tiles * n_tiles
    return min(k_tiles, 1 if chains >= 4 else (2 if chains >= 2 else 4))


def mma_smem_bytes(pass_name: str, batch: int, warps: int, m_tiles: int, k_tiles: int, smem_k_tiles: int,
                   parts: int = 1) -> int:
    """Shared memory of kernels/persistent_mma.cu: A tiles, warp partials, staged vectors (``parts``
    = 2: the fp32 split's hi and lo tiles and vector rows)."""
    n_pad = 8 * -(-batch // 8)
    tiles = warps * smem_k_tiles * parts * m_tiles * 32 * 16
    if pass_name == "forward":
        partials = warps * 4 * m_tiles * (4 * n_pad + 4)
    else:
        partials = warps * 16 * m_tiles * (n_pad + 4)
    vectors = warps * parts * batch * (8 * k_tiles + 4)
    return tiles + 4 * partials + 4 * vectors


def mma_input_smem_bytes(batch: int, warps: int, m_tiles: int, input_k_tiles: int, parts: int = 1,
                         reg_k_tiles: int = 0) -> int:
    """Shared memory the in-kernel input projection (v12) adds: the W_ih tiles (v52: but the ``reg_k_tiles``
    per warp held in registers) and staged x_t (``parts`` = 2, v29: the fp32 split's x_t as hi and lo rows; its
    W_ih tiles are the hi fragments only)."""
    return (warps * (input_k_tiles - reg_k_tiles) * m_tiles * 32 * 16
            + parts * 4 * warps * batch * (8 * input_k_tiles + 4))


def mma_input_registers(plan) -> int:
    """Registers the in-kernel projection adds: the input product's accumulators, carried from one
    step's wait to the next step's product (the split's hi and lo sets, v29), and (v52) its register k-tiles."""
    return 4 * plan.parts * plan.m_tiles * plan.n_tiles + 4 * plan.m_tiles * plan.input_reg_k_tiles


def with_input_projection(props: dict, plan, input_sizes):
    """``plan`` (a forward) computing x W_ih^T itself where it fits (grid plans:
    grid_with_input_projection, v15). Tensor-core plans (v12): where every layer's input size (a
    multiple of 8: x rows are loaded 16 bytes at a time) fits: the W_ih tiles of the widest input
    in shared memory next to everything else, and the carried input accumulators in registers.
    Otherwise ``plan`` unchanged (a GEMM before the kernel). One plan serves every layer, so the
    narrower inputs run zero-padded k-tiles. v29: the fp32 split too (W_ih's hi tiles, x_t's hi and lo
    rows; x_hi W_lo^T stays a GEMM)."""
    if plan.kind == "grid":
        return grid_with_input_projection(props, plan, input_sizes)
    if plan.pass_name != "forward" or any(k % 8 for k in input_sizes):
        return plan
    if plan.parts == 2 and plan.batch_groups > 1:   # v40: v29's split input [T][B][.] is not grouped
        return plan
    in_k = -(-max(input_sizes) // (16 * plan.warps))
    smem = plan.smem_bytes + mma_input_smem_bytes(plan.batch, plan.warps, plan.m_tiles, in_k, plan.parts)
    regs = plan.regs_per_thread + mma_input_registers(plan)
    if smem > props["smem_per_block_optin"] - SMEM_RESERVED_PER_BLOCK or regs > register_cap(props, plan.threads):
        return plan
    return replace(plan, input_k_tiles=in_k, smem_bytes=smem, regs_per_thread=regs)


def with_input_part(plan, k_tiles: int):
    """v51: ``plan`` with its in-kernel projection cut to ``k_tiles`` k-tiles per warp, the GEMM before the kernel
    taking the inputs past them (INPUT_PART), where it has a 16-bit in-kernel projection of more k-tiles on
    unclustered blocks; else ``plan`` as it is. The W_ih tiles and x_t staged shrink with the k-tiles."""
    if not (plan.kind == "mma" and plan.parts == 1 and plan.in_kernel_projection and plan.cluster_k == 1
            and 0 < k_tiles < plan.input_k_tiles):
        return plan
    plan = with_input_reg_tiles(plan, min(plan.input_reg_k_tiles, k_tiles))
    freed = (mma_input_smem_bytes(plan.batch, plan.warps, plan.m_tiles, plan.input_k_tiles, 1, plan.input_reg_k_tiles)
             - mma_input_smem_bytes(plan.batch, plan.warps, plan.m_tiles, k_tiles, 1, plan.input_reg_k_tiles))
    return replace(plan, input_k_tiles=k_tiles, input_part=True, smem_bytes=plan.smem_bytes - freed)


def with_input_reg_tiles(plan, k_tiles: int):
    """v52: ``plan`` with the first ``k_tiles`` (at most its input_k_tiles) of each warp's W_ih k-tiles in registers
    instead of shared memory (IN_REG_K_TILES), where it is a 16-bit tensor-core forward with the projection in the
    kernel on unclustered blocks; else ``plan`` as it is. 0 takes them all back to shared memory."""
    if not (plan.kind == "mma" and plan.parts == 1 and plan.in_kernel_projection and plan.cluster_k == 1):
        return plan
    k_tiles = max(0, min(int(k_tiles), plan.input_k_tiles))
    moved = k_tiles - plan.input_reg_k_tiles
    return replace(plan, input_reg_k_tiles=k_tiles, smem_bytes=plan.smem_bytes - moved * plan.m_tiles * plan.threads * 16,
                   regs_per_thread=plan.regs_per_thread + 4 * plan.m_tiles * moved)


def layer_input_sizes(config) -> list:
    return [config.layer_input_size(layer) for layer in range(config.num_layers)]


def with_tagged_projection(props: dict, plan, input_sizes):
    """``plan`` tagged with the in-kernel projection (v26, rules.tagged_projection_pays) where the
    projection fits, else ``plan`` as it is (grid.sync, the GEMM before the kernel)."""
    tagged = with_input_projection(props, plan.with_exchange(True), input_sizes)
    return tagged if tagged.in_kernel_projection else plan


def without_input_projection(plan):
    """``plan`` with its projection as a GEMM before the kernel (the ablation, a spill back-off),
    under the exchange a plan without it takes: v26's tagged exchange pays only with the projection."""
    bare = plan.without_input_projection()
    if bare is not plan and bare.kind == "mma" and bare.tagged and rules.tagged_projection_pays(bare):
        return bare.with_exchange(False)
    return bare


def mma_cluster_smem_bytes(batch: int, units: int, cluster: int) -> int:
    """v42: the cluster partials [2][cluster][units][n_pad][4] fp32 of a clustered plan (the kernel's Carve.cluster)."""
    return 4 * 2 * cluster * units * 8 * -(-batch // 8) * 4


# v45: the largest REG_K_TILES of the clustered fp32 split's virtual tile that NVRTC (the engine's own build, CUDA 13)
# compiles without spills, per (tile batch, warps, m_tiles, k_tiles, batch groups): every shape "auto" plans on
# clusters for fp32 H=512-2048, B=1-64 (tools/fit_cluster_registers.py --compiler nvrtc; results/persistent_v45, call 1;
# nvcc's whole-program build keeps other counts at 12 of the 42). with_cluster_k declines a shape whose remaining
# k-tiles do not fit shared memory (H=1536 B=8, H=640 B=32), which the engine's back-off found only on the device;
# the engine still starts each build from every k-tile in registers. Refit after kernel changes.
CLUSTER_SPLIT_REG_K_TILES = {
    (5, 8, 3, 3, 1): 3, (5, 8, 4, 4, 1): 4, (5, 8, 5, 5, 1): 3, (5, 8, 6, 6, 1): 3, (6, 8, 3, 3, 1): 3,
    (6, 8, 4, 4, 1): 4, (6, 8, 5, 5, 1): 3, (6, 8, 6, 6, 1): 3, (7, 8, 3, 3, 1): 3, (7, 8, 4, 4, 1): 4,
    (7, 8, 5, 5, 1): 4, (7, 8, 6, 6, 1): 3, (8, 8, 4, 4, 1): 4, (8, 8, 5, 5, 1): 3, (8, 8, 6, 2, 3): 2,
    (8, 8, 6, 3, 2): 3, (8, 8, 6, 6, 1): 2, (8, 8, 7, 4, 2): 1, (8, 8, 8, 2, 4): 2, (8, 8, 8, 4, 2): 2,
    (8, 8, 10, 3, 4): 1, (9, 8, 3, 3, 1): 3, (9, 8, 4, 4, 1): 4, (9, 8, 5, 5, 1): 2, (10, 8, 3, 3, 1): 3,
    (10, 8, 4, 4, 1): 4, (10, 8, 5, 5, 1): 2, (11, 8, 3, 3, 1): 3, (11, 8, 4, 4, 1): 4, (11, 8, 5, 5, 1): 2,
    (12, 8, 3, 3, 1): 3, (12, 8, 4, 4, 1): 4, (12, 8, 5, 5, 1): 2, (13, 8, 3, 3, 1): 3, (13, 8, 4, 4, 1): 4,
    (13, 8, 5, 5, 1): 3, (14, 8, 3, 3, 1): 3, (14, 8, 4, 4, 1): 4, (14, 8, 5, 5, 1): 3, (15, 8, 3, 3, 1): 3,
    (15, 8, 4, 4, 1): 4, (15, 8, 5, 5, 1): 3}


def with_cluster_k(props: dict, plan, cluster: int, warps: int | None = None):
    """v42: the tensor-core forward ``plan`` on clusters of ``cluster`` blocks, each block of ``warps`` warps (default:
    the plan's) owning ``plan.units`` units and a 1/cluster slice of K, every k-tile in registers (the engine's spill
    back-off moves some to shared memory), tagged. v44: in batch groups too (each group on whole clusters), and with
    v12's input projection (each block a 1/cluster slice of the input columns too). None where it does not apply:
    another plan kind, v29's split projection, clustered already, before sm_90, a virtual block whose rows are not
    whole m-tiles, or a grid or shared memory past the device's. (Whether the clusters co-reside, the engine asks
    the driver: 30 clusters of 4 and 39 of 3 on the H200.)"""
    warps = warps or plan.warps
    if (plan.kind != "mma" or plan.pass_name != "forward" or (plan.input_k_tiles and plan.parts == 2)
            or plan.cluster_k > 1 or cluster < 2 or tuple(props["compute_capability"]) < (9, 0)):
        return None
    rows = 4 * plan.units * cluster
    k_tiles = -(-plan.reduction_length // (16 * cluster * warps))
    in_k = -(-plan.input_k_tiles * plan.warps // (cluster * warps))   # the plan's (padded) input columns
    blocks = -(-plan.blocks_per_dir // cluster) * cluster
    smem = (mma_smem_bytes("forward", plan.batch, warps, rows // 16, k_tiles, 0, plan.parts)
            + mma_cluster_smem_bytes(plan.batch, plan.units, cluster)
            + (mma_input_smem_bytes(plan.batch, warps, rows // 16, in_k) if in_k else 0))
    if (rows % 16 or blocks * plan.directions_per_launch * plan.batch_groups > props["sm_count"]
            or smem > props["smem_per_block_optin"] - MMA_STATIC_SMEM_BYTES):
        return None
    a_tiles = plan.parts * rows // 16
    regs = (4 * a_tiles * k_tiles + 4 * a_tiles * plan.n_tiles * (2 if in_k else 1)
            + MMA_FULL_REG_OVERHEAD_V19[("forward", 16)])
    clustered = replace(plan, warps=warps, m_tiles=rows // 16, k_tiles=k_tiles, reg_k_tiles=k_tiles,
                        blocks_per_dir=blocks, input_k_tiles=in_k, input_reg_k_tiles=0, cluster_k=cluster, tagged=True,
                        smem_bytes=smem, regs_per_thread=min(regs, 255))
    kept = cluster_kept_k_tiles(clustered)
    room = props["smem_per_block_optin"] - MMA_STATIC_SMEM_BYTES
    if kept is not None and clustered.with_reg_tiles(kept).smem_bytes > room:
        return None   # v45: the k-tiles NVRTC cannot keep in registers do not fit shared memory either
    return clustered


def cluster_kept_k_tiles(plan):
    """v45: the register k-tiles NVRTC keeps for the clustered fp32 split ``plan`` (CLUSTER_SPLIT_REG_K_TILES), or None
    for shapes the table does not list and for 16-bit plans (the engine's back-off is then the only judge)."""
    if plan.parts != 2 or plan.input_k_tiles:
        return None
    return CLUSTER_SPLIT_REG_K_TILES.get((plan.batch, plan.warps, plan.m_tiles, plan.k_tiles, plan.batch_groups))


def without_tagged_wait(plan):
    """``plan`` under v5's exchange rule alone (the v26 ablation): a forward tagged by
    rules.tagged_projection_pays goes back to grid.sync and the GEMM, one tagged by
    rules.split_tagged_pays to grid.sync (its delay follows from with_poll_delay)."""
    if plan.kind != "mma" or not plan.tagged or rules.tagged_exchange_pays(plan.parts * plan.batch, plan.k_tiles):
        return plan
    if rules.tagged_projection_pays(plan):
        return without_input_projection(plan)
    split_tagged = rules.split_tagged_pays(plan.pass_name, plan.parts, plan.batch, plan.k_tiles, plan.m_tiles,
                                           plan.split_words)
    return plan.with_exchange(False) if split_tagged else plan


def without_split_words(plan):
    """``plan`` with the split's v13 hi and lo exchange rows (v28's ablation): tagged only where v26's
    rule tags the rows too (the words' rule covers every plan that one does; the delay follows from
    with_poll_delay)."""
    if plan.kind != "mma" or plan.parts != 2 or not plan.split_words:
        return plan
    rows_tagged = (rules.tagged_exchange_pays(plan.parts * plan.batch, plan.k_tiles)
                   or rules.split_tagged_pays(plan.pass_name, plan.parts, plan.batch, plan.k_tiles, plan.m_tiles,
                                              words=False))
    return replace(plan, split_words=False, tagged=plan.tagged and rows_tagged)


def with_late_loads(plan, mode="auto"):
    """A backward ``plan`` (tensor-core v31; fp32 grid and rows v32) with the late loads where
    rules.late_loads_pay ("auto"), wherever they apply (True) or nowhere (False); forwards as they are."""
    if plan.kind not in ("mma", "grid", "rows") or plan.pass_name != "backward":
        return plan
    late = rules.late_loads_pay(plan) if mode == "auto" else bool(mode)   # (loads_late: never tagged)
    return plan if plan.late_loads == late else replace(plan, late_loads=late)


def with_poll_delay(plan, enabled=True, spin="auto", backoff="auto"):
    """``plan`` (grid or tensor-core) with its rules.poll_delay_ns where ``enabled``, else 0; a tensor-core plan
    with a delay waits it by a spin of rules.poll_spin_cycles (``spin`` "auto"), of ``spin`` cycles (an int;
    0: __nanosleep, the ablation), v35; a tagged tensor-core plan sleeps rules.poll_backoff_ns after an incomplete
    poll (``backoff`` "auto"), or ``backoff`` ns (an int; 0: none, the ablation), v55."""
    delay = rules.poll_delay_ns(plan) if enabled else 0
    plan = plan if plan.poll_delay_ns == delay else replace(plan, poll_delay_ns=delay)
    if not hasattr(plan, "poll_spin_cycles"):   # the grid (FFMA) kernel sleeps
        return plan
    cycles = (rules.poll_spin_cycles(plan) if spin == "auto" else int(spin)) if delay else 0
    plan = plan if plan.poll_spin_cycles == cycles else replace(plan, poll_spin_cycles=cycles)
    sleep = (rules.poll_backoff_ns(plan) if backoff == "auto" else int(backoff or 0)) if plan.tagged else 0
    return plan if plan.poll_backoff_ns == sleep else replace(plan, poll_backoff_ns=sleep)


def mma_register_k_tiles(props, pass_name, parts, warps, batch, m_tiles, k_tiles, reg_model="v19") -> tuple:
    """(k-tiles per warp kept in registers, registers besides them) by the register model
    ``reg_model`` ("v19", "v19-kept", "v19-ranked", or "v4": the ablation); (None, None) when not even the rest
    fits."""
    if reg_model not in MMA_REG_MODELS:
        raise ValueError(f"reg_model: expected one of {MMA_REG_MODELS}, got {reg_model!r}")
    a_tiles, n_tiles = parts * m_tiles, -(-batch // 8)
    v4 = reg_model == "v4"
    tables = ((MMA_SPLIT_REG_OVERHEAD_V4 if v4 else MMA_SPLIT_REG_OVERHEAD_V19) if parts == 2
              else (MMA_REG_OVERHEAD_V4 if v4 else MMA_REG_OVERHEAD_V19))
    fixed = (MMA_REG_PER_BATCH_ABOVE_16 * max(0, batch - 16)
             + 4 * a_tiles * n_tiles * mma_acc_split(a_tiles, n_tiles, k_tiles))
    cap = register_cap(props, 32 * warps)
    full = None if v4 else MMA_FULL_REG_OVERHEAD_V19.get((pass_name, warps))
    if full is not None:
        full += MMA_FULL_REG_PER_BATCH_V19 * batch
        if full + fixed + 4 * a_tiles * k_tiles <= cap:
            return k_tiles, full + fixed
    per_batch = 0 if v4 or parts == 2 else MMA_REG_PER_BATCH_V19.get((pass_name, warps), 0)
    base = tables[(pass_name, warps)] + int(per_batch * batch) + fixed
    if base > cap:
        return None, None
    reg = min(k_tiles, (cap - base) // (4 * a_tiles))
    odd = 0 if v4 else MMA_ODD_SMEM_TILES_REGS_V19.get((pass_name, warps), 0)
    if odd and (k_tiles - reg) % 2 == 1:
        base += odd
        reg = max(0, min(reg, (cap - base) // (4 * a_tiles)))
    return reg, base


def _mma_candidate(props, pass_name, dtype, hidden, batch, directions, warps, units, reg_model="v19"):
    """The MmaPlan for one (warps, units) choice, or None if it cannot fit one block per SM."""
    rows_per_unit, k = (4, hidden) if pass_name == "forward" else (1, 4 * hidden)
    if units * batch > 32 * warps:            # one pointwise thread per (unit, batch)
        return None
    m_tiles = -(-rows_per_unit * units // 16)
    k_tiles = -(-k // (16 * warps))
    parts = mma_parts(dtype)
    a_tiles = parts * m_tiles
    reg_k_tiles, base = mma_register_k_tiles(props, pass_name, parts, warps, batch, m_tiles, k_tiles, reg_model)
    if reg_k_tiles is None:
        return None
    smem = mma_smem_bytes(pass_name, batch, warps, m_tiles, k_tiles, k_tiles - reg_k_tiles, parts)
    if smem > props["smem_per_block_optin"] - SMEM_RESERVED_PER_BLOCK:
        return None
    tagged = (rules.tagged_exchange_pays(parts * batch, k_tiles)
              or rules.split_tagged_pays(pass_name, parts, batch, k_tiles, m_tiles))
    return MmaPlan(hidden=hidden, batch=batch, directions_per_launch=directions, launches=1, units=units,
                   blocks_per_dir=-(-hidden // units), warps=warps, pass_name=pass_name, dtype=dtype,
                   m_tiles=m_tiles, k_tiles=k_tiles, reg_k_tiles=reg_k_tiles,
                   regs_per_thread=base + 4 * a_tiles * reg_k_tiles, smem_bytes=smem, tagged=tagged)


def mma_step_clocks(plan: MmaPlan) -> float:
    """Rough clocks of one step's block work, to rank plans of one configuration: the mma issue of
    one scheduler (~8 clocks per mma.sync) or the longest accumulator chain (~35 clocks per mma;
    k-tiles split over mma_acc_split sets), whichever is longer, plus shared-memory tile loads,
    staging (one L2 round trip per chunk of kStageChunk loads) and the warp-partial sums. The fp32
    split (v13): 3 mma per tile, the lo correction chain 2 mma long per k-tile, twice the tile and
    staging loads; paired (v14, B <= 4): 2 mma per tile, each chain 1 mma per k-tile."""
    parts = plan.parts
    per_warp_mma = plan.k_tiles * plan.m_tiles * plan.n_tiles * plan.mma_per_tile
    issue = max(1, plan.warps // 4) * per_warp_mma * 8
    chain = -(-plan.k_tiles // plan.acc_split) * 35 * (1 if plan.paired else parts)
    smem_tiles = max(1, plan.warps // 4) * (plan.k_tiles - plan.reg_k_tiles) * parts * plan.m_tiles * 4
    loads = -(-parts * plan.batch * plan.k_tiles * 4 // 32)   # float4 staging loads per lane
    staging = -(-loads // MMA_STAGE_CHUNK) * MMA_L2_ROUND_TRIP_CLOCKS + 4 * loads
    return max(issue, chain) + smem_tiles + staging + 8 * plan.warps


def _mma_plan_for_directions(props, pass_name, dtype, hidden, batch, directions, reg_model="v19"):
    """The best-ranked (warps, units) plan of one launch of ``directions`` directions, or None. v19
    keeps the v4 model's (warps, units) where that one fits (measured in the v5 plan exploration).
    Only the register k-tiles change there (where v19 keeps fewer and the shared memory no longer fits,
    as fp32 H=1280 B=8, v19 ranks anew). v38: not where rules.v4_warps_kept says the ranking's pick
    measured faster (16-bit forwards at H=1728-2048, B <= 4, at H=1088-1472, B=1 and two directions in one grid at
    H=704-1216, B <= 8: 8 warps instead of 16 or 4)."""
    if reg_model != "v4":
        v4 = _mma_plan_for_directions(props, pass_name, dtype, hidden, batch, directions, "v4")
        kept = v4 and _mma_candidate(props, pass_name, dtype, hidden, batch, directions, v4.warps, v4.units, reg_model)
        # "v19-kept": the choice before v38; "v19-ranked": every pick ranked anew
        if kept and reg_model != "v19-ranked" and (reg_model == "v19-kept" or rules.v4_warps_kept(kept)):
            return kept
    blocks_available = props["sm_count"] // directions
    if blocks_available < 1:
        return None
    smallest = -(-hidden // blocks_available)
    plans = []
    for warps in MMA_WARP_CHOICES:
        for units in range(smallest, min(hidden, smallest + 8) + 1):
            plan = _mma_candidate(props, pass_name, dtype, hidden, batch, directions, warps, units, reg_model)
            if plan is not None:
                plans.append(plan)
                break
    return min(plans, key=lambda p: (mma_step_clocks(p), p.units, -p.warps)) if plans else None


def plan_mma(props: dict, pass_name: str, hidden: int, batch: int, num_directions: int = 1,
             dtype: str = "float16", reg_model: str = "v19") -> MmaPlan:
    """Tensor-core plan of one pass (both directions in one grid when they fit, else one after
    the other), or NotSupported naming the limit."""
    if pass_name not in ("forward", "backward"):
        raise ValueError(f"pass_name: expected 'forward' or 'backward', got {pass_name!r}")
    if dtype not in MMA_DTYPES + (MMA_SPLIT_DTYPE,):
        raise NotSupported(STRATEGY, f"the tensor-core kernel takes {'/'.join(MMA_DTYPES)} weights (and "
                                     f"{MMA_SPLIT_DTYPE} forwards as fp16 halves), not {dtype}")
    if dtype == MMA_SPLIT_DTYPE and pass_name != "forward":
        raise NotSupported(STRATEGY, f"the tensor-core kernel runs {MMA_SPLIT_DTYPE} forwards only (v13 split); "
                                     f"the {pass_name} takes the fp32 kernels")
    cc = tuple(props.get("compute_capability", (0, 0)))
    if cc < MMA_MIN_COMPUTE:
        raise NotSupported(STRATEGY, f"the tensor-core kernel needs sm_80+ (mma.sync bf16); "
                                     f"{props.get('name', 'this GPU')} is sm_{cc[0]}{cc[1]}")
    if not props.get("cooperative_launch", True):
        raise NotSupported(STRATEGY, "the device does not support cooperative launches")
    if num_directions == 2:
        both = _mma_plan_for_directions(props, pass_name, dtype, hidden, batch, 2, reg_model)
        if both is not None:
            return both
    one = _mma_plan_for_directions(props, pass_name, dtype, hidden, batch, 1, reg_model)
    if one is None:
        raise NotSupported(STRATEGY, _mma_why_not(props, pass_name, dtype, hidden, batch))
    return replace(one, launches=num_directions)


def forward_on_warps(props: dict, config, warps: int):
    """v52 (persistent.FORWARD_WARPS, forced): the 16-bit forward of ``config`` in one batch group on blocks of
    ``warps`` warps (the fewest units per block that fit, one direction per launch), tagged with the projection in
    the kernel where it fits (v26); None where no such plan fits."""
    if config.dtype not in MMA_DTYPES or warps not in MMA_WARP_CHOICES:
        return None
    hidden, batch = config.hidden_size, config.batch
    smallest = -(-hidden // props["sm_count"])
    for units in range(smallest, min(hidden, smallest + 8) + 1):
        plan = _mma_candidate(props, "forward", config.dtype, hidden, batch, 1, warps, units)
        if plan is not None:
            return with_tagged_projection(props, replace(plan, launches=config.num_directions),
                                          layer_input_sizes(config))
    return None


def _mma_why_not(props, pass_name, dtype, hidden, batch) -> str:
    weights = 4 * hidden * hidden * 2 * mma_parts(dtype)
    on_chip = props["sm_count"] * (props["regs_per_sm"] * 4 + props["smem_per_block_optin"])
    return (f"{pass_name} recurrent weights of hidden_size={hidden} ({dtype}, {weights / 2**20:.1f} MiB as "
            f"mma fragments) plus batch={batch} vectors do not fit one block per SM on "
            f"{props.get('name', 'this GPU')} ({props['sm_count']} SMs, at most {on_chip / 2**20:.1f} MiB of "
            f"registers + shared memory, {props['smem_per_block_optin'] // 1024} KB shared memory per block)")


def _with_projection(props: dict, forward, config):
    """A 16-bit forward with its input projection in the kernel where the rules say it pays and it fits."""
    if rules.tagged_projection_pays(forward):
        return with_tagged_projection(props, forward, layer_input_sizes(config))
    if rules.input_projection_pays(forward):
        return with_input_projection(props, forward, layer_input_sizes(config))
    return forward


def grouped_plan(props: dict, config, pass_name: str = "forward", reg_model: str = "v19", groups: int = None):
    """v30: the 16-bit ``pass_name`` of ``config`` with its batch as ``groups`` (default BATCH_GROUPS) groups, each
    on blocks of its own, planned as a layer of the group's batch on 1/groups of the SMs (the directions'
    way of sharing a grid; GROUP_WARPS warps), a forward with that batch's projection rules; None where
    the batch does not split or a group does not fit."""
    groups, batch = groups or BATCH_GROUPS, config.batch
    split = config.dtype == MMA_SPLIT_DTYPE   # v40: the fp32 split forward in groups too
    if (split and pass_name != "forward") or (config.dtype not in MMA_DTYPES and not split):
        return None
    if batch % groups or batch // groups < _narrowest_group(config, pass_name, split):
        return None
    dims = (pass_name, config.dtype, config.hidden_size, batch // groups, reg_model)
    plan = _group_plan(props, *dims, 2 * groups) if config.num_directions == 2 else None
    if plan is not None:
        plan = replace(plan, directions_per_launch=2)
    else:
        plan = _group_plan(props, *dims, groups)
        plan = plan and replace(plan, launches=config.num_directions)
    if plan is None:
        return None
    plan = replace(plan, batch_groups=groups)
    if pass_name != "forward":
        return plan
    return split_forward(props, plan, config) if split else _with_projection(props, plan, config)


def _narrowest_group(config, pass_name: str, split: bool) -> int:
    """The fewest columns a batch group of ``config``'s ``pass_name`` may have: SPLIT_GROUP_MIN for the fp32 split,
    BATCH_GROUP_MIN for 16-bit passes, half the batch (two groups) where rules.narrow_groups_pay (v46)."""
    if split:
        return SPLIT_GROUP_MIN
    narrow = rules.narrow_groups_pay(pass_name, config.hidden_size, config.batch)
    return config.batch // 2 if narrow else BATCH_GROUP_MIN


def _group_plan(props, pass_name, dtype, hidden, batch, reg_model, shares):
    """The GROUP_WARPS plan of one group of ``batch`` columns on 1/``shares`` of the SMs, or None."""
    smallest = -(-hidden // (props["sm_count"] // shares))
    warps = GROUP_WARPS[pass_name]
    return next((plan for units in range(smallest, min(hidden, smallest + 8) + 1)
                 for plan in [_mma_candidate(props, pass_name, dtype, hidden, batch, 1, warps, units, reg_model)]
                 if plan is not None), None)


def plan_mma_config(props: dict, config, training: bool, reg_model: str = "v19", batch_groups="auto",
                    backward_groups="auto") -> dict:
    """Tensor-core plans of every pass a call needs, or NotSupported. fp32: the split forward (v13)
    and the fp32 kernels' backward. ``batch_groups``: the v30 grouped passes where rules.batch_groups_pay
    or where only they fit ("auto"; v39: as many groups as rules.batch_group_counts gives), wherever they fit
    (True: v30's BATCH_GROUPS) or never (False); an int G > 1: G groups wherever they fit (2: v38's choice).
    ``backward_groups``: the fp32 grid backward's (v41, grid_backward_plan)."""
    args = (config.hidden_size, config.batch, config.num_directions, config.dtype, reg_model)
    if config.dtype == MMA_SPLIT_DTYPE:
        forward = _grouped_pass_plan(props, config, "forward", reg_model, batch_groups)
        forward = forward or split_forward(props, plan_mma(props, "forward", *args), config)
        return {**plan_grid_config(props, config, training, backward_groups=backward_groups), "forward": forward}
    passes = ("forward", "backward") if training else ("forward",)
    plans = {p: _pass_plan(props, config, p, args, batch_groups) for p in passes}
    plans["forward"] = with_poll_delay(plans["forward"])
    return plans


def _pass_plan(props, config, pass_name, args, batch_groups):
    """One 16-bit pass: the grouped plan where it is taken (v30), else the ungrouped one (a forward with
    its projection rules), else the grouped one where only it fits (fp16 H=1024 B=32 trains only
    grouped); NotSupported with the ungrouped plan's reason where neither fits."""
    grouped = _grouped_pass_plan(props, config, pass_name, args[-1], batch_groups)
    if grouped is not None and (batch_groups != "auto" or rules.batch_groups_pay(grouped)):
        return grouped
    try:
        plan = plan_mma(props, pass_name, *args)
    except NotSupported:
        if grouped is None:
            raise
        return grouped
    return _with_projection(props, plan, config) if pass_name == "forward" else plan


def _grouped_pass_plan(props, config, pass_name, reg_model, batch_groups):
    """The grouped plan of one 16-bit pass, or of the fp32 split forward (v40), for ``batch_groups`` (see
    plan_mma_config), or None: "auto" the first of rules.batch_group_counts that fits and pays (v39:
    rules.more_groups_pay; v30's BATCH_GROUPS where it fits; the split: rules.split_group_counts, split_groups_pay),
    True v30's BATCH_GROUPS, an int that many groups."""
    if batch_groups is False:
        return None
    if batch_groups is True:
        return grouped_plan(props, config, pass_name, reg_model, BATCH_GROUPS)
    if batch_groups != "auto":
        if not isinstance(batch_groups, int) or batch_groups < 2:
            raise ValueError(f"batch groups: expected 'auto', True, False or an int >= 2, got {batch_groups!r}")
        return grouped_plan(props, config, pass_name, reg_model, batch_groups)
    split = config.dtype == MMA_SPLIT_DTYPE
    for groups in (rules.split_group_counts if split else rules.batch_group_counts)(config.batch):
        plan = grouped_plan(props, config, pass_name, reg_model, groups)
        if plan is None:
            continue
        if rules.split_groups_pay(plan) if split else groups == BATCH_GROUPS or rules.more_groups_pay(plan):
            return plan
    return None


def largest_mma_hidden(props: dict, batch: int, pass_name: str = "forward", step: int = 64,
                       limit: int = 8192, dtype: str = "float16") -> int:
    """The largest multiple of ``step`` hidden size the tensor-core kernel fits (0 if none)."""
    best = 0
    for hidden in range(step, limit + 1, step):
        try:
            plan_mma(props, pass_name, hidden, batch, dtype=dtype)
        except NotSupported:
            continue
        best = hidden
    return best


def predicted_mma_us_per_step(plan: MmaPlan, clock_ghz: float = 1.75, sync_us: float = 1.0,
                              l2_us: float = 0.45, pointwise_us: float = 0.3) -> float:
    """Kernel-only step: grid barrier, one L2 round trip for the vector, the block's product and
    the serial reduction + pointwise rest (a-priori figures; see notes_persistent.md, v4)."""
    return plan.launches * (sync_us + l2_us + pointwise_us + mma_step_clocks(plan) / (clock_ghz * 1e3))


def h100_properties() -> dict:
    """The H100 SXM as device_properties() reports it (for CPU-side tests and docs)."""
    return {"name": "NVIDIA H100 80GB HBM3", "compute_capability": (9, 0), "sm_count": 132,
            "regs_per_sm": 65536, "regs_per_block": 65536, "smem_per_sm": 233472,
            "smem_per_block_optin": 232448, "max_threads_per_sm": 2048, "l2_bytes": 52428800,
            "cooperative_launch": True}


def a100_properties() -> dict:
    return {"name": "NVIDIA A100-SXM4-80GB", "compute_capability": (8, 0), "sm_count": 108,
            "regs_per_sm": 65536, "regs_per_block": 65536, "smem_per_sm": 167936,
            "smem_per_block_optin": 166912, "max_threads_per_sm": 2048, "l2_bytes": 41943040,
            "cooperative_launch": True}


def small_gpu_properties(sm_count: int = 20) -> dict:
    props = h100_properties()
    props.update(name=f"synthetic {sm_count}-SM GPU", sm_count=sm_count)
    return props


__all__ = ["KernelPlan", "ClusterPlan", "MmaPlan", "plan_mma", "plan_mma_config", "with_input_projection",
           "with_tagged_projection", "without_input_projection", "without_tagged_wait", "layer_input_sizes",
           "plan_grid_config", "plan_cluster", "predicted_cluster_us_per_step", "plan_pass", "plan_config",
           "largest_hidden", "choose_lanes",
           "h100_properties", "a100_properties", "small_gpu_properties", "predicted_us_per_step",
           "largest_mma_hidden", "predicted_mma_us_per_step"]
