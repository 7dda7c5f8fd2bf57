"""Which measured variant a persistent plan takes: the cluster or the grid kernel for fp32 inference,
the step's exchange (grid.sync or the tagged exchange), the first poll's delay, the input projection
inside the kernel, the fp32 forward on the tensor cores, the fp32 backward by gate rows.

persistent_capacity says what fits on a device; these rules say which of the fitting variants was
faster on the H100. Each is a predicate on sizes or on a plan, with the measurement it rests on in its
docstring (results/persistent_vN). Pure Python, no GPU needed.
"""
from __future__ import annotations

from ..flag_changes import count_assignments

# the cluster kernel (fp32 inference)
CLUSTER_MAX_ISSUE_SLOTS = 1000  # v27: the cluster forward wins at B <= 2 up to 932 issue slots per step ...
CLUSTER_MAX_ISSUE_SLOTS_BATCHED = 600   # ... and at B > 2 up to 560; it loses from 1088 and 620
# the exchange
TAGGED_MAX_LOADS_PER_LANE = 4   # the tagged exchange pays up to this many 16-byte polls per lane (v5)
TAGGED_MIN_VECTOR_WORDS = 512   # below this the whole vector sits in a few L2 lines that every warp polls
TAGGED_PROJECTION_MAX_BATCH = 8     # v26: 16-bit forwards at 4 < B <= 8 take the tagged exchange up to ...
TAGGED_PROJECTION_MAX_LOADS_PER_LANE = 8   # ... this many 16-byte polls per lane where the projection fits
SPLIT_TAGGED_BATCH = 4              # v26: the paired fp32 split at B=4 takes the tagged exchange up to ...
SPLIT_TAGGED_MAX_LOADS_PER_LANE = 8  # ... this many polls per lane, its warps sleeping SPLIT_POLL_DELAY_NS
SPLIT_POLL_DELAY_NS = 1200          # before their first poll (a ~2.5 us step), in blocks of at most
SPLIT_TAGGED_MAX_M_TILES = 2        # this many 16-row tiles (8 units)
SPLIT_WORDS_MAX_M_TILES = 3         # v28, split words (one tagged word per h value): blocks of up to 12 units,
SPLIT_WORDS_POLL_DELAY_NS = 400     # the first poll after this (H=1024 and H=1536 at B=4, H100 and H200)
SPLIT_PROJECTION_POLL_DELAY_NS = 100  # v29: the split with its input projection in the kernel (forced), best of 0-400
# the input projection inside the kernel
INPUT_PROJECTION_MIN_BATCH = 4  # the in-kernel projection (v12) measured faster at B=4, slower at B=1
GRID_INPUT_PROJECTION_MAX_BATCH = 2  # the fp32 grid forward's (v15): faster at B=1, 2, slower at B=4, 8
# the first poll's delay
POLL_DELAY_NS = 250             # v16: a tagged forward's warps sleep this long before their first poll ...
POLL_DELAY_MAX_BATCH = 2        # ... at B <= 2 and H <= POLL_DELAY_MAX_HIDDEN (poll_delay_pays)
POLL_DELAY_MAX_HIDDEN = 1024
POLL_DELAY_PASSES = ("forward",)  # the backward's too measured no better (fwd+bwd -0.06 to +0.04 ms)
LONG_POLL_DELAY_NS = 600        # v18: tagged tensor-core forwards at B = 4 and H >= LONG_POLL_DELAY_MIN_HIDDEN
LONG_POLL_DELAY_MIN_HIDDEN = 2048   # without the in-kernel projection (a ~3.5 us step) wait longer
# the fp32 forward on the tensor cores
FP32_SPLIT_MIN_HIDDEN = 512   # v13, H100: the split at B >= FP32_SPLIT_MIN_BATCH from H=512 on
FP32_SPLIT_MIN_BATCH = 8
FP32_SPLIT_SMALL_MIN_BATCH = 32         # v27: below FP32_SPLIT_MIN_HIDDEN the split wins from B=32 ...
FP32_SPLIT_SMALL_B16_MIN_HIDDEN = 320   # ... and at 16 <= B < 32 from H=320
FP32_PAIRED_MIN_HIDDEN = 1024  # v14: the paired split at B=4 wins from here on
FP32_SPLIT_MID_BATCHES = range(5, 8)   # v43: the split (N padded to 8) at B=5-7 from H=768, on clusters where a
FP32_SPLIT_MID_MIN_HIDDEN = 768         # block's units are even (cluster_split_pays); FFMA below (H=640 B=6 ties)


def cluster_pays(issue_slots: int, batch: int) -> bool:
    """Whether the cluster forward (v3: one cluster of 8 blocks per direction, a cluster barrier and
    DSMEM per step) beats the grid kernel, by the cluster block's issue slots per step
    (capacity.cluster_issue_slots) and the batch. H100, whole forward, alternated
    (results/persistent_v27/3_, 5_; 28 one-layer cells, H 64-448, B 1-32), cluster/grid:
    - B <= 2: 0.43-0.92 up to 932 slots (H=320 B=2, H=384 B=1); 1.13-1.20 from 1334 (H=448 B=1,
      H=384 B=2);
    - B > 2: 0.62-0.91 up to 560 slots (H=128 B=8, H=64 B=32); 1.11-1.89 from 620 on (H=96 B=16,
      H=200 B=4, H=128 B=12, H=160 B=8, H=100 B=16, H=256 B=4 1.16, H=256 B=8 2.11).
    The grid kernel's step is ~1.7-2.0 us from B=2 on (v5-v26); the cluster's grows with its issue
    slots, and past B=2 also with the units x batch that each block activates and pushes to all 8.
    Two directions and 2-3 layers measured alike (H=256 B=1 0.61, B=2 0.81, B=4 1.28)."""
    return issue_slots <= (CLUSTER_MAX_ISSUE_SLOTS if batch <= 2 else CLUSTER_MAX_ISSUE_SLOTS_BATCHED)


def tagged_exchange_pays(batch: int, k_tiles: int) -> bool:
    """Whether the tagged exchange (v5) beats grid.sync() for a plan. Polling reloads a warp's whole
    slice of the step's vector (B x 16 * k_tiles words, i.e. B * k_tiles / 8 uint4 loads per lane)
    until all of it carries the tag, so it pays while that slice is small. H100, kernel alone,
    tagged vs grid.sync: 1 to 4 loads per lane 1.05-1.50x faster (fwd H=1024 B=1/2/4, H=2048 B=4,
    H=256 B=8), 8 loads 0.84x and 0.55x (fwd H=1024 B=8, B=16); fwd+bwd likewise
    (results/persistent_v5_bench_h100.md)."""
    return batch * k_tiles <= 8 * TAGGED_MAX_LOADS_PER_LANE


def v4_warps_kept(plan) -> bool:
    """Whether the tensor-core plan choice keeps the v4 register model's (warps, units) pick ``plan`` (v19) instead of
    ranking the candidates anew (mma_step_clocks with the v19 register tiles). v38: not for 16-bit forwards at B <= 8
    whose pick streams k-tiles from shared memory or runs two directions in one grid. On the H100 that is the 16-warp
    picks at H=1728-2048, B <= 4 (the ranking: 8 warps, 9 of 14-16 k-tiles in registers instead of 3-4 of 7-8;
    grid.sync from B=3 by tagged_exchange_pays), the 4-warp picks at B=1, H=1088-1472 (8 warps, every k-tile or all
    but one in registers instead of 5 of 17-23), and two directions at H=704-1216 (4 or 16 warps -> 8; at H=1024 the
    8-warp plan also fits the input projection in the kernel). H100, pick vs ranked, us/step (results/persistent_v38):
    kernel alone (calls 6, 8): bf16 H=2048 B=4 3.34 vs 3.18, fp16 3.46 vs 3.27, B=3 3.37 vs 3.30, B=2 2.92 vs 2.80,
    B=1 2.58 vs 2.56; bf16 H=1792 B=4 3.69 vs 2.99; fp16 H=1792 B=2 3.17 vs 2.97; B=1: fp16 H=1088 2.54 vs 1.91,
    H=1216 2.88 vs 2.01, bf16 H=1344 2.69 vs 1.89, H=1472 2.77 vs 1.84. Whole bidirectional forward (call 13): bf16
    H=1024 B=4 2.58 vs 2.45, fp16 H=1024 B=8 3.23 vs 2.49, bf16 H=1216 B=1 2.94 vs 2.26, fp16 H=704 B=2 1.81 vs 1.71,
    bf16 H=1088 B=2 3.10 vs 2.49."""
    streams_tiles = plan.reg_k_tiles < plan.k_tiles
    return not (plan.pass_name == "forward" and plan.parts == 1 and plan.batch <= 8
                and (streams_tiles or plan.directions_per_launch == 2))


def grid_tagged_pays(reduction_length_padded: int, batch: int, warps: int) -> bool:
    """Whether the fp32 grid kernel's plan takes the tagged exchange (v6): the rule measured for the
    tensor-core kernels (tagged_exchange_pays), at most TAGGED_MAX_LOADS_PER_LANE 16-byte loads per
    lane for a warp's slice (its K columns x B words), and a vector of at least
    TAGGED_MIN_VECTOR_WORDS words. H100 kernel alone, tagged vs grid.sync: H=256 B=1 forward (256
    words, 8 L2 lines polled by 2048 warps) 2.51-2.62 vs 2.13-2.30 us/step; H=512 B=1 (512 words)
    1.77 vs 2.11 (results/persistent_v6_h100, results/persistent_v7_h100)."""
    slice_words = reduction_length_padded // warps * batch
    small_slice = -(-slice_words // 128) <= TAGGED_MAX_LOADS_PER_LANE
    return small_slice and reduction_length_padded * batch >= TAGGED_MIN_VECTOR_WORDS


def tagged_projection_pays(plan) -> bool:
    """Whether a 16-bit tensor-core forward that polls 5-8 uint4 per lane (past tagged_exchange_pays)
    takes the tagged exchange together with the in-kernel projection (v26): the block computes the
    next step's x W_ih^T between its publication and its polls, so the polls start when the data is
    about there. H100, kernel alone with the projection, tagged vs grid.sync without it (the GEMM
    comes on top of the latter; results/persistent_v26, 1_ and 2_ explorations, 3 alternated rounds):
    fp16 H=1024 B=8 1.91-2.17 vs 2.20-2.42, bf16 H=1024 B=8 1.93 vs 2.23, fp16 H=768 B=8 1.77 vs 2.22.
    Without the projection the same tagged plan is slower (fp16 H=1024 B=8 3.33; 2.83-3.03 with a
    400-800 ns first-poll delay), as is grid.sync with it (2.40-2.67); at B=16 (8 loads per lane
    with 16 warps) tagged loses with or without it (5.8; 3.5 at an 800 ns delay, vs 2.7). Whole forward,
    alternated with v25's plan (3_ab_alternate_v26): fp16 H=1024 B=8 1.88 vs 2.31 us/step, bf16 1.80 vs 2.27."""
    return (plan.kind == "mma" and plan.parts == 1 and plan.pass_name == "forward"
            and INPUT_PROJECTION_MIN_BATCH < plan.batch <= TAGGED_PROJECTION_MAX_BATCH
            and not tagged_exchange_pays(plan.batch, plan.k_tiles)
            and plan.batch * plan.k_tiles <= 8 * TAGGED_PROJECTION_MAX_LOADS_PER_LANE)


def split_tagged_pays(pass_name: str, parts: int, batch: int, k_tiles: int, m_tiles: int, words: bool = True) -> bool:
    """Whether the paired fp32 split forward at B=4 takes the tagged exchange up to
    SPLIT_TAGGED_MAX_LOADS_PER_LANE polls per lane, its first poll delayed (split_poll_delay_ns).
    v26 (``words`` False: the hi and lo rows, 2B rows of words), in blocks of at most
    SPLIT_TAGGED_MAX_M_TILES m-tiles. H100, kernel alone (results/persistent_v26,
    1_ and 2_, 3 alternated rounds each): H=1024 B=4 (8 loads per lane, 8 units per block) 2.49-2.62
    us/step at 1200 ns (400-1600 ns: 2.36-2.64; none: 2.76) vs grid.sync 2.62-2.81; whole forward
    2.58 vs 2.88 (3_ab_alternate_v26). H=1536 B=4 (12 loads) 4.76-4.90 vs 3.83-4.02 at every delay.
    Bidirectional H=1024 B=4 (two directions in one grid: 16 units, 4 m-tiles, half the k-tiles in
    shared memory) 2 layers 10.22 vs 7.94 us/step (7_ab_v26_layers): a longer step, hence m_tiles.
    v28 (``words``: B rows of words, hi | lo), in blocks of at most SPLIT_WORDS_MAX_M_TILES m-tiles.
    Kernel alone with v28's gates (results/persistent_v28, 3 alternated rounds). H200 (3_, 4_): H=1024
    B=4 (4 loads per lane) 1.78 us/step at 300 ns, 1.82-1.83 at 400-500 (0-200 ns: 1.95-1.97,
    600-1200: 2.25-2.27) vs grid.sync 2.22-2.26, the v13 rows at 300 ns 2.29; H=1536 B=4 (6 loads, 12
    units) 3.19 at 400 ns (0: 3.73, 200: 3.60) vs grid.sync 3.39-3.48. H100 (9_): H=1024 B=4 1.84-1.85
    at 350-500 ns (150-300: 1.98-2.17) vs grid.sync 2.27; H=1536 2.97-3.08 at 350-500 (300: 3.17) vs
    3.32. B=8 (not paired) ties at best (H200: H=1024 2.83 at 400 ns vs 2.85, H=512 2.26 vs 2.28) and
    B=16 loses (5.16-6.44 vs 4.18)."""
    rows = batch if words else parts * batch
    return (pass_name == "forward" and parts == 2 and batch == SPLIT_TAGGED_BATCH
            and m_tiles <= (SPLIT_WORDS_MAX_M_TILES if words else SPLIT_TAGGED_MAX_M_TILES)
            and rows * k_tiles <= 8 * SPLIT_TAGGED_MAX_LOADS_PER_LANE)


def input_projection_pays(plan) -> bool:
    """Whether the in-kernel projection beats the GEMM before the kernel (H100, whole forward).
    Tensor-core plans (v12, results/persistent_v12): with the tagged exchange at B >=
    INPUT_PROJECTION_MIN_BATCH, yes (bf16 H=1024 B=4: 1.89-1.90 vs 2.18-2.23 us/step). At B=1 the GEMM
    is small and the kernel's share costs as much (fp16 H=1024: 1.57-1.68 vs 1.52-1.55). Under
    grid.sync it costs more than the GEMM saves: every block stages all of x_t from L2 and reads its
    W_ih tiles from shared memory each step (0.8 us at fp16 H=1024 B=8 when not overlapped), and the
    split barrier's window hides only part of it (fp16 B=8 2.65-2.83 vs 2.48-2.61, B=16 3.67-3.71
    vs 3.07-3.14).
    fp32 grid plans (v15, results/persistent_v15): the other way round. With the tagged exchange at
    B <= GRID_INPUT_PROJECTION_MAX_BATCH, yes (H=512 B=1: 1.60 vs 1.92, B=2: 1.80-1.81 vs 2.01-2.12);
    at B=4 the kernel grows by 0.4-0.5 us/step (1.70-1.85 vs 2.13-2.31), more than the GEMM costs
    (whole 2.20 vs 2.01; 0.2 of it the x loads, measured with the loads left out), and at B=8 by 0.9."""
    if plan.pass_name != "forward" or not plan.tagged:
        return False
    if plan.kind == "grid":
        return plan.batch <= GRID_INPUT_PROJECTION_MAX_BATCH
    return plan.batch >= INPUT_PROJECTION_MIN_BATCH


def split_projection_pays(plan) -> bool:
    """Whether the fp32 split forward computes x W_ih^T itself (v29) instead of the fp16-split GEMM
    before it: never measured faster. H100, fp32 H=1024 B=4 (tagged, 8 units per block;
    results/persistent_v29), whole forward in the kernel vs the GEMM, alternated:
    - W_ih's hi and lo tiles in shared memory, x_t's hi and lo rows: 2.83 vs 2.10 us/step (kernel
      alone 2.81 vs 1.82; 2.53 at no first-poll delay);
    - the hi tiles only (x_hi W_lo^T as a K=H GEMM before the kernel): 2.63-2.78 vs 2.11-2.14 (kernel
      2.57 at its best delay, 100 ns, vs 1.84 without the projection).
    Where the time goes (6_, parts compiled out, kernel alone 2.87 vs v28's 1.80): staging x_t's 2B rows
    from L2 (every block all of them: 2 MB per step over the grid, v12's fp16 B=8 load) ~0.75 us, the
    input mma ~0.35, the combine ~0.2; without the staging still 2.11. The GEMM it replaces costs
    ~0.25 us per step."""
    return False


def poll_delay_pays(plan) -> bool:
    """Whether a forward's warps sleep POLL_DELAY_NS before their first poll of the tagged exchange
    (v16). Polling re-reads the step's few L2 lines until every word carries the tag; from the block's
    publication to the slowest block's there is time in which those polls only load L2 and delay
    the stores they wait for. H100, kernel alone (results/persistent_v15, 3_, 7_, 8_ explorations):
    fp32 grid H=512 B=1 1.83-1.90 -> 1.53-1.60 us/step at 250 ns (with v15's projection 1.60-1.65 ->
    1.47-1.53), H=768 B=2 1.92-1.96 -> 1.79-1.81, H=1024 B=1/B=2 within noise; fp16 tensor cores
    H=1024 B=1 1.41 -> 1.19-1.26 (150-600 ns), B=2 1.72 -> 1.59 (150-300 ns; 600 ns slower). Whole
    forward at 250 ns (results/persistent_v16, three runs): fp16 H=1024 B=1 -0.12, B=2 -0.21, bf16
    B=1 -0.14, fp32 H=768 B=2 -0.18, H=512 B=1 -0.08, H=1024 B=1 -0.07, H=512 B=2 0.00 us/step;
    bf16 H=2048 B=2 +0.01 to +0.10 (a 3 us step: left out, POLL_DELAY_MAX_HIDDEN). Not at B=4 (fp32
    H=512 unchanged; bf16 H=1024 with v12's projection 1.73-1.83 -> 1.91-2.30), nor with the
    tensor-core projection, whose product already delays the polls. Forwards only (POLL_DELAY_PASSES):
    the backward's delay on top changed fwd+bwd by -0.064 to +0.042 ms, mostly slower (13_ explorations);
    the forward's alone by -0.02 to -0.06 ms against none."""
    return (plan.pass_name in POLL_DELAY_PASSES and plan.tagged and plan.batch <= POLL_DELAY_MAX_BATCH
            and plan.hidden <= POLL_DELAY_MAX_HIDDEN and not (plan.kind == "mma" and plan.in_kernel_projection))


def long_poll_delay_pays(plan) -> bool:
    """Whether a forward's warps sleep LONG_POLL_DELAY_NS before their first poll instead (v18): the
    tagged tensor-core forward at B = 4 and H >= 2048, without the in-kernel projection (bf16
    H=2048 B=4: v12's projection does not fit). H100, kernel alone (results/persistent_v15,
    8_explore_mma_poll_delay, two runs): 3.57-3.61 us/step -> 3.44-3.45 at 600 ns; 150 and 300 ns were
    slower (3.67-3.78). Whole forward: results/persistent_v17 (v18 rows)."""
    return (plan.kind == "mma" and plan.parts == 1 and plan.pass_name == "forward" and plan.tagged
            and plan.batch == 4 and plan.hidden >= LONG_POLL_DELAY_MIN_HIDDEN and not plan.in_kernel_projection)


def split_poll_delay_ns(plan) -> int:
    """The first-poll delay of a split forward that split_tagged_pays made tagged past v5's rule (by its
    hi and lo rows, H >= 1024 at B=4): SPLIT_POLL_DELAY_NS with the rows (v26), SPLIT_WORDS_POLL_DELAY_NS
    with split words (v28). 0 for every other plan."""
    if not (plan.kind == "mma" and plan.parts == 2 and plan.tagged and plan.paired
            and split_tagged_pays(plan.pass_name, plan.parts, plan.batch, plan.k_tiles, plan.m_tiles, plan.split_words)
            and not tagged_exchange_pays(plan.parts * plan.batch, plan.k_tiles)):
        return 0
    if plan.in_kernel_projection:   # v29: the next step's input product fills the wait instead
        return SPLIT_PROJECTION_POLL_DELAY_NS
    return SPLIT_WORDS_POLL_DELAY_NS if plan.split_words else SPLIT_POLL_DELAY_NS


SPLIT_POLL_SPIN_CYCLES = 800    # v35: ~400 ns at the H100's 1.98 GHz, as SPLIT_WORDS_POLL_DELAY_NS
SPLIT_SPIN_MIN_M_TILES = 3


def poll_spin_cycles(plan) -> int:
    """v35: the SM cycles of a clock64() spin that replaces __nanosleep(poll_delay_ns) before the first poll, or 0.
    The tagged split at B=4 with 3 m-tiles (H=1280, 1536; some of W_hh in shared memory), kernel alone µs/step,
    nanosleep(400) / spin 800, alternated (results/persistent_v35, calls 9 and 10, 8 and 10 rounds): H=1536 3.21 /
    3.00 and 3.19 / 3.01, H=1280 2.86 / 2.73; whole forward H=1536 3.46 / 3.34 and 3.50 / 3.39, H=1280 3.08 / 2.89.
    With 2 m-tiles (H=1024, all of W_hh in registers) the sleep was as fast or faster: kernel 1.84 / 1.90 and
    1.94 / 1.99, whole forward 2.05 / 2.05."""
    if getattr(plan, "cluster_k", 1) > 1:   # v42, the split on clusters: whole forward µs/step, spin 800 against
        return SPLIT_POLL_SPIN_CYCLES        # nanosleep(400), alternated (results/persistent_v42 call 10): H=1024 B=8
                                             # 2.78 vs 2.91, H=1280 B=8 3.36 vs 3.81 (spin 600: 2.91)
    if not split_poll_delay_ns(plan) or not plan.split_words or plan.in_kernel_projection:
        return 0
    return SPLIT_POLL_SPIN_CYCLES if plan.m_tiles >= SPLIT_SPIN_MIN_M_TILES else 0


SPLIT_POLL_BACKOFF_NS = 100    # v55: the repoll backoff of poll_backoff_ns
SPLIT_BACKOFF_M_TILES = 2


def poll_backoff_ns(plan) -> int:
    """v55: how long a lane of a tagged tensor-core forward sleeps after a poll that found its slice incomplete
    (POLL_BACKOFF_NS), or 0 (it polls again at once). The paired split at B=4 ungrouped, 2 m-tiles, whose first poll
    sleeps (H=1024: the engine's only such plan on the H100 and H200), whole forward µs/step, at once / 50 / 100 ns
    (results/persistent_v55 calls 10 and 11, 3 and 6 rounds alternated): 2.103 / 2.029 / 2.038 and 2.039 / 1.977 /
    1.973 (every round of 50 and 100 below every round of none in call 11). Not where measured slower or level: the
    split's 3-m-tile plans that spin first (H=1536 B=4 3.431 / 3.461 / 3.475), its batch groups (H=512 B=4 1.444 /
    1.468 / 1.492, H=768 B=4 1.963 / 2.014 / 2.017), on clusters (H=1024 B=8 2.668 / 2.671 / 2.666, 200 ns 2.691), the
    FFMA grid kernel (H=1024 B=2 1.703 / 1.698 / 1.686), the 16-bit forwards (bf16 H=1024 B=4 1.578 / 1.625 / 1.646,
    fp16 B=8 1.865 / 1.871 / 1.874, B=16 2.334 / 2.343 / 2.343)."""
    if not (plan.kind == "mma" and plan.pass_name == "forward" and plan.parts == 2 and plan.tagged
            and plan.batch == SPLIT_TAGGED_BATCH and plan.batch_groups == 1 and getattr(plan, "cluster_k", 1) == 1
            and plan.m_tiles == SPLIT_BACKOFF_M_TILES and plan.poll_delay_ns and not plan.poll_spin_cycles):
        return 0
    return SPLIT_POLL_BACKOFF_NS


# v42: the fp32 split forward on thread-block clusters, each block 1/CLUSTER_SPLIT_SIZE of K (capacity.with_cluster_k)
CLUSTER_SPLIT_BATCHES = range(5, 16)   # v42: B=8 wins at H=1024 and 1280, B=16 and H=512 B=8 lose; v43: B=5-15
CLUSTER_SPLIT_MIN_HIDDEN = 768         # win from H=768 (where the split is not in batch groups: H=768 B=8 is)
CLUSTER_GROUP_BATCH = 8                # v44: the split in batch groups of this many columns (unpaired) ...
CLUSTER_GROUP_MIN_HIDDEN = 512         # ... runs on clusters from here
CLUSTER_SPLIT_SIZE = 2              # clusters of 4 co-reside only 30 at a time on the H100 and H200 (120 blocks)
CLUSTER_SPLIT_WARPS = 8
CLUSTER_POLL_DELAY_NS = 400         # clustered plans' first poll (300-500 ns measured within 1%; none: +0.3 us/step),
                                    # waited by a spin of SPLIT_POLL_SPIN_CYCLES (poll_spin_cycles)


def cluster_split_pays(plan) -> bool:
    """v42: whether the fp32 split forward ``plan`` (ungrouped, unpaired, the projection as a GEMM) runs on clusters of
    CLUSTER_SPLIT_SIZE blocks of CLUSTER_SPLIT_WARPS warps, tagged, the first poll after CLUSTER_POLL_DELAY_NS (a spin:
    poll_spin_cycles). H200,
    whole forward µs/step, clusters against the grid.sync plan, alternated (results/persistent_v42, calls 3 and 4):
    H=1024 B=8 2.78 vs 3.28 and 2.90 vs 3.40, H=1280 B=8 3.79 vs 4.48; the ungrouped H=1024 B=16 4.36 vs the grouped
    4.19, H=512 B=8 1.99 vs the grouped 1.67, and without the delay H=1024 B=8 3.02-3.07. Each block stages half
    of h (the tagged exchange's polls halve) and its partials reach their units' owner through distributed shared
    memory and one cluster barrier a step. v43 (calls 3-4, against "auto" before v43): H=1024 B=9 3.47 vs 4.16, B=10
    3.50 vs 4.26, B=12 3.61 vs 4.39, B=14 3.98 vs 4.72, B=15 4.49 vs 4.82; H=768 B=12 3.07 vs 4.60; H=1280 B=12 5.28
    vs 5.87; and B=5-7 (fp32_split_pays). Not: H=768 B=8, whose split in 2 groups of 4 stays (2.21 vs 2.49).
    v44, the split in batch groups of CLUSTER_GROUP_BATCH columns from CLUSTER_GROUP_MIN_HIDDEN, each group on clusters
    (results/persistent_v44, calls 1-3, against the unclustered groups): H=1024 B=16 (2 groups of 8) 3.94-3.99 vs
    4.21-4.23, H=896 B=16 3.79 vs 4.20, H=768 B=16 2.95 vs 3.65, H=512 B=32 (4 of 8) 3.24 vs 3.45. Not: paired groups
    of 4 (H=384, 512, 640 B=16: 2.38 vs 2.03, 2.63 vs 2.04, 3.50 vs 3.24), groups of 12 (H=768 B=24: 4.82 vs 4.85,
    a tie), groups of 16 (H=768 B=32: does not build)."""
    if not (plan.kind == "mma" and plan.pass_name == "forward" and plan.parts == 2 and not plan.paired
            and not plan.in_kernel_projection and plan.cluster_k == 1):
        return False
    if plan.batch_groups > 1:
        return plan.batch == CLUSTER_GROUP_BATCH and plan.hidden >= CLUSTER_GROUP_MIN_HIDDEN
    return plan.batch in CLUSTER_SPLIT_BATCHES and plan.hidden >= CLUSTER_SPLIT_MIN_HIDDEN


INPUT_PART_BATCH = 4           # v51: the inference forwards whose in-kernel projection keeps half its k-tiles ...
INPUT_PART_MIN_HIDDEN = 768    # ... from this hidden size (input_part_k_tiles)


def input_part_k_tiles(plan) -> int:
    """v51: the k-tiles per warp a 16-bit inference forward's in-kernel projection keeps when a GEMM before the kernel
    takes the rest of the inputs (capacity.with_input_part), or 0: all of them in the kernel. The kernel's loop gets
    shorter (fewer W_ih tiles read from shared memory per step: v51's diagnostic, fp16 H=1024 B=16's step 2273 ->
    1887 ns with half of them), the GEMM's share comes on top. H200, whole forward µs/step all in the kernel vs half,
    alternated (results/persistent_v51 calls 8, 9): half wins at B=4 from H=768 (fp16 H=768 1.649 vs 1.502, fp16
    H=1024 1.728 vs 1.700, bf16 H=1024 1.714 vs 1.694 and 1.769 vs 1.670); it loses below (bf16 H=512 B=4 1.241 vs
    1.300, H=256 1.006 vs 1.114), at B=5-6 (fp16 H=1024 1.78 vs 1.85-1.86), at B=8 (fp16 H=512 1.267 vs 1.346,
    H=1024 1.866 vs 2.110) and in batch groups (fp16 H=1024 B=16 2.503 vs 2.610): there the GEMM's share costs more
    than the loop saves. Training forwards were not measured (persistent._with_input_part leaves them whole)."""
    if plan.batch == INPUT_PART_BATCH and plan.batch_groups == 1 and plan.hidden >= INPUT_PART_MIN_HIDDEN:
        return plan.input_k_tiles // 2
    return 0


INPUT_REG_RULE_K_TILES = 2          # v52: W_ih k-tiles per warp in registers where input_reg_k_tiles applies (not
                                     # persistent.INPUT_REG_K_TILES, the flag that asks this rule) ...
INPUT_REG_GROUPED_MIN_HIDDEN = 768   # ... in batch groups from this hidden size
INPUT_REG_UNGROUPED_MIN_HIDDEN = 1024   # ... ungrouped at B=4 (and B=8 in training) from this one


def input_reg_k_tiles(plan, training: bool = False) -> int:
    """v52: how many of each warp's W_ih k-tiles a 16-bit forward with the in-kernel projection keeps in
    registers (capacity.with_input_reg_tiles; a build that spills gives them back, persistent._fewer_register_tiles),
    or 0. Fewer W_ih tiles read from shared memory per step shortens the block's loop where those reads sat on it, and
    where the product after the publish is short already, a shorter one brings the polls too early (v37, v51).
    H200, whole forward µs/step, none vs 2 (results/persistent_v52 calls 1-2, alternated): in batch groups fp16
    H=1024 B=16 2.398 / 2.298 and 2.462 / 2.360, bf16 B=16 2.441 / 2.329, fp16 B=12 2.554 / 2.447, fp16 H=768 B=16
    1.879 / 1.820; at B=4 (with v51's split) bf16 H=1024 1.726 / 1.580 and 1.769 / 1.627, fp16 H=1024 1.713 / 1.618.
    Not taken: fp16 H=768 and H=896 at B=4 (1.504 / 1.607, 1.829 / 1.869), bf16 H=512 B=4 (1.233 / 1.424), fp16 H=1024
    B=8 (1.879 / 1.832, 1.904 / 1.902: within the rounds' spread), B=2 (no change). Training (fwd+bwd ms, call 6,
    4 rounds, every round lower): fp16 H=1024 B=16 1.682 / 1.662, bf16 B=16 1.668 / 1.649, fp16 B=12 1.606 / 1.583,
    bf16 B=4 1.231 / 1.196, fp16 B=4 1.234 / 1.202, fp16 B=8 1.447 / 1.432: there B=8 from H=1024 too (a training
    forward at B=4 keeps its whole projection in the kernel: v51's split is inference only)."""
    if plan.parts != 1 or not plan.in_kernel_projection:
        return 0
    grouped = plan.batch_groups > 1 and plan.hidden >= INPUT_REG_GROUPED_MIN_HIDDEN
    ungrouped_batches = (4, 8) if training else (4,)
    ungrouped = (plan.batch_groups == 1 and plan.batch in ungrouped_batches
                 and plan.hidden >= INPUT_REG_UNGROUPED_MIN_HIDDEN)
    return min(INPUT_REG_RULE_K_TILES, plan.input_k_tiles) if grouped or ungrouped else 0


def poll_delay_ns(plan) -> int:
    """The forward's first-poll delay: CLUSTER_POLL_DELAY_NS (v42), POLL_DELAY_NS (v16), split_poll_delay_ns (v26,
    v28), LONG_POLL_DELAY_NS (v18) or none."""
    if getattr(plan, "cluster_k", 1) > 1:
        return CLUSTER_POLL_DELAY_NS
    if poll_delay_pays(plan):
        return POLL_DELAY_NS
    return split_poll_delay_ns(plan) or (LONG_POLL_DELAY_NS if long_poll_delay_pays(plan) else 0)


def fp32_split_pays(plan) -> bool:
    """Whether the fp32 forward runs split on the tensor cores (v13) rather than on FFMA. H100, whole
    forward µs/step split vs FFMA (results/persistent_v13, persistent_v14): B >= 8 wins (H=1024 B=8
    4.07 vs 5.12, B=16 5.94 vs 10.69; H=512 B=8 2.63 vs 2.71, B=16 3.91 vs 4.36). At B=4 the paired
    split (2 mma per tile) wins from H=1024 on (3.08 vs 3.16, kernel 2.51 vs 2.61; H=1536 4.80 vs
    5.42) and loses at H=512 (2.45 vs 1.94). B=1, 2 lose (H=1024 2.36 / 2.67 vs 2.16 / 2.19, H=512
    1.91 / 2.08 vs 1.99 / 2.02, H=1536 B=2 3.93 vs 3.65): the mma.sync issue and the grid barrier
    bound the step where FFMA's work, growing with B, is still small.
    Below H=512 (v27, results/persistent_v27/8_, whole forward split vs FFMA, alternated): B=32 wins
    at H=128-384 (0.48-0.82x: H=384 5.33 vs 11.02, H=256 4.65 vs 7.10), B=16 from H=320 (0.70-0.97x:
    H=320 3.29 vs 4.67, H=384 3.37 vs 4.76, H=448 3.50 vs 3.59); B=16 at H=192-256 ties, at H=128
    loses (5.74 vs 2.27); B=8 ties or loses (H=256 2.86 vs 1.79, H=448 2.51 vs 2.39).
    v43 (H200, whole forward µs/step alternated, results/persistent_v43 calls 3-4): B=5-7 had run FFMA; the split
    (clustered by cluster_split_pays where a block's units are even) wins from H=768: H=1024 B=5 2.63 vs 3.71, B=6 2.67
    vs 3.53 (unclustered 3.31), B=7 3.05 vs 4.90; H=1280 B=6 3.61 vs 4.94; H=768 B=5 2.51 vs 2.56, B=6 2.49 vs 2.96,
    B=7 2.60 vs 3.41; H=896 B=6 (7 units: unclustered) 3.31 vs 3.85; H=1536 B=6 4.95 where FFMA does not fit; H=640
    B=6 ties (2.97 vs 2.92)."""
    if plan.hidden < FP32_SPLIT_MIN_HIDDEN:
        return plan.batch >= FP32_SPLIT_SMALL_MIN_BATCH or (
            plan.batch >= 16 and plan.hidden >= FP32_SPLIT_SMALL_B16_MIN_HIDDEN)
    return (plan.batch >= FP32_SPLIT_MIN_BATCH
            or (plan.paired and plan.batch == 4 and plan.hidden >= FP32_PAIRED_MIN_HIDDEN)
            or (plan.batch in FP32_SPLIT_MID_BATCHES and plan.hidden >= FP32_SPLIT_MID_MIN_HIDDEN))


# v45: batches at which the fp32 grid backward (in v41's batch groups there) beats the rows backward where both fit
ROWS_BACKWARD_GRID_BATCHES = (6, 8)


def rows_backward_pays(hidden: int, batch: int) -> bool:
    """Whether the rows backward (v7) replaces a grid backward that fits. H100, fwd+bwd ms, rows vs
    grid backward (results/persistent_v7_h100/2_coalesced_reduce): H=1024 B=4 2.52 vs 2.76, B=8 4.21
    vs 4.51; H=512 B=4 1.54 vs 1.48, H=256 B=1 1.52 vs 1.14. Elsewhere it runs only where the grid
    backward does not fit (H=1024 B=16). v45 (H200, H=1024, alternated in one process, the rows kernel's padded batch
    stride; results/persistent_v45 call 4): rows vs grid B=4 1.84 vs 1.87, B=5 2.62 vs 2.66, B=7 3.03 vs 3.19, B=9-12
    3.67-3.98 vs 4.05-4.92, B=16 4.92 vs 5.08; the grid in batch groups wins at B=6 (3 groups of 2: 2.40 vs 2.81) and
    B=8 (2 groups of 4: 2.99 vs 3.08, 2.97 vs 3.07 in call 2)."""
    return hidden >= 1024 and batch >= 4 and batch not in ROWS_BACKWARD_GRID_BATCHES


def batch_groups_pay(grouped) -> bool:
    """Whether a 16-bit pass runs its batch as groups on blocks of their own (v30,
    capacity.grouped_plan: B/2 columns per group, each group on half the SMs with twice the units per
    block) instead of the ungrouped plan: wherever it fits. H100, grouped vs v29's plans alternated in
    one process (results/persistent_v30): whole forward µs/step fp16 H=1024 B=16 2.42 vs 2.82, bf16
    2.45 vs 2.81, H=256 B=16 1.18 vs 1.94, H=512 B=16 1.35 vs 2.22, bf16 H=768 B=16 1.92 vs 3.12, H=1024
    B=24 3.28 vs 3.58, H=256 B=32 1.55 vs 2.96, H=512 B=32 2.55 vs 4.60, H=1024 B=32 3.36 vs 4.22, bf16
    H=512 B=64 3.15 vs 5.57; fwd+bwd ms fp16 H=1024 B=16 1.96 vs 2.47, H=256 B=16 0.96 vs 1.33, H=512
    B=16 1.47 vs 1.66, H=1024 B=24 2.72 vs 3.14, H=256 B=32 1.34 vs 1.94, H=512 B=32 1.84 vs 3.14. The
    ungrouped forward's 16-warp blocks at B >= 16 hold half-empty accumulator tiles in the backward
    (8 units: 8 of an m-tile's 16 rows) and stage the whole batch's vector; a group stages half of it."""
    return grouped.kind == "mma" and grouped.batch_groups > 1


def grid_backward_group_counts(batch: int) -> list:
    """v41: the batch-group counts "auto" tries for the fp32 grid backward, most groups first
    (capacity.grid_backward_plan takes the first that fits): groups of GRID_BACKWARD_GROUP_COLUMNS columns, then
    twice as wide, ... (2 to MAX_BATCH_GROUPS groups). More groups stage less of dz per block and hold more units'
    weights; the most that fit measured fastest, shared-memory weights and all (H200 fwd+bwd ms, results/
    persistent_v41 call 1: H=512 B=16 in 8 groups of 2 with 30 of 64 columns in registers 1.82, 4 of 4 1.88, 2 of 8
    2.37, none 4.21; H=512 B=32 in 8 of 4 3.00, 4 of 8 3.33, rows 5.04; H=256 B=8 in 4 of 2 0.85, 2 of 4 0.93, none
    1.07; H=768 B=32 in 4 of 8 5.65, rows 7.60)."""
    return list(_doubling_group_counts(batch, GRID_BACKWARD_GROUP_COLUMNS))


GRID_BACKWARD_GROUP_COLUMNS = 2   # v41: the narrowest group "auto" tries for the fp32 grid backward


# v46: 16-bit passes whose two batch groups may be narrower than capacity.BATCH_GROUP_MIN (by pass: the batches)
NARROW_GROUP_BATCHES = {"forward": (8,), "backward": (4, 8)}
NARROW_GROUP_HIDDEN = (256, 512)   # ... at these hidden sizes (inclusive): the measured range


def narrow_groups_pay(pass_name: str, hidden: int, batch: int) -> bool:
    """v46: whether a 16-bit pass at B <= 8 runs two batch groups of B/2 columns (2 or 4). H200, two groups vs one,
    alternated in one process (results/persistent_v46 call 8; whole forward µs/step, fwd+bwd ms): fp16 H=256 B=8 1.08
    vs 1.29, 0.820 vs 0.907; H=512 B=8 1.33 vs 1.53, 0.945 vs 1.111; bf16 H=384 B=8 1.47 vs 1.86, 0.947 vs 1.145;
    bf16 H=256 B=4 1.16 vs 1.02 (the forward slower), 0.723 vs 0.792; H=512 B=4 1.27 vs 1.30, 0.828 vs 0.970. Not taken:
    fp16 H=1024 B=8 (2.44 vs 2.01 forward, 1.514 vs 1.505) and B=6 (H=256: 1.30 vs 1.27, 0.872 vs 0.876)."""
    low, high = NARROW_GROUP_HIDDEN
    return low <= hidden <= high and batch in NARROW_GROUP_BATCHES.get(pass_name, ())


MAX_BATCH_GROUPS = 16   # v39: the most groups measured (fp16 H=256 B=128)
GROUP_COLUMNS = 8       # v39: the columns of a group the "auto" choice starts from (one mma N tile)


def batch_group_counts(batch: int) -> tuple:
    """v39: the group counts a 16-bit pass of batch ``batch`` tries, in order, where groups are taken ("auto"): groups
    of GROUP_COLUMNS columns, then of twice as many, ... (at most MAX_BATCH_GROUPS groups), then v30's two. Where a
    count's plan does not fit, the next one is tried. H100, whole forward µs/step and fwd+bwd ms, the most groups vs
    v30's two, alternated (results/persistent_v39, call 4): fp16 H=256 B=32 (4 groups) 1.09 vs 1.57 and 0.94 vs 1.22,
    H=512 B=32 (4) 1.64 vs 2.40 and 1.32 vs 1.57, H=768 B=32 (4) 2.78 vs 3.10 and 2.03 vs 2.27, H=256 B=64 (8) 1.33
    vs 3.10 and 1.11 vs 2.16 (4 groups: 1.69, 1.32), bf16 H=512 B=64 (8) 2.43 vs 3.09 and 1.81 vs 2.34 (4: 2.93,
    1.86), fp16 H=256 B=128 (16) 1.98 and 1.53 (8: 2.38, 1.68; 4: 2.90, 1.96; two groups do not fit). A batch that
    is not a multiple of GROUP_COLUMNS keeps v30's two groups."""
    counts = _doubling_group_counts(batch, GROUP_COLUMNS)
    return counts + ((2,) if 2 not in counts else ())


def _doubling_group_counts(batch: int, columns: int) -> tuple:
    """The counts of groups of ``columns`` columns, then of twice as many, ... that divide ``batch`` into at least 2
    and at most MAX_BATCH_GROUPS groups."""
    counts = []
    while batch % columns == 0 and batch // columns >= 2:
        if batch // columns <= MAX_BATCH_GROUPS:
            counts.append(batch // columns)
        columns *= 2
    return tuple(counts)


def more_groups_pay(grouped) -> bool:
    """v39: whether "auto" takes the grouped plan ``grouped`` of a count batch_group_counts gives before v30's two
    groups: a backward wherever it fits, a forward where more than half of its k-tiles stay in registers. H100
    (results/persistent_v39, call 5), whole forward µs/step: fp16 H=1024 B=32 in 4 groups (4 of 8 k-tiles in
    registers) 3.63 vs 3.38 in two, B=24 in 3 groups (5 of 8) 3.07 vs 3.29, H=768 B=32 in 4 (5 of 6) 2.78 vs 3.10
    (call 4); every other measured count kept all its k-tiles in registers and won."""
    return grouped.pass_name != "forward" or 2 * grouped.reg_k_tiles > grouped.k_tiles


SPLIT_GROUP_COLUMNS = 4        # v40: the fp32 split's groups start from 4 columns (paired: hi and lo fill N = 8)
SPLIT_GROUPS_MIN_HIDDEN = 96    # v40: grouped from here (H=96 B=32 1.38 vs 3.17-3.27; H=64 B=16 tied FFMA)


def split_group_counts(batch: int) -> tuple:
    """v40: the group counts an fp32 split forward of batch ``batch`` tries under "auto", in order: groups of
    SPLIT_GROUP_COLUMNS columns, then of twice as many, ... (at most MAX_BATCH_GROUPS groups), then two groups of at
    least GROUP_COLUMNS columns; v41: first, for an even batch of 4 to SPLIT_PAIRS_MAX_BATCH, groups of 2 columns."""
    counts = _doubling_group_counts(batch, SPLIT_GROUP_COLUMNS)
    pairs = (batch // 2,) if batch % 2 == 0 and 4 <= batch <= SPLIT_PAIRS_MAX_BATCH else ()
    return pairs + counts + ((2,) if batch % 2 == 0 and batch // 2 >= GROUP_COLUMNS and 2 not in counts else ())


# v41 (H200, whole forward µs/step alternated, results/persistent_v41 call 7): the split in groups of 2 columns
# (paired: each group's hi and lo rows fill half of the mma's N) where all its k-tiles stay in registers, against
# v40's picks: H=512 B=4 1.41 vs 1.55 (FFMA), H=384 B=4 1.44 vs 1.63, H=256 B=4 1.47 vs 1.54, H=768 B=4 1.98 vs
# 2.04, H=512 B=8 in 4 groups 1.69 vs 2 of 4 1.78; where half its k-tiles stream (H=1024 B=4) 2.64 vs 2.06.
SPLIT_PAIRS_MAX_BATCH = 8       # measured at B=4 and B=8
SPLIT_PAIRS_MIN_HIDDEN = 256    # measured from H=256


def split_groups_pay(grouped) -> bool:
    """v40: whether "auto" runs the fp32 split forward ``grouped`` (its batch in groups on blocks of their own) instead
    of the ungrouped split or FFMA: from H=SPLIT_GROUPS_MIN_HIDDEN, where more than half of its k-tiles stay in
    registers, or as two groups of at least GROUP_COLUMNS columns. H200, whole forward µs/step, alternated
    (results/persistent_v40, calls 1-2; "auto" before v40 first): H=256 B=16 2.63 (FFMA) / 4 groups of 4 1.31 / 2 of 8
    1.81; B=32 4.73 / 4 of 8 1.66 / 8 of 4 1.71; B=64 5.48 / 8 of 8 2.37 / 16 of 4 (1 of 2 k-tiles in registers) 2.46;
    H=384 B=16 3.24 / 4 of 4 1.99; B=24 4.02 / 6 of 4 2.24; B=32 5.04 / 8 of 4 2.48 / 4 of 8 3.12; H=512 B=8 2.37 / 2
    of 4 1.76; B=16 3.52 / 4 of 4 2.09; B=32 5.56 / 4 of 8 3.20; B=64 7.64 / 4 of 16 4.26; H=768 B=16 4.90 / 2 of 8
    3.59; B=32 7.32 / 2 of 16 5.02; H=1024 B=16 4.83 / 2 of 8 (4 of 8 k-tiles in registers) 4.16; H=128 B=64 4.99 /
    16 of 4 1.54; B=128 15.29 (FFMA) / 16 of 8 1.94 / 32 of 4 2.24; H=256 B=8 1.61 (FFMA) / 2 of 4 1.54. The one
    loss: H=1024 B=8 in 2 groups of 4 (4 of 8 k-tiles in registers) 3.37 vs 3.28 ungrouped. The rule against no groups
    (call 3, "auto" / ungrouped): H=768 B=8 2.18 / 3.46, H=128 B=32 1.42 / 3.64, H=512 B=12 1.99 / 3.34, H=384 B=20
    2.15 / 3.90, H=256 B=40 1.98 / 5.22, H=512 B=18 (2 of 9) 2.94 / 4.24; forced below H=128: H=96 B=32 in 8 of 4
    1.38 / 3.17, H=64 B=16 in 4 of 4 1.44 / 1.43 (FFMA). v41: groups of 2 columns (SPLIT_PAIRS_MIN_HIDDEN)."""
    if grouped.hidden < SPLIT_GROUPS_MIN_HIDDEN:
        return False
    if grouped.batch == 2:   # v41: groups of 2 columns from H=256 with every k-tile in registers
        return grouped.hidden >= SPLIT_PAIRS_MIN_HIDDEN and grouped.reg_k_tiles == grouped.k_tiles
    return 2 * grouped.reg_k_tiles > grouped.k_tiles or (grouped.batch_groups == 2 and grouped.batch >= GROUP_COLUMNS)


# v31 (H100, fwd+bwd, explore_bwd_v31 calls 5-7): the grid.sync backward's next-step loads issued after the
# barrier, not before it (the barrier's fence waited for them in flight), paid -0.02 to -0.12 ms per training
# call where each warp's product per step is 16 or more mma (fp16 H=1024 B=8 and 16, bf16 H=1024 B=4, H=1536 B=8,
# bf16 H=512 B=32): the loads complete behind it. With 8 mma (H=512 B=16, H=256 B=32, bf16 H=256 B=8) they
# were 0.03-0.05 ms slower: the product is too short to hide them.
LATE_LOADS_MIN_MMA = 16


# v32 (H100, fp32 fwd+bwd, explore_bwd_v32 calls 3-4): the fp32 grid backward under grid.sync gained with the
# late loads in 7 of 7 cells, -0.02 to -0.08 ms per training call (H=512 B=8 2.12 vs 2.18-2.20, H=768 B=8 2.73
# vs 2.81); the rows backward lost (H=1024 B=4 1.92 vs 1.89, B=8 3.33 vs 3.29): right after its barrier it
# reduces the partials from L2, no product to hide the loads behind.
FP32_LATE_LOAD_KINDS = ("grid",)


def late_loads_pay(plan) -> bool:
    """A tensor-core backward under grid.sync whose warps run >= LATE_LOADS_MIN_MMA mma per step; an fp32
    backward under grid.sync of a kind in FP32_LATE_LOAD_KINDS."""
    if plan.pass_name != "backward" or plan.tagged:
        return False
    if plan.kind != "mma":
        return plan.kind in FP32_LATE_LOAD_KINDS
    return plan.k_tiles * plan.n_tiles * plan.mma_per_tile >= LATE_LOADS_MIN_MMA


# v33: the fp32 grid forward takes xw as the fp16-split GEMM leaves it (scaled) and unscales each value where it
# loads it, from this batch on. H100, whole forward, alternated with the unscale pass in one process
# (results/persistent_v33, calls 1, 6, 7, 10): B=4-8 gained 0.02-0.10 us/step (H=512 B=4 -0.02 to -0.15, H=768
# B=4 -0.04 to -0.10 but +0.05 once, H=256 B=8 -0.02 to -0.04); B=2 tied (H=1024 -0.02 to +0.00, H=1536 +/-0.02);
# B=1 lost in 3 of 4 calls (H=1024 +0.03 to +0.12): its xw is 4 MB, the pass ~0.015 us/step, less than the
# exponent loads and ldexpf on the step's serial pointwise.
GRID_XW_UNSCALE_MIN_BATCH = 4


def grid_xw_unscale_pays(plan) -> bool:
    """Whether the fp32 grid forward ``plan`` unscales the fp16-split GEMM's xw where it loads it (v33)."""
    return plan.kind == "grid" and plan.pass_name == "forward" and plan.batch >= GRID_XW_UNSCALE_MIN_BATCH


# v33: the fp32 split forward takes the scaled xw (v32) where its xw per step and direction, 4H x B values, is at
# least this many (H=1536 B=4, H=1024 B=8, H=512 B=16). The pass over xw costs in proportion to it, the unscale
# in the kernel a few instructions on the step's serial pointwise. H100, whole forward, both applied in the
# pointwise, alternated in one process (results/persistent_v33, calls 10 and 12): H=1024 B=8 -0.05 and -0.08
# us/step, H=1536 B=4 -0.04 and -0.02, H=1024 B=4 +0.01 and +0.09 (16K values: the pass is the faster there);
# v32's H=512 B=8 (16K) tied.
SPLIT_XW_UNSCALE_MIN_VALUES = 24576


def split_xw_unscale_pays(plan) -> bool:
    """Whether the fp32 split forward ``plan`` unscales the fp16-split GEMM's xw where it loads it (v32, v33)."""
    return plan.kind == "mma" and plan.parts == 2 and 4 * plan.hidden * plan.batch >= SPLIT_XW_UNSCALE_MIN_VALUES


# v47: batch padding (persistent.padded_config). The kernels' batch groups are equal, so an odd batch ran in one group
# where the next even one runs in two or more (16-bit B = 9-31, the fp32 split at H <= 768). Padded by at most this many
# zero columns. H200, padded vs unpadded alternated (results/persistent_v47, calls 2 and 5): whole forward faster or
# tied in all 20 cells (bf16 H=256 B=9 1.76 -> 1.25 us/step, fp32 H=512 B=11 3.21 -> 2.07), fwd+bwd in all but three
# ties (fp32 H=1024 B=5 and 7, fp16 H=1536 B=11). Up to 3 columns the group count would also pad B=1 -> 4 (fp32 H <= 768)
# and fp16 H=1024 B=8 -> 10, where more groups are not faster: unmeasured, not taken.
MAX_BATCH_PADDING = 1


count_assignments(__name__)   # v60: assignments to these flags counted (flag_changes)
