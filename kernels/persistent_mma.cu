// Persistent LSTM recurrence on tensor cores (v4/v5, fp16/bf16 weights): one cooperative kernel runs
// every timestep of one layer (all its directions), like persistent_lstm.cu and with the same
// kernel arguments, but the block's slice of W_hh stays on chip as packed 16-bit mma A-fragments
// (the first REG_K_TILES k-tiles of each warp in registers, the rest in shared memory) and the
// per-step matrix-vector product runs as mma.sync.m16n8k16 with the batch as the N dimension
// (padded to 8), fp32 accumulation. Cell state, gates and everything stored to global stay fp32.
//
// PASS=0 forward:  z[rows x B] = W_hh[own gate rows] . h_{t-1} + xw_t, pointwise, write h_t.
// PASS=1 backward: dh_{t-1}[U x B] = W_hh[:, own units]^T . dz_t; the pointwise step of the own
//                  units makes dz_t (published to global) from dh, dc and the saved gates.
//
// Block = whole hidden units (forward rows: the 4 gate-interleaved rows of each unit, backward
// rows: one row of W_hh^T per unit, K = 4H), rows padded to M_TILES * 16. Warp w owns the
// K-slice [w * 16 * K_TILES, (w + 1) * 16 * K_TILES). Each warp stages its slice of the step's
// vector from L2 (other blocks wrote it during this kernel) into its own shared-memory region as
// 16-bit pairs [n][k] (only a __syncwarp before its mma), then loads its B-fragments from there.
// Warp partials go to shared memory, one __syncthreads, and every pointwise thread (unit, batch)
// sums them over the warps in a fixed order (bitwise reproducible).
//
// Packed tiles (layouts/persistent.py: pack_mma_fragments): uint4 [D][blocks][NWARPS][K_TILES]
// [M_TILES][32]; lane l's uint4 holds its a0..a3 of that 16 x 16 tile (fragment map in
// mma_common.cuh), so a warp's tile load is 512 contiguous bytes (coalesced from global,
// conflict-free LDS.128 from shared memory).
//
// v5 (TAGGED=1, the default plans): no grid barrier. The step's vector (h_t forward, dz_t backward)
// also goes to an exchange buffer xch [D][2][B][ld] of 32-bit words, each one 16-bit value (the
// low half: exactly the bits the mma consumes) and a 16-bit step tag (the high half). A consumer
// polls its K-slice with relaxed gpu-scope loads until every word carries the step's tag, so the
// data is its own flag: one L2 round trip instead of barrier arrive + barrier poll + data load.
// Two slots (step parity) suffice: a block can only write slot s again after every block has
// published the step after, i.e. after every block finished reading slot s. The host zeroes xch
// before each launch; tags run 1, 2, ... so a stale word never carries the awaited tag. The
// cooperative launch stays: it guarantees the co-residency the polling relies on. TAGGED=0
// keeps v4's grid.sync(), with the vector exchanged as packed 16-bit values (half of v4's fp32
// bytes; v5.1; the forward publishes h0 packed too, then one grid.sync before the loop). Polling
// re-reads the vector until it
// is complete, so the tagged exchange only pays for small vectors
// (persistent_capacity.tagged_exchange_pays, measured).
//
// ecornn-persistent
// The check lines are the capacity model's H100 plans (v5, exchange per tagged_exchange_pays; v12,
// the in-kernel projection of a layer with input = hidden where input_projection_pays): fwd bf16
// H=1024 B=4, fp16 H=1024 B=8 and B=16, bf16 H=2048 B=4, bf16 H=100 B=3; bwd fp16 H=1024 B=8 and
// B=16, bf16 H=2048 B=4; then the other exchange of four of them (forced: tests, ablation; the
// tagged fp16 B=16 forward with the projection would spill 168 bytes at 128 registers, and the
// engine's back-off builds it without); then three forwards with IN_KERNEL_PROJECTION forced; then
// v13's fp32 split forwards (H=512 B=4, H=1024 B=4 / B=8 / B=1, H=1536 B=4; and the other exchange
// of H=1024 B=4); then v14's paired split at B=2 and the 3-mma ablation (PAIRED_SPLIT=0) of H=1024 B=4;
// then v16's first-poll delay: fp16 H=1024 B=1 and B=2 (v18: the bf16 H=2048 B=4 line has the long delay).
// v19: the lines below carry the refitted register model's k-tiles (the backward tagged/forced lines keep
// v4's 9 and 31: a shared-memory tile loop stays compiled too).
// ecornn-check: -DPASS=0 -DBF16=1 -DBATCH=4 -DNWARPS=8 -DM_TILES=2 -DK_TILES=8 -DREG_K_TILES=8 -DTAGGED=1 -DIN_K_TILES=8
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=8 -DNWARPS=8 -DM_TILES=2 -DK_TILES=8 -DREG_K_TILES=8 -DTAGGED=0
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=16 -DNWARPS=16 -DM_TILES=2 -DK_TILES=4 -DREG_K_TILES=4 -DTAGGED=0
// ecornn-check: -DPASS=0 -DBF16=1 -DBATCH=4 -DNWARPS=16 -DM_TILES=4 -DK_TILES=8 -DREG_K_TILES=4 -DTAGGED=1 -DPOLL_DELAY_NS=600
// ecornn-check: -DPASS=0 -DBF16=1 -DBATCH=3 -DNWARPS=4 -DM_TILES=1 -DK_TILES=2 -DREG_K_TILES=2 -DTAGGED=1
// ecornn-check: -DPASS=1 -DBF16=0 -DBATCH=8 -DNWARPS=16 -DM_TILES=1 -DK_TILES=16 -DREG_K_TILES=16 -DTAGGED=0
// ecornn-check: -DPASS=1 -DBF16=0 -DBATCH=16 -DNWARPS=16 -DM_TILES=1 -DK_TILES=16 -DREG_K_TILES=9 -DTAGGED=0
// ecornn-check: -DPASS=1 -DBF16=1 -DBATCH=4 -DNWARPS=8 -DM_TILES=1 -DK_TILES=64 -DREG_K_TILES=46 -DTAGGED=0
// ecornn-check: -DPASS=0 -DBF16=1 -DBATCH=4 -DNWARPS=8 -DM_TILES=2 -DK_TILES=8 -DREG_K_TILES=8 -DTAGGED=0 -DIN_K_TILES=8
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=16 -DNWARPS=16 -DM_TILES=2 -DK_TILES=4 -DREG_K_TILES=4 -DTAGGED=1
// ecornn-check: -DPASS=1 -DBF16=0 -DBATCH=16 -DNWARPS=16 -DM_TILES=1 -DK_TILES=16 -DREG_K_TILES=9 -DTAGGED=1
// ecornn-check: -DPASS=1 -DBF16=1 -DBATCH=4 -DNWARPS=8 -DM_TILES=1 -DK_TILES=64 -DREG_K_TILES=31 -DTAGGED=1
// ecornn-check: -DPASS=0 -DBF16=1 -DBATCH=4 -DNWARPS=8 -DM_TILES=2 -DK_TILES=8 -DREG_K_TILES=8 -DTAGGED=1
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=8 -DNWARPS=8 -DM_TILES=2 -DK_TILES=8 -DREG_K_TILES=8 -DTAGGED=0 -DIN_K_TILES=8
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=16 -DNWARPS=16 -DM_TILES=2 -DK_TILES=4 -DREG_K_TILES=4 -DTAGGED=0 -DIN_K_TILES=4
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=4 -DNWARPS=8 -DM_TILES=1 -DK_TILES=4 -DREG_K_TILES=4 -DTAGGED=1 -DSPLIT=1
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=4 -DNWARPS=8 -DM_TILES=2 -DK_TILES=8 -DREG_K_TILES=8 -DTAGGED=0 -DSPLIT=1
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=8 -DNWARPS=16 -DM_TILES=2 -DK_TILES=4 -DREG_K_TILES=4 -DTAGGED=0 -DSPLIT=1
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=1 -DNWARPS=8 -DM_TILES=2 -DK_TILES=8 -DREG_K_TILES=8 -DTAGGED=1 -DSPLIT=1
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=4 -DNWARPS=8 -DM_TILES=3 -DK_TILES=12 -DREG_K_TILES=5 -DTAGGED=0 -DSPLIT=1
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=4 -DNWARPS=8 -DM_TILES=2 -DK_TILES=8 -DREG_K_TILES=8 -DTAGGED=1 -DSPLIT=1
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=2 -DNWARPS=8 -DM_TILES=2 -DK_TILES=8 -DREG_K_TILES=8 -DTAGGED=1 -DSPLIT=1
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=4 -DNWARPS=8 -DM_TILES=2 -DK_TILES=8 -DREG_K_TILES=8 -DTAGGED=0 -DSPLIT=1 -DPAIRED_SPLIT=0
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=1 -DNWARPS=8 -DM_TILES=2 -DK_TILES=8 -DREG_K_TILES=8 -DTAGGED=1 -DPOLL_DELAY_NS=250
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=2 -DNWARPS=8 -DM_TILES=2 -DK_TILES=8 -DREG_K_TILES=8 -DTAGGED=1 -DPOLL_DELAY_NS=250
// v26 (TAGGED_WITH_WAIT): fp16 H=1024 B=8 tagged with the projection; the paired split at B=4 tagged after a long delay.
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=8 -DNWARPS=8 -DM_TILES=2 -DK_TILES=8 -DREG_K_TILES=8 -DTAGGED=1 -DIN_K_TILES=8
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=4 -DNWARPS=8 -DM_TILES=2 -DK_TILES=8 -DREG_K_TILES=8 -DTAGGED=1 -DSPLIT=1 -DPOLL_DELAY_NS=1200
// v27: the fp32 split below H=512 (rules.fp32_split_pays): H=384 B=16, H=256 B=32.
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=16 -DNWARPS=16 -DM_TILES=1 -DK_TILES=2 -DREG_K_TILES=2 -DTAGGED=0 -DSPLIT=1
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=32 -DNWARPS=16 -DM_TILES=1 -DK_TILES=1 -DREG_K_TILES=1 -DTAGGED=0 -DSPLIT=1
// v28 (SPLIT_WORDS, the default in every split line above): H=1024 and H=1536 at B=4 tagged after 400 ns; the ablation.
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=4 -DNWARPS=8 -DM_TILES=2 -DK_TILES=8 -DREG_K_TILES=8 -DTAGGED=1 -DSPLIT=1 -DPOLL_DELAY_NS=400
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=4 -DNWARPS=8 -DM_TILES=3 -DK_TILES=12 -DREG_K_TILES=6 -DTAGGED=1 -DSPLIT=1 -DPOLL_DELAY_NS=400
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=4 -DNWARPS=8 -DM_TILES=2 -DK_TILES=8 -DREG_K_TILES=8 -DTAGGED=1 -DSPLIT=1 -DSPLIT_WORDS=0 -DPOLL_DELAY_NS=1200
// v55 (POLL_BACKOFF_NS, rules.poll_backoff_ns): the paired split at H=1024 B=4 sleeps 100 ns after an incomplete poll.
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=4 -DNWARPS=8 -DM_TILES=2 -DK_TILES=8 -DREG_K_TILES=8 -DTAGGED=1 -DSPLIT=1 -DPOLL_DELAY_NS=400 -DPOLL_BACKOFF_NS=100
// v29: the split computing x W_ih^T itself (IN_K_TILES with SPLIT) at H=1024 B=4, tagged and under the split barrier.
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=4 -DNWARPS=8 -DM_TILES=2 -DK_TILES=8 -DREG_K_TILES=8 -DTAGGED=1 -DSPLIT=1 -DPOLL_DELAY_NS=400 -DIN_K_TILES=8
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=4 -DNWARPS=8 -DM_TILES=2 -DK_TILES=8 -DREG_K_TILES=8 -DTAGGED=0 -DSPLIT=1 -DIN_K_TILES=8
// v30: the batch as two groups (fp16 H=1024 B=16: forward tagged with the projection, backward with the
// per-group barrier option)
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=8 -DNWARPS=8 -DM_TILES=4 -DK_TILES=8 -DREG_K_TILES=8 -DTAGGED=1 -DIN_K_TILES=8 -DGROUPS=2
// ecornn-check: -DPASS=1 -DBF16=1 -DBATCH=8 -DNWARPS=16 -DM_TILES=1 -DK_TILES=16 -DREG_K_TILES=16 -DTAGGED=0 -DGROUPS=2 -DGROUP_BARRIERS=1
// v31: the backward's next-step loads after the barrier (fp16 H=1024 B=16 grouped; fp16 H=1536 B=8, 2 k-tiles
// per warp in shared memory)
// ecornn-check: -DPASS=1 -DBF16=0 -DBATCH=8 -DNWARPS=16 -DM_TILES=1 -DK_TILES=16 -DREG_K_TILES=16 -DTAGGED=0 -DGROUPS=2 -DBWD_LATE_LOADS=1
// ecornn-check: -DPASS=1 -DBF16=0 -DBATCH=8 -DNWARPS=8 -DM_TILES=1 -DK_TILES=48 -DREG_K_TILES=46 -DTAGGED=0 -DBWD_LATE_LOADS=1
// v34 (H0_IN_PRODUCT): the split with more batch columns than partial lines (fp32 H=128 B=33: 8 warps, one m-tile)
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=33 -DNWARPS=8 -DM_TILES=1 -DK_TILES=1 -DREG_K_TILES=1 -DTAGGED=0 -DSPLIT=1
// v35 (POLL_SPIN_CYCLES): the tagged split with 3 m-tiles spins before its first poll (fp32 H=1536 and H=1280 at B=4).
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=4 -DNWARPS=8 -DM_TILES=3 -DK_TILES=12 -DREG_K_TILES=6 -DTAGGED=1 -DSPLIT=1 -DPOLL_DELAY_NS=400 -DPOLL_SPIN_CYCLES=800
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=4 -DNWARPS=8 -DM_TILES=3 -DK_TILES=10 -DREG_K_TILES=6 -DTAGGED=1 -DSPLIT=1 -DPOLL_DELAY_NS=400 -DPOLL_SPIN_CYCLES=800
// v37 (STEP_CLOCKS, a diagnostic): the marked fp32 H=1024 B=4 split and fp16 H=1024 B=16 grouped forwards (the 16-warp
// B=8 split, at the 128-register cap, spills with marks: the engine backs its register k-tiles off there).
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=4 -DNWARPS=8 -DM_TILES=2 -DK_TILES=8 -DREG_K_TILES=8 -DTAGGED=1 -DSPLIT=1 -DPOLL_DELAY_NS=400 -DSTEP_CLOCKS=32
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=8 -DNWARPS=8 -DM_TILES=4 -DK_TILES=8 -DREG_K_TILES=8 -DTAGGED=1 -DIN_K_TILES=8 -DGROUPS=2 -DSTEP_CLOCKS=32
// v38 (rules.v4_warps_kept): the 16-bit forwards at H=1728-2048, B <= 4 on 8 warps: bf16 H=2048 B=4 (grid.sync),
// fp16 H=2048 B=2 (tagged), bf16 H=1792 B=4.
// ecornn-check: -DPASS=0 -DBF16=1 -DBATCH=4 -DNWARPS=8 -DM_TILES=4 -DK_TILES=16 -DREG_K_TILES=9 -DTAGGED=0
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=2 -DNWARPS=8 -DM_TILES=4 -DK_TILES=16 -DREG_K_TILES=9 -DTAGGED=1
// ecornn-check: -DPASS=0 -DBF16=1 -DBATCH=4 -DNWARPS=8 -DM_TILES=4 -DK_TILES=14 -DREG_K_TILES=9 -DTAGGED=0
// v38, two directions in one grid on 8 warps: fp16 H=1024 B=8 (the projection in the kernel), bf16 H=1216 B=1.
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=8 -DNWARPS=8 -DM_TILES=4 -DK_TILES=8 -DREG_K_TILES=8 -DTAGGED=1 -DIN_K_TILES=8
// ecornn-check: -DPASS=0 -DBF16=1 -DBATCH=1 -DNWARPS=8 -DM_TILES=5 -DK_TILES=10 -DREG_K_TILES=7 -DTAGGED=1
// v40 (GROUPS with SPLIT): the fp32 split in batch groups: H=512 B=16 in 4 paired groups of 4, H=256 B=64 in 8 of 8,
// H=384 B=32 in 8 paired groups of 4 (a k-tile in shared memory), H=1024 B=16 in 2 of 8 under grid.sync.
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=4 -DNWARPS=8 -DM_TILES=4 -DK_TILES=4 -DREG_K_TILES=4 -DTAGGED=1 -DSPLIT=1 -DGROUPS=4
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=8 -DNWARPS=8 -DM_TILES=4 -DK_TILES=2 -DREG_K_TILES=2 -DTAGGED=1 -DSPLIT=1 -DGROUPS=8
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=4 -DNWARPS=8 -DM_TILES=6 -DK_TILES=3 -DREG_K_TILES=2 -DTAGGED=1 -DSPLIT=1 -DGROUPS=8
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=8 -DNWARPS=8 -DM_TILES=4 -DK_TILES=8 -DREG_K_TILES=4 -DTAGGED=0 -DSPLIT=1 -DGROUPS=2
// v42 (CLUSTER_K): the fp32 split on clusters of 2 blocks of 8 warps, each 1/2 of K, the first poll after an 800-cycle
// spin (rules.cluster_split_pays, poll_spin_cycles): H=1024 B=8 (the engine's build), H=1280 B=8 (NVRTC keeps 4 of 5
// register k-tiles, nvcc 3); a cluster of 4 (H=400 B=8, forced).
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=8 -DNWARPS=8 -DM_TILES=4 -DK_TILES=4 -DREG_K_TILES=4 -DTAGGED=1 -DSPLIT=1 -DPOLL_DELAY_NS=400 -DPOLL_SPIN_CYCLES=800 -DCLUSTER_K=2
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=8 -DNWARPS=8 -DM_TILES=5 -DK_TILES=5 -DREG_K_TILES=3 -DTAGGED=1 -DSPLIT=1 -DPOLL_DELAY_NS=400 -DPOLL_SPIN_CYCLES=800 -DCLUSTER_K=2
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=8 -DNWARPS=8 -DM_TILES=4 -DK_TILES=1 -DREG_K_TILES=1 -DTAGGED=1 -DSPLIT=1 -DPOLL_DELAY_NS=400 -DPOLL_SPIN_CYCLES=800 -DCLUSTER_K=4
// v44 (GROUPS with CLUSTER_K): the fp32 split in 2 groups of 8 on clusters (rules.cluster_split_pays): H=1024 B=16 as
// the engine builds it (2 of 4 register k-tiles; v58: plain output stores, NVRTC spilled the delta), H=768 B=16; the
// fp16 forward in 2 groups of 8 on clusters with the input projection in the kernel (forced: slower than v30's grouped
// plan).
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=8 -DNWARPS=8 -DM_TILES=8 -DK_TILES=4 -DREG_K_TILES=2 -DTAGGED=1 -DSPLIT=1 -DPOLL_DELAY_NS=400 -DPOLL_SPIN_CYCLES=800 -DGROUPS=2 -DCLUSTER_K=2 -DOUT_DELTA=0
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=8 -DNWARPS=8 -DM_TILES=6 -DK_TILES=3 -DREG_K_TILES=3 -DTAGGED=1 -DSPLIT=1 -DPOLL_DELAY_NS=400 -DPOLL_SPIN_CYCLES=800 -DGROUPS=2 -DCLUSTER_K=2
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=8 -DNWARPS=8 -DM_TILES=8 -DK_TILES=4 -DREG_K_TILES=4 -DTAGGED=1 -DIN_K_TILES=4 -DPOLL_DELAY_NS=400 -DPOLL_SPIN_CYCLES=800 -DGROUPS=2 -DCLUSTER_K=2
// v46 (capacity.BATCH_GROUP_MIN 5): fp16 H=1024 B=12 forward in 2 groups of 6 (tagged, the projection in the kernel)
// and B=14 backward in 2 groups of 7, the engine's H100 plans: the mma N tile padded inside each group.
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=6 -DNWARPS=8 -DM_TILES=4 -DK_TILES=8 -DREG_K_TILES=8 -DTAGGED=1 -DIN_K_TILES=8 -DGROUPS=2
// ecornn-check: -DPASS=1 -DBF16=0 -DBATCH=7 -DNWARPS=16 -DM_TILES=1 -DK_TILES=16 -DREG_K_TILES=16 -DTAGGED=0 -DGROUPS=2 -DBWD_LATE_LOADS=1
// v51: the in-kernel projection over half the inputs, a GEMM the rest (INPUT_PART): bf16 H=1024 B=4, and forced grouped
// ecornn-check: -DPASS=0 -DBF16=1 -DBATCH=4 -DNWARPS=8 -DM_TILES=2 -DK_TILES=8 -DREG_K_TILES=8 -DTAGGED=1 -DIN_K_TILES=4 -DINPUT_PART=1
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=8 -DNWARPS=8 -DM_TILES=4 -DK_TILES=8 -DREG_K_TILES=8 -DTAGGED=1 -DIN_K_TILES=4 -DGROUPS=2 -DINPUT_PART=1
// v52: W_ih k-tiles in registers (IN_REG_K_TILES, rules.input_reg_k_tiles): fp16 H=1024 B=16 and B=12 in groups and bf16
// H=1024 B=4 with the split projection as the engine builds them; fp16 B=16 ungrouped on 8 warps with all 8 (forced)
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=8 -DNWARPS=8 -DM_TILES=4 -DK_TILES=8 -DREG_K_TILES=8 -DTAGGED=1 -DIN_K_TILES=8 -DIN_REG_K_TILES=2 -DGROUPS=2
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=6 -DNWARPS=8 -DM_TILES=4 -DK_TILES=8 -DREG_K_TILES=8 -DTAGGED=1 -DIN_K_TILES=8 -DIN_REG_K_TILES=2 -DGROUPS=2
// ecornn-check: -DPASS=0 -DBF16=1 -DBATCH=4 -DNWARPS=8 -DM_TILES=2 -DK_TILES=8 -DREG_K_TILES=8 -DTAGGED=1 -DIN_K_TILES=4 -DINPUT_PART=1 -DIN_REG_K_TILES=2
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=16 -DNWARPS=8 -DM_TILES=2 -DK_TILES=8 -DREG_K_TILES=8 -DTAGGED=1 -DIN_K_TILES=8 -DIN_REG_K_TILES=8
// v57: h0's exponents by single loads (H0_WIDE_LOADS=0, the ablation): the clustered fp32 split B=8
// ecornn-check: -DPASS=0 -DBF16=0 -DBATCH=8 -DNWARPS=8 -DM_TILES=4 -DK_TILES=4 -DREG_K_TILES=4 -DTAGGED=1 -DSPLIT=1 -DPOLL_DELAY_NS=400 -DPOLL_SPIN_CYCLES=800 -DCLUSTER_K=2 -DH0_WIDE_LOADS=0
#include <cooperative_groups.h>

#include "cluster_common.cuh"
#include "mma_common.cuh"
#include "persistent_common.cuh"
#include "step_clocks.cuh"

namespace cg = cooperative_groups;

#ifndef TAGGED
#define TAGGED 0
#endif
#ifndef UNITS_FASTEST
#define UNITS_FASTEST 1
#endif
#ifndef IN_K_TILES
#define IN_K_TILES 0
#endif
#ifndef SPLIT
#define SPLIT 0
#endif
#ifndef PAIRED_SPLIT
#define PAIRED_SPLIT 1
#endif
#ifndef POLL_DELAY_NS   // v16: tagged forwards at B <= 2 sleep this long before a warp's first poll
#define POLL_DELAY_NS 0
#endif
#ifndef POLL_SPIN_CYCLES   // v35: the first-poll delay as a clock64() spin of this many SM cycles (rules.poll_spin_cycles);
#define POLL_SPIN_CYCLES 0   // 0: __nanosleep(POLL_DELAY_NS), whose sleep PTX bounds only by [0, 2 t]
#endif
#ifndef SPLIT_WORDS     // v28: the split's h as one word (hi | lo with the step-parity bit); 0: v13's two rows
#define SPLIT_WORDS 1
#endif
#ifndef GROUPS          // v30: the batch as GROUPS groups of BATCH columns, each on blocks of its own
#define GROUPS 1
#endif
#ifndef GROUP_BARRIERS  // v30, grouped grid.sync plans: a split barrier per (direction, group) instead of grid.sync()
#define GROUP_BARRIERS 0
#endif
#ifndef H0_IN_PRODUCT   // v34, SPLIT: h0 enters the step-0 product scaled per batch column; 0: the host's W_hh h0 (v32)
#define H0_IN_PRODUCT 1
#endif
#ifndef XW_AT_LOAD      // v33's ablation: xw (its unscale, v32) and the biases applied where loaded, not in the pointwise
#define XW_AT_LOAD 0
#endif
// v33: sm_80 keeps v32's place: the pointwise one holds xw's exponents over the product, and the B=8 split plan
// (16 warps, 128 registers) spilled there (not measured on an A100; loading them in the pointwise instead was
// spill-free on both but measured 0.23 us/step slower at B=8 on the H100, results/persistent_v33 call 16)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
constexpr bool kXwAtLoad = true;
#else
constexpr bool kXwAtLoad = XW_AT_LOAD != 0;
#endif
#ifndef CLUSTER_K       // v42: a thread-block cluster of CLUSTER_K blocks runs one virtual block (see kClusterK)
#define CLUSTER_K 1
#endif
#ifndef SPLIT_BARRIER   // grid.sync plans: the split barrier (default with the in-kernel projection) or grid.sync()
#define SPLIT_BARRIER (IN_K_TILES > 0)
#endif

constexpr bool kBf16 = BF16 != 0;
constexpr bool kTagged = TAGGED != 0;
constexpr int kBatch = BATCH;
// v30, GROUPS > 1 (16-bit layers, forward and backward): the layer's batch is GROUPS x BATCH columns.
// Group g runs on blocks of its own (a grid of GROUPS x the blocks of one group, like two directions)
// with its own exchange region, as if it were a layer of batch BATCH. Each group's blocks own twice the
// units of the ungrouped plan (half the blocks): full m-tiles in the backward, and the step's exchange
// and staging are a batch-8 one instead of a batch-16 one (v26: 8 polls per lane at B = 8 pay tagged
// with the in-kernel projection; at B = 16 nothing does). x, xw, y, the states, the saved gates and
// cells, dy and dz keep the layer's [.][GROUPS * BATCH][.] rows.
constexpr int kGroups = GROUPS;
constexpr int kBatchAll = GROUPS * BATCH;
constexpr int kNTiles = (BATCH + 7) / 8;
constexpr int kNPad = 8 * kNTiles;                 // batch padded to the mma's N
constexpr int kWarps = NWARPS;
constexpr int kThreads = 32 * NWARPS;
constexpr int kMTiles = M_TILES;
constexpr int kRows = 16 * M_TILES;               // padded rows per block
constexpr int kKTiles = K_TILES;
constexpr int kRegKTiles = REG_K_TILES;
constexpr int kSmemKTiles = K_TILES - REG_K_TILES;
constexpr int kWarpK = 16 * K_TILES;              // columns per warp
// v13, SPLIT=1 (fp32 layers, forward only): fp32 on the fp16 tensor cores. Every weight is
// w = hi + lo / 2^11 with hi, lo fp16 (hi = w rounded, lo = the residual scaled up so that it stays a
// normal fp16), and so is every h; W . h = hi.hi + (lo.hi + hi.lo) / 2^11, the dropped lo.lo term
// 2^-22 relative: ~22 significant bits for 3 mma per tile (fp32 FFMA: 24). The lo A-fragments are
// the tile's m-tiles M_TILES..2*M_TILES-1, the lo halves of the vector its rows BATCH..2*BATCH-1
// (exchanged and staged like the hi rows), and the correction products accumulate in
// acc[M_TILES + mt]. Gate functions are the accurate ones (the 16-bit kernels' MUFU.TANH is 2^-11).
constexpr bool kSplit = SPLIT != 0;
// v14, the paired split (B = 1, 2, 4; PAIRED_SPLIT=0: the ablation): the vector's hi and lo rows
// (2B <= 8) share the mma's N = 8 columns, so W_hi . [h_hi | h_lo] gives hi.hi (column b) and hi.lo
// (column B + b) in one mma, and W_lo . [h_hi | h_lo] gives lo.hi (column b; its lo.lo columns are
// dropped): 2 mma per tile instead of 3. store_partials brings hi.lo to column b (paired_column).
constexpr bool kPaired = kSplit && PAIRED_SPLIT != 0 && (BATCH == 1 || BATCH == 2 || BATCH == 4);
constexpr int kATiles = (kSplit ? 2 : 1) * M_TILES;   // packed A m-tiles per k-tile
constexpr int kVecRows = (kSplit ? 2 : 1) * BATCH;    // rows of the exchanged and staged vector
constexpr float kLoScale = 2048.0f;                   // lo = (x - hi) * 2^11
// v28, SPLIT_WORDS (split plans): the lowest bit of h's lo half is the step-parity bit of v6's
// mantissa tags (bit_of_tag), in either exchange, so the exchange never changes a result. The tagged
// exchange then carries one word per value, hi | lo << 16 (the lo bit is the tag): B rows of words
// instead of 2B, half the polls per lane. Cost: lo keeps 10 bits, ~2^-21 of h instead of 2^-23
// (the dropped lo.lo term is 2^-22).
constexpr bool kSplitWords = kSplit && SPLIT_WORDS != 0;
constexpr int kXchRows = kSplitWords && kTagged ? BATCH : kVecRows;   // rows of the exchange buffer
static_assert(!kSplit || (PASS == 0 && BF16 == 0), "SPLIT: fp16 halves, forward only");
// v40: GROUPS with SPLIT (fp32 forwards in batch groups), not with v29's in-kernel split projection (its split
// input [T][B][.] is not grouped; a forced option only).
static_assert(kGroups == 1 || !kSplit || IN_K_TILES == 0, "GROUPS with SPLIT: not with the in-kernel projection");
constexpr int kTileU4 = kWarps * kKTiles * kATiles * 32;   // one block's packed tile (uint4)

static_assert(REG_K_TILES >= 0 && REG_K_TILES <= K_TILES, "REG_K_TILES must be in [0, K_TILES]");
static_assert(IN_K_TILES == 0 || PASS == 0, "the input projection runs in the forward kernel only");

// v12, IN_K_TILES > 0: the forward computes x_t W_ih^T itself (no xw GEMM before the kernel). The
// block's W_ih rows (the same gate rows as its W_hh rows) sit in shared memory as packed fragments,
// warp w owning input columns [w * 16 * IN_K_TILES, ...); x_t is staged like h. The product for
// step t+1 depends on nothing the other blocks write, so it runs while the block waits for them
// (between the arrive and the wait of a split grid barrier, or before polling the tagged exchange);
// its per-warp result starts the accumulators of step t+1's recurrent product, and the existing
// warp-partial sums add both.
constexpr bool kInput = IN_K_TILES > 0;
constexpr int kInKTiles = IN_K_TILES;
#ifndef INPUT_PART
#define INPUT_PART 0
#endif
// v51, INPUT_PART (16-bit forwards with IN_K_TILES): the in-kernel product covers the first 16 * IN_K_TILES * NWARPS
// input columns only (half the W_ih tiles read from shared memory per step: their reads sat on every block's loop,
// results/persistent_v51 call 4); a GEMM before the kernel gave the rest as xw_part [D][T][B][4H] (no biases),
// loaded for step t+1 after step t's publish and added in the pointwise like the xw of a plan without the projection.
constexpr bool kInputPart = INPUT_PART != 0;
static_assert(!kInputPart || (kInput && PASS == 0 && !kSplit), "INPUT_PART: a 16-bit forward with IN_K_TILES");
#ifndef DIAG_IN_K_TILES_USED
#define DIAG_IN_K_TILES_USED IN_K_TILES
#endif
// v51 diagnostic (persistent.DIAG_IN_K_TILES_USED; timing only, the sums are wrong): the input product over its
// first DIAG_IN_K_TILES_USED k-tiles, to see what a cheaper in-kernel projection would save.
constexpr int kInKTilesUsed = DIAG_IN_K_TILES_USED;
#ifndef DIAG_X_STAGE_EVERY
#define DIAG_X_STAGE_EVERY 1
#endif
// v55 diagnostic (persistent.DIAG_X_STAGE_EVERY; timing only, the sums are wrong): x_{t+1} staged after the publish
// only on every n-th step (the other steps multiply the x left from before), to bound what staging x of several
// steps at once would save. (v55's X_STEPS staged 4 steps at once by cp.async: slower, code in commit 8d9e3f5.)
constexpr int kXStageEvery = DIAG_X_STAGE_EVERY;
constexpr int kInWarpK = 16 * IN_K_TILES;
constexpr int kInTileU4 = kWarps * kInKTiles * kMTiles * 32;   // one block's packed W_ih tile (uint4)
#ifndef IN_REG_K_TILES
#define IN_REG_K_TILES 0
#endif
// v52, IN_REG_K_TILES (16-bit forwards with IN_K_TILES): each warp's first IN_REG_K_TILES W_ih k-tiles stay in
// registers, like W_hh's REG_K_TILES, and only the rest sit in shared memory. The input product's tile reads from
// shared memory (128 KB per step per block at fp16 H=1024 B=16 in groups) sat on every block's loop (v51, call 4);
// registers left over next to W_hh's tiles hold a share of them. The sums are the same (k-tile kt still feeds
// accumulator set kt % kInAccSplit, in k order).
constexpr int kInRegKTiles = IN_REG_K_TILES;
static_assert(kInRegKTiles >= 0 && kInRegKTiles <= kInKTiles, "IN_REG_K_TILES must be in [0, IN_K_TILES]");
static_assert(kInRegKTiles == 0 || !kSplit, "IN_REG_K_TILES: 16-bit forwards only");
static_assert(kInRegKTiles <= kInKTilesUsed, "IN_REG_K_TILES: not with a shorter diagnostic product");
constexpr int kInSmemTileU4 = kWarps * (kInKTiles - kInRegKTiles) * kMTiles * 32;   // the shared-memory share
using InRegTiles = unsigned int[kInRegKTiles > 0 ? kInRegKTiles : 1][kMTiles][4];
// v29, SPLIT with IN_K_TILES (only when forced: slower than the GEMM, persistent_rules.split_projection_pays):
// the block keeps only W_ih's hi fragments (its own power-of-two scale; hi and lo tiles, 2x v12's
// bytes, measured slower still), and x_t arrives as the 2B rows [x_hi | x_lo] of a per-row scaled split (x is
// unbounded: each row (t, b) has its own power of two). In the kernel: W_hi . [x_hi | x_lo], combined
// per column b as hi.hi + hi.lo / 2^11 and brought to W_hh's units (x_t's row factor times W_ih's
// unscale over W_hh's) before it starts the recurrent product. The third term, x_hi . W_lo^T, is one
// fp16 GEMM before the kernel (in the scaled units); the pointwise thread scales and adds it like xw.
// The split input (xin; persistent.py, _split_input): x_hi [T][B][in_size] and x_lo [T][B][in_size]
// fp16, the row factors 2^-e [T][B] fp32 (padded to 4), then the x_hi . W_lo^T product [D][T][B][4H] fp32.

// v42, CLUSTER_K > 1 (tagged forwards, sm_90): a cluster of CLUSTER_K blocks runs one virtual block of CLUSTER_K x
// NWARPS warps and M_TILES m-tiles (the units of all its ranks). Rank r's warps own the K-slices of the virtual warps
// r * NWARPS.., so a block stages 1/CLUSTER_K of the step's vector (the exchange's polls shrink as much) and its product
// covers every row of the cluster's units over its slice. The packed tiles of the virtual plan are, in memory, the
// ranks' tiles one after the other (a rank's tile index is its block index). The block sums its warps' partials per
// unit (unit_sums) and stores each unit's sums in the shared memory of the rank that owns the unit (distributed shared
// memory, slot [step & 1][sender]); one cluster barrier; every pointwise thread adds the CLUSTER_K sums of its unit in
// rank order (bitwise reproducible). Two slots: a rank writes slot s & 1 again only after the cluster barrier of step
// s + 1, which every reader of step s has passed. v44: with GROUPS too; a group's blocks are a whole number of clusters,
// so a cluster's ranks share its group, exchange region and (as without groups) its virtual tile. v44: with v12's
// input projection too; W_ih's packed tiles are virtual like W_hh's and a rank stages and multiplies its K-slice of
// x_t, so its warps' partials carry both products over its slices and the owners' sums add both.
constexpr int kClusterK = CLUSTER_K;
constexpr bool kClustered = kClusterK > 1;
constexpr int kUnitsPerRank = kRows / 4 / kClusterK;   // a block's own units
static_assert(!kClustered || (PASS == 0 && kTagged && !(kSplit && kInput)),
              "CLUSTER_K: tagged forwards, not with v29's in-kernel split projection");
static_assert(kRows % (4 * kClusterK) == 0, "CLUSTER_K must divide the virtual block's units");

#if CLUSTER_K > 1 && (!defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900)
#define ECORNN_MMA_CLUSTER __cluster_dims__(CLUSTER_K, 1, 1)
#else
#define ECORNN_MMA_CLUSTER
#endif

// This block's rank in its cluster (0 without clusters).
__device__ __forceinline__ unsigned rank_in_cluster() {
    if constexpr (kClustered) return cluster_rank();
    return 0;
}

// The warp whose K-slice this warp stages and multiplies: its own, or (v42) its place in the cluster's virtual block.
__device__ __forceinline__ int slice_warp() { return (int)rank_in_cluster() * kWarps + threadIdx.x / 32; }

// v34, H0_IN_PRODUCT: h0 is unbounded and the split's fp16 halves are not, so the split publishes h0 * 2^-e with e
// per batch column (the exponent of its largest |h0|: the column then lies in (-1, 1) like every h) and multiplies
// the step-0 product by 2^e in the pointwise. Accuracy as every step's product (~22 bits of the column's largest
// term); no strict-fp32 W_hh h0 GEMV before the kernel (12-16 us per call at H=1024, B=4-8).
// Not with v29's in-kernel projection (a forced option): its step-0 product starts from the input product, which
// 2^e would scale too.
constexpr bool kH0InProduct = kSplit && !kInput && H0_IN_PRODUCT != 0;

#if PASS == 0
// Partials [warp][unit][b][gate]: the pointwise thread reads one float4 per warp. The 4 floats of
// padding per unit make the fragment stores conflict-free (the two units of one store are 36
// floats apart: banks +4).
constexpr int kRedStride = 4 * kNPad + 4;          // floats per (warp, unit)
constexpr int kRedFloats = kWarps * (kRows / 4) * kRedStride;
#else
// Partials [warp][unit][b] (+4 floats of padding per unit against bank conflicts of the stores).
constexpr int kRedStride = kNPad + 4;
constexpr int kRedFloats = kWarps * kRows * kRedStride;
#endif
constexpr int kSmemTileU4 = kWarps * kSmemKTiles * kATiles * 32;
// Per-warp staged vector [n < kVecRows][k] as 16-bit pairs (words); the padding columns n >= BATCH
// of the mma are zero registers, not shared memory. Row stride kWarpK/2 + 4 words: an odd
// multiple of 4, so the 8 rows g of one B-fragment load fall in distinct bank quads (conflict-free).
constexpr int kVecStride = kWarpK / 2 + 4;
constexpr int kVecWordsPerWarp = kVecRows * kVecStride;
constexpr int kStageChunk = 8;                    // float4 loads per lane in flight while staging
// Per-warp staged input x_t (IN_K_TILES > 0), the same format: row stride kInWarpK/2 + 4 words.
constexpr int kXStride = kInWarpK / 2 + 4;
constexpr int kXWordsPerWarp = kInput ? kVecRows * kXStride : 0;

#if PASS == 0
// v29: the parts of the split input (see kInTileU4).
struct SplitInput {
    const unsigned short* hi;
    const unsigned short* lo;
    const float* factors;
    const float* lo_product;
};

__device__ __forceinline__ SplitInput split_input(const float* xin, int T, int in_size) {
    SplitInput in;
    const size_t values = (size_t)T * kBatch * in_size;
    in.hi = reinterpret_cast<const unsigned short*>(xin);
    in.lo = in.hi + values;
    in.factors = reinterpret_cast<const float*>(in.lo + values);
    in.lo_product = in.factors + (((size_t)T * kBatch + 3) & ~(size_t)3);
    return in;
}
#endif

// Independent accumulator sets over k (k-tile kt feeds set kt % kAccSplit, summed at the end in a
// fixed order): each mma.sync waits ~30 clocks for its accumulator, so a warp with fewer than 4
// (m, n) tiles would otherwise run one long dependent chain (backward H=2048: 64 mma in a row).
// Mirrored by persistent_capacity.mma_acc_split.
constexpr int kChains = kATiles * kNTiles;
constexpr int kAccSplitWanted = kChains >= 4 ? 1 : (kChains >= 2 ? 2 : 4);
constexpr int kAccSplit = kAccSplitWanted < K_TILES ? kAccSplitWanted : K_TILES;
constexpr int kInAccSplit = kAccSplitWanted < IN_K_TILES ? kAccSplitWanted : (IN_K_TILES > 0 ? IN_K_TILES : 1);

using RegTiles = unsigned int[kRegKTiles > 0 ? kRegKTiles : 1][kATiles][4];
using Acc = float[kATiles][kNTiles][4];

// A block's packed fragment tile src [NWARPS][KTiles][Frags][32] (uint4): each warp's first RegKTiles k-tiles into
// reg, the rest into shared memory dst [NWARPS][KTiles - RegKTiles][Frags][32]. (v57 copied the shared part by
// cp.async: fp32 H=1024 B=4 0.24 us/step slower, 16-bit plans -0.02 to +0.02; results/persistent_v57.)
template <int KTiles, int RegKTiles, int Frags, typename Regs>
__device__ __forceinline__ void load_fragment_tiles(Regs& reg, uint4* dst, const uint4* src) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
    for (int kt = 0; kt < RegKTiles; ++kt)
#pragma unroll
        for (int mt = 0; mt < Frags; ++mt) {
            const uint4 q = src[((warp * KTiles + kt) * Frags + mt) * 32 + lane];
            reg[kt][mt][0] = q.x; reg[kt][mt][1] = q.y; reg[kt][mt][2] = q.z; reg[kt][mt][3] = q.w;
        }
    constexpr int per_warp = (KTiles - RegKTiles) * Frags * 32 > 0 ? (KTiles - RegKTiles) * Frags * 32 : 1;
    constexpr int total = kWarps * (KTiles - RegKTiles) * Frags * 32;
    for (int idx = threadIdx.x; idx < total; idx += kThreads) {
        const int wi = idx / per_warp, rest = idx % per_warp;
        dst[idx] = src[(wi * KTiles + RegKTiles) * Frags * 32 + rest];
    }
}

// The block's W_hh tile `tile`: register k-tiles into a_reg, the rest into shared memory a_s.
__device__ __forceinline__ void load_tiles(RegTiles& a_reg, uint4* a_s, const uint4* tiles, size_t tile) {
    load_fragment_tiles<kKTiles, kRegKTiles, kATiles>(a_reg, a_s, tiles + tile * kTileU4);
}

// ---- v5: tagged exchange (see the header) ----
// The 16-bit bits of x (round to nearest even, as pack_pair).
__device__ __forceinline__ unsigned short half_bits(float x) {
    return static_cast<unsigned short>(pack_pair<kBf16>(x, 0.0f) & 0xffffu);
}

// One exchange word: the 16-bit value of x under the tag.
__device__ __forceinline__ unsigned int tagged_word(float x, unsigned int tag) {
    return half_bits(x) | (tag << 16);
}

// Offset of slot step & 1 of direction d in an exchange buffer [D][2][kXchRows][ld] (both exchanges).
__device__ __forceinline__ size_t slot_offset(int d, int step, int ld) {
    return ((size_t)d * 2 + (step & 1)) * kXchRows * ld;
}

// v28: the one-bit tag of the step whose 16-bit tag is `tag` (h0: 1, h_t: t + 2). It alternates per
// use of a slot (slot = step parity) and is 1 at each slot's first use, which the host's zeros lack;
// a waiting block can only see its slot's previous use (v6's argument), so one bit suffices.
__device__ __forceinline__ unsigned int bit_of_tag(unsigned int tag) { return (((tag - 1u) >> 1) & 1u) ^ 1u; }

// Exchange words per row: k_len rounded up to 4, so every row starts 16-byte aligned.
__device__ __forceinline__ int exchange_ld(int k_len) { return (k_len + 3) & ~3; }

// The bits in which the `valid` (1..4) leading words of q differ from t (words past k_len are
// padding: the host's zeros, never written, never awaited).
__device__ __forceinline__ unsigned int leading_diff(const uint4& q, unsigned int t, int valid) {
    unsigned int diff = q.x ^ t;
    if (valid > 1) diff |= q.y ^ t;
    if (valid > 2) diff |= q.z ^ t;
    if (valid > 3) diff |= q.w ^ t;
    return diff;
}

// Whether the `valid` leading words of q carry the 16-bit tag (the high halves).
__device__ __forceinline__ bool tagged_ready(const uint4& q, unsigned int tag, int valid) {
    return (leading_diff(q, tag << 16, valid) >> 16) == 0;
}

// v28: whether the `valid` leading split words of q carry the tag bit (bit 16: the lo half's lowest).
__device__ __forceinline__ bool split_words_ready(const uint4& q, unsigned int bit, int valid) {
    return (leading_diff(q, bit << 16, valid) & 0x10000u) == 0;
}

// v16's wait before a warp's first poll of the step; v35: a clock64() spin where POLL_SPIN_CYCLES is set.
__device__ __forceinline__ void first_poll_delay() {
    if constexpr (POLL_SPIN_CYCLES > 0) {
        const long long start = clock64();
        while (clock64() - start < POLL_SPIN_CYCLES) {
        }
    } else {
        __nanosleep(POLL_DELAY_NS);
    }
}

#ifndef POLL_BACKOFF_NS
#define POLL_BACKOFF_NS 0
#endif
// v55 (POLL_BACKOFF_NS): a lane sleeps this long after a poll that found its chunk incomplete. Repolls reloading
// only the stale quads (v55's POLL_STALE_ONLY, commits 495b4f7 and 98bce4d) polled the late lines more often and
// read 0.2-1.1 us/step slower everywhere: how often the blocks poll the lines still being published slows those
// publishes.

// The warp's K-slice of the tagged exchange rows src[n * ld + k] (n < kVecRows, k < k_len): waits until
// every word of the warp's K-slice carries `tag`, then keeps the 16-bit halves (no conversion).
__device__ __forceinline__ void stage_tagged(unsigned int* vec_s, const unsigned int* src, int k_len,
                                             unsigned int tag) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, kw = slice_warp();
    const int ld = exchange_ld(k_len);
    unsigned int* mine = vec_s + warp * kVecWordsPerWarp;
    constexpr int quads = kWarpK / 4, count = kXchRows * quads;
    constexpr int iters = (count + 31) / 32, chunk = iters < kStageChunk ? iters : kStageChunk;
    const unsigned int bit = bit_of_tag(tag);
    if constexpr (POLL_DELAY_NS > 0) first_poll_delay();   // v16: fewer polls before the data can be there
#pragma unroll 1
    for (int base = 0; base < iters; base += chunk) {
        uint4 v[chunk];
        // The whole chunk is reloaded until all of it is ready: no load address stays live across
        // the checks (keeping them spilled the 16-warp plans). Spinning on the first stale quad
        // alone and then reloading measured 1.4-2x slower on the H100 (serial round trips).
        for (long long polls = 0;; ++polls) {
#pragma unroll
            for (int j = 0; j < chunk; ++j) {
                const int i = (base + j) * 32 + lane, n = i / quads, k = kw * kWarpK + 4 * (i % quads);
                v[j] = i < count && k < k_len ? load_relaxed(src + (size_t)n * ld + k) : make_uint4(0, 0, 0, 0);
            }
            bool ready = true;
#pragma unroll
            for (int j = 0; j < chunk; ++j) {
                const int i = (base + j) * 32 + lane, k = kw * kWarpK + 4 * (i % quads);
                const int valid = k_len - k < 4 ? k_len - k : 4;
                if (i < count && k < k_len)
                    ready &= kSplitWords ? split_words_ready(v[j], bit, valid) : tagged_ready(v[j], tag, valid);
            }
            if (ready) break;
            if (polls > kMaxPolls) __trap();
            if constexpr (POLL_BACKOFF_NS > 0) __nanosleep(POLL_BACKOFF_NS);
        }
#pragma unroll
        for (int j = 0; j < chunk; ++j) {
            const int i = (base + j) * 32 + lane, n = i / quads, kq = 4 * (i % quads);
            if (i < count) {
                *reinterpret_cast<uint2*>(mine + n * kVecStride + kq / 2) =
                    make_uint2(__byte_perm(v[j].x, v[j].y, 0x5410), __byte_perm(v[j].z, v[j].w, 0x5410));
                if constexpr (kSplitWords)   // the lo halves (high 16 bits) into the lo rows
                    *reinterpret_cast<uint2*>(mine + (kBatch + n) * kVecStride + kq / 2) =
                        make_uint2(__byte_perm(v[j].x, v[j].y, 0x7632), __byte_perm(v[j].z, v[j].w, 0x7632));
            }
        }
    }
    __syncwarp();
}

// ---- grid.sync plans (TAGGED=0): the vector as packed 16-bit values ----
// Rows of the packed exchange [D][2][B][packed_ld(k_len)] (16-bit values, zero padding): half the
// bytes of the fp32 vector, already in the mma's format.
__device__ __forceinline__ int packed_ld(int k_len) { return (k_len + 7) & ~7; }

__device__ __forceinline__ size_t packed_rows(int d, int step, int k_len) {
    return slot_offset(d, step, packed_ld(k_len));
}

// The warp's K-slice (WarpK columns; v44: the slice of its place in a cluster's virtual block, slice_warp) of the
// 16-bit rows src[n * ld + k] (n < Rows, k < k_len, ld and k_len multiples of 8) into its region `mine` (row stride
// Stride words): 16-byte loads of 8 values, stored as they are. The packed exchange (written by every block before the
// grid barrier) and, v12, the layer input x_t.
template <int WarpK, int Stride, int Rows>
__device__ __forceinline__ void stage_rows(unsigned int* mine, const unsigned short* src, int ld, int k_len) {
    const int kw = slice_warp(), lane = threadIdx.x % 32;
    constexpr int octs = WarpK / 8, count = Rows * octs;
    constexpr int iters = (count + 31) / 32, chunk = iters < kStageChunk ? iters : kStageChunk;
#pragma unroll 1
    for (int base = 0; base < iters; base += chunk) {
        uint4 v[chunk];
#pragma unroll
        for (int j = 0; j < chunk; ++j) {
            const int i = (base + j) * 32 + lane, n = i / octs, k = kw * WarpK + 8 * (i % octs);
            v[j] = i < count && k < k_len ? __ldcg(reinterpret_cast<const uint4*>(src + (size_t)n * ld + k))
                                          : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int j = 0; j < chunk; ++j) {
            const int i = (base + j) * 32 + lane, n = i / octs, kq = 8 * (i % octs);
            if (i < count) *reinterpret_cast<uint4*>(mine + n * Stride + kq / 2) = v[j];
        }
    }
    __syncwarp();
}

// The warp's K-slice of the packed exchange rows src (k_len values per row) into its vec_s region.
__device__ __forceinline__ void stage_packed(unsigned int* vec_s, const unsigned short* src, int k_len) {
    stage_rows<kWarpK, kVecStride, kVecRows>(vec_s + (threadIdx.x / 32) * kVecWordsPerWarp, src, packed_ld(k_len), k_len);
}

// mma of k-tile kt of the warp's slice (b0, b1 per the fragment map: n = g, k = 2c (+8); zero
// for the batch padding n >= BATCH); vec_w: the warp's staged rows, Stride words apart. SPLIT:
// a_lo is the tile's lo fragment, and the two correction products go to acc[kMTiles + mt].
// WithLo false (v29, the split's input tiles): no lo fragments, a_lo unused.
template <int Stride = kVecStride, bool WithLo = true>
__device__ __forceinline__ void mma_ktile(Acc& acc, const unsigned int (&a)[4], const unsigned int (&a_lo)[4],
                                          const unsigned int* vec_w, int kt, int mt) {
    const int lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
    if constexpr (kPaired) {   // one N tile: rows g < 2B are [h_hi | h_lo]
        const unsigned int* p = vec_w + g * Stride + kt * 8 + c;
        const bool live = g < kVecRows;
        const unsigned int b0 = live ? p[0] : 0u, b1 = live ? p[4] : 0u;
        mma_16816<kBf16>(acc[mt][0], a, b0, b1);
        if constexpr (WithLo) mma_16816<kBf16>(acc[kMTiles + mt][0], a_lo, b0, b1);
    } else {
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt) {
            const int n = nt * 8 + g;
            const unsigned int* p = vec_w + n * Stride + kt * 8 + c;
            const bool live = kBatch % 8 == 0 || n < kBatch;
            const unsigned int b0 = live ? p[0] : 0u, b1 = live ? p[4] : 0u;
            mma_16816<kBf16>(acc[mt][nt], a, b0, b1);
            if constexpr (kSplit) {
                const unsigned int* q = p + kBatch * Stride;   // the vector's lo rows
                if constexpr (WithLo) mma_16816<kBf16>(acc[kMTiles + mt][nt], a_lo, b0, b1);
                mma_16816<kBf16>(acc[kMTiles + mt][nt], a, live ? q[0] : 0u, live ? q[4] : 0u);
            }
        }
    }
}

// acc += m-tile mt of the shared-memory k-tile at ws (this lane's uint4; SPLIT: its lo fragment
// kMTiles tiles further, unless !WithLo) times k-tile kt of the staged vector.
template <int Stride, bool WithLo = true>
__device__ __forceinline__ void smem_tile_mma(Acc& acc, const uint4* ws, const unsigned int* vec_w, int kt, int mt) {
    const uint4 q = ws[mt * 32];
    const unsigned int a[4] = {q.x, q.y, q.z, q.w};
    if constexpr (kSplit && !WithLo) {
        mma_ktile<Stride, false>(acc, a, a, vec_w, kt, mt);
    } else if constexpr (kSplit) {
        const uint4 r = ws[(kMTiles + mt) * 32];
        const unsigned int a_lo[4] = {r.x, r.y, r.z, r.w};
        mma_ktile<Stride>(acc, a, a_lo, vec_w, kt, mt);
    } else {
        mma_ktile<Stride>(acc, a, a, vec_w, kt, mt);
    }
}

// part[s] += the products of KT shared-memory k-tiles ws (this lane's uint4 of the warp's first
// tile; k-tile index KT0 + ks in the staged vector; WithLo: kATiles fragments per k-tile, else
// kMTiles) over Split accumulator sets. Not fully unrolled:
// everything here comes from shared memory, and full unrolling lets ptxas hoist every tile load
// (4 registers each) ahead of the mma chain and spill the register tiles.
template <int KT, int Split, int Stride, int KT0, bool WithLo = true>
__device__ __forceinline__ void smem_tile_products(float (&part)[Split][kATiles][kNTiles][4], const uint4* ws,
                                                   const unsigned int* vec_w) {
    constexpr int tiles = WithLo ? kATiles : kMTiles;   // fragments per k-tile
    if constexpr (Split == 1) {
#pragma unroll 2
        for (int ks = 0; ks < KT; ++ks)
#pragma unroll
            for (int mt = 0; mt < kMTiles; ++mt)
                smem_tile_mma<Stride, WithLo>(part[0], ws + ks * tiles * 32, vec_w, KT0 + ks, mt);
    } else {   // groups of Split tiles; k-tile kt into set kt % Split (compile-time index), as the
               // register k-tiles: the sums do not depend on REG_K_TILES (v19: a spill back-off
               // changes no bit)
#pragma unroll 1
        for (int k0 = 0; k0 < KT; k0 += Split)
#pragma unroll
            for (int s = 0; s < Split; ++s) {
                if (KT % Split == 0 || k0 + s < KT) {
#pragma unroll
                    for (int mt = 0; mt < kMTiles; ++mt)
                        smem_tile_mma<Stride, WithLo>(part[(KT0 + s) % Split], ws + (k0 + s) * tiles * 32, vec_w,
                                                      KT0 + k0 + s, mt);
                }
            }
    }
}

// The accumulator sets at the start of a product: zero, the first set from acc where from_acc.
template <int Split>
__device__ __forceinline__ void start_sets(float (&part)[Split][kATiles][kNTiles][4], const Acc& acc, bool from_acc) {
#pragma unroll
    for (int s = 0; s < Split; ++s)
#pragma unroll
        for (int mt = 0; mt < kATiles; ++mt)
#pragma unroll
            for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
                for (int i = 0; i < 4; ++i) part[s][mt][nt][i] = from_acc && s == 0 ? acc[mt][nt][i] : 0.0f;
}

// acc = the sets part[0] + part[1] + ... in set order.
template <int Split>
__device__ __forceinline__ void sum_sets(Acc& acc, const float (&part)[Split][kATiles][kNTiles][4]) {
#pragma unroll
    for (int mt = 0; mt < kATiles; ++mt)
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                float sum = part[0][mt][nt][i];
#pragma unroll
                for (int s = 1; s < Split; ++s) sum += part[s][mt][nt][i];
                acc[mt][nt][i] = sum;
            }
}

// acc = this warp's slice of W . vector (register k-tiles first, then shared-memory ones), over
// kAccSplit accumulator sets summed in set order. v12 (kInput): the first set starts from acc (the
// warp's slice of the step's input product), so the warp partials carry both products.
__device__ __forceinline__ void warp_product(Acc& acc, const RegTiles& a_reg, const uint4* a_s,
                                             const unsigned int* vec_s) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const unsigned int* vec_w = vec_s + warp * kVecWordsPerWarp;
    float part[kAccSplit][kATiles][kNTiles][4];
    start_sets<kAccSplit>(part, acc, kInput);
#pragma unroll
    for (int kt = 0; kt < kRegKTiles; ++kt)
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt)
            mma_ktile(part[kt % kAccSplit], a_reg[kt][mt], a_reg[kt][kSplit ? kMTiles + mt : mt], vec_w, kt, mt);
    smem_tile_products<kSmemKTiles, kAccSplit, kVecStride, kRegKTiles>(
        part, a_s + warp * kSmemKTiles * kATiles * 32 + lane, vec_w);
    sum_sets<kAccSplit>(acc, part);
}

// v12: x_t's rows (x rows [B][in_size] 16-bit, in_size a multiple of 8; v29 SPLIT: its hi rows x_rows,
// then its lo rows lo_rows) into the warp's xs region.
__device__ __forceinline__ void stage_input(unsigned int* xs, const unsigned short* x_rows,
                                            const unsigned short* lo_rows, int in_size) {
    if constexpr (kInput) {
        unsigned int* x_w = xs + (threadIdx.x / 32) * kXWordsPerWarp;
        stage_rows<kInWarpK, kXStride, kBatch>(x_w, x_rows, in_size, in_size);
        if constexpr (kSplit)
            stage_rows<kInWarpK, kXStride, kBatch>(x_w + kBatch * kXStride, lo_rows, in_size, in_size);
    }
}

// v12: acc = this warp's slice of W_ih . x_t, every k-tile from shared memory in_s, x_t staged by
// stage_input. v29 (SPLIT): the hi tiles times x_t's hi and lo rows.
// v52: the first kInRegKTiles k-tiles from in_reg, the rest from shared memory.
__device__ __forceinline__ void input_product(Acc& acc, const InRegTiles& in_reg, const uint4* in_s,
                                              const unsigned int* xs) {
    if constexpr (kInput) {
        const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
        const unsigned int* x_w = xs + warp * kXWordsPerWarp;
        float part[kInAccSplit][kATiles][kNTiles][4];
        start_sets<kInAccSplit>(part, acc, false);
#pragma unroll
        for (int kt = 0; kt < kInRegKTiles; ++kt)
#pragma unroll
            for (int mt = 0; mt < kMTiles; ++mt)
                mma_ktile<kXStride, false>(part[kt % kInAccSplit], in_reg[kt][mt], in_reg[kt][mt], x_w, kt, mt);
        smem_tile_products<kInKTilesUsed - kInRegKTiles, kInAccSplit, kXStride, kInRegKTiles, false>(
            part, in_s + warp * (kInKTiles - kInRegKTiles) * kMTiles * 32 + lane, x_w);
        sum_sets<kInAccSplit>(acc, part);
    }
}

// Gate nonlinearities on the hardware tanh (MUFU.TANH, relative error ~2^-11): this kernel's values
// are 16-bit (h and dz are exchanged as fp16/bf16, y is returned as such), so the fp32 kernels'
// gates (sigmoidf_, tanhf_: ~2^-21) buy nothing here and sit on every step's critical path.
__device__ __forceinline__ float tanh_fast(float x) {
    float y;
    asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ float sigmoid_fast(float x) { return fmaf(0.5f, tanh_fast(0.5f * x), 0.5f); }

// The forward's gate functions: fast for 16-bit layers, the fp32 kernels' for SPLIT (fp32) ones.
__device__ __forceinline__ float gate_sigmoid(float x) { return kSplit ? sigmoidf_(x) : sigmoid_fast(x); }
__device__ __forceinline__ float gate_tanh(float x) { return kSplit ? tanhf_(x) : tanh_fast(x); }

// Shared-memory index of the partial of (padded row, padded batch column) from warp `warp`.
__device__ __forceinline__ int partial_index(int warp, int row, int col) {
#if PASS == 0
    return (warp * (kRows / 4) + row / 4) * kRedStride + col * 4 + row % 4;
#else
    return (warp * kRows + row) * kRedStride + col;
#endif
}

// The paired split's hi.lo product of this lane's C element i, which sits B columns to the right:
// c0,c1 (c2,c3) hold columns 2c, 2c+1 of one row, so for even B it is element i of lane + B/2, for
// B = 1 the lane's own next element. Lanes whose column is >= B get a value nobody reads.
__device__ __forceinline__ float paired_column(const float (&c_frag)[4], int i) {
    if constexpr (kBatch == 1) return c_frag[i | 1];
    else return __shfl_down_sync(0xffffffffu, c_frag[i], kBatch / 2);
}

// Store the warp's accumulators (C fragments: c0,c1 = C[g][2c, 2c+1], c2,c3 = C[g+8][2c, 2c+1]).
__device__ __forceinline__ void store_partials(float* red_s, const Acc& acc) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = lane / 4, c = lane % 4;
    if constexpr (kPaired) {   // hi.hi + (lo.hi + hi.lo) / 2^11 in column b < B
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const float hi_lo = paired_column(acc[mt][0], i);
                const int row = mt * 16 + g + 8 * (i / 2), col = 2 * c + (i % 2);
                red_s[partial_index(warp, row, col)] = acc[mt][0][i] + (acc[kMTiles + mt][0][i] + hi_lo) * (1.0f / kLoScale);
            }
    } else {
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
            for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    const int row = mt * 16 + g + 8 * (i / 2), col = nt * 8 + 2 * c + (i % 2);
                    red_s[partial_index(warp, row, col)] =
                        kSplit ? acc[mt][nt][i] + acc[kMTiles + mt][nt][i] * (1.0f / kLoScale) : acc[mt][nt][i];
                }
    }
}

// v29: the split's input product (this lane's C fragments) in W_hh's units, the start of the recurrent
// product: per column b < B, (hi.hi + hi.lo / 2^11) times `factor` (x_t's row factor of b times W_ih's
// unscale over W_hh's: load_column_factors; all powers of two, so exact); 0 in the padding columns and the paired hi.lo
// columns, the lo accumulators zeroed (the recurrent product's corrections go there).
using ColumnFactors = float[kNTiles][2];   // per C-fragment column of this lane: 2c, 2c + 1 of each N tile

// v29: the row factors of step t's columns for this lane, times `ratio` (0 in the padding). Loaded at
// the step's start: a global load in the block's wait would cost its round trip there.
__device__ __forceinline__ void load_column_factors(ColumnFactors& factor, const float* __restrict__ row_factors,
                                                    float ratio) {
    const int c = threadIdx.x % 4;
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
        for (int odd = 0; odd < 2; ++odd) {
            const int col = nt * 8 + 2 * c + odd;
            factor[nt][odd] = kSplit && kInput && col < kBatch ? __ldg(row_factors + col) * ratio : 0.0f;
        }
}

__device__ __forceinline__ void input_in_recurrent_units(Acc& acc, const ColumnFactors& factor) {
    if constexpr (kSplit && kInput) {
        // In place: element i's partner (paired_column: element i of another lane, or i | 1 of this
        // one) is read before element i is written, and elements < i are never read again.
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
            for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    const float hi_lo = kPaired ? paired_column(acc[mt][0], i) : 0.0f;
                    acc[mt][nt][i] =
                        (acc[mt][nt][i] + (acc[kMTiles + mt][nt][i] + hi_lo) * (1.0f / kLoScale)) * factor[nt][i % 2];
                    acc[kMTiles + mt][nt][i] = 0.0f;
                }
    }
}

// The block's product with the staged vector (stage_packed / stage_tagged), left in red_s; acc
// holds the warp's input product first (v12, kInput; ignored otherwise). The first barrier keeps
// the stores off red_s until every thread read the previous step's partials.
// step: the forward's step for STEP_CLOCKS marks (-1: none).
__device__ __forceinline__ void staged_product(float* red_s, const unsigned int* vec_s, const RegTiles& a_reg,
                                               const uint4* a_s, Acc& acc, int step) {
    warp_mark(step, staged_slot(threadIdx.x / 32));
    warp_mark(step, staged_ns_slot(threadIdx.x / 32), true);
    warp_product(acc, a_reg, a_s, vec_s);
    warp_mark(step, product_slot(threadIdx.x / 32));
    if constexpr (kTagged) __syncthreads();   // v4: the grid barrier orders the reads
    store_partials(red_s, acc);
    __syncthreads();
    block_mark(step, kMarkPartials);
}

// The block's product with the step's vector from the packed rows src (see stage_packed).
__device__ __forceinline__ void packed_product(float* red_s, unsigned int* vec_s, const RegTiles& a_reg,
                                               const uint4* a_s, const unsigned short* src, int k_len, Acc& acc,
                                               int step = -1) {
    stage_packed(vec_s, src, k_len);
    staged_product(red_s, vec_s, a_reg, a_s, acc, step);
}

// The same with the step's vector from the tagged exchange rows src (see stage_tagged).
__device__ __forceinline__ void tagged_product(float* red_s, unsigned int* vec_s, const RegTiles& a_reg,
                                               const uint4* a_s, const unsigned int* src, int k_len,
                                               unsigned int tag, Acc& acc, int step = -1) {
    stage_tagged(vec_s, src, k_len, tag);
    staged_product(red_s, vec_s, a_reg, a_s, acc, step);
}

// ---- v12: the grid barrier split in two (grid.sync plans with the input projection) ----
// grid_arrive publishes the block's stores as grid.sync() does (block barrier, one thread's fence,
// one atomic on a counter); grid_wait returns once every block of the grid arrived `rounds` times
// (the counter is zeroed before the launch and only grows). What the block does in between must
// not depend on other blocks' stores: the next step's input product.
__device__ __forceinline__ void grid_arrive(unsigned int* counter) {
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        atomicAdd(counter, 1u);
    }
}

__device__ __forceinline__ void grid_wait(const unsigned int* counter, unsigned int rounds, unsigned int blocks) {
    if (threadIdx.x == 0) {
        const unsigned int target = rounds * blocks;
        for (long long polls = 0; load_acquire_word(counter) < target; ++polls)
            if (polls > kMaxPolls) __trap();
    }
    __syncthreads();
}

// v30, GROUP_BARRIERS (grouped plans under grid.sync): the blocks of one (direction, batch group) share
// nothing with the others, so each region synchronises on a counter of its own (a 128-byte line apart)
// over its blocks_per_dir blocks, and the groups never wait for each other.
constexpr bool kGroupBarriers = GROUP_BARRIERS != 0 && kGroups > 1 && !kTagged;
constexpr bool kLateLoads = BWD_LATE_LOADS != 0 && !kTagged;

// The barrier counter of region x and the blocks that arrive on it.
__device__ __forceinline__ unsigned int* barrier_of(unsigned int* barrier, int x) {
    return kGroupBarriers ? barrier + 32 * x : barrier;
}

__device__ __forceinline__ unsigned int barrier_blocks(int blocks_per_dir) {
    return kGroupBarriers ? (unsigned int)blocks_per_dir : gridDim.x;
}

// One pointwise thread per (unit, batch) pair (units * B <= threads). v11, grid.sync passes of
// blocks with >= 8 units: thread b * units + u, units fastest, so a warp's stores of h, y and dz and
// its loads of xw and the saved gates cover a few contiguous runs of columns instead of one line
// per thread (the grid barrier's fence waits for those stores): -0.07 to -0.23 us per step at
// B = 8, 16 (H100). Otherwise, and with UNITS_FASTEST=0 (the ablation): thread u * B + b.
struct Slot {
    int u, b, j, d;
    int g, x;          // v30: batch group, exchange region (d * GROUPS + g); b is the column within the group
    bool active, reverse;
    size_t state_at;   // [D][B][H] index of this (unit, batch)
    size_t tile;       // packed tile of this block
};

// The layer's batch column of this slot (v30: its group's columns come after the groups before it).
__device__ __forceinline__ int batch_column(const Slot& s) { return s.g * kBatch + s.b; }

__device__ __forceinline__ Slot slot_of(int H, int units, int blocks_per_dir, int dir0) {
    Slot s;
    const int blk = blockIdx.x % blocks_per_dir, group_of_grid = blockIdx.x / blocks_per_dir;
    s.g = group_of_grid % kGroups;   // v30: blocks_per_dir is per group; the groups of a direction adjoin
    s.d = dir0 + group_of_grid / kGroups;
    s.x = s.d * kGroups + s.g;
    s.reverse = s.d == 1;
    // Units fastest only under grid.sync (its fence waits for the block's stores; the tagged
    // exchange has no fence, and there it measured 0.05-0.1 us slower) and where a quarter warp's
    // float4 partial reads (unit_sums) cover 8 units of one batch column, bank-conflict free (with
    // 4 units, H=512, it measured 0.05 us slower).
    const bool units_fastest = UNITS_FASTEST && !kTagged && units >= 8;
    s.u = units_fastest ? threadIdx.x % units : threadIdx.x / kBatch;
    s.b = units_fastest ? threadIdx.x / units : threadIdx.x % kBatch;
    s.j = blk * units + s.u;
    s.active = s.b < kBatch && s.u < units && s.j < H;
    s.state_at = ((size_t)s.d * kBatchAll + batch_column(s)) * H + s.j;
    s.tile = (size_t)s.d * blocks_per_dir + blk;
    return s;
}

// Shared memory: A tiles (uint4) | partials (float) | staged vectors (words) | v12: W_ih tiles
// (uint4) | staged inputs (words), each 16-byte aligned.
struct Carve {
    uint4* a;
    float* red;
    unsigned int* vec;
    uint4* in_a;
    unsigned int* xs;
    float* cluster;   // v42: the cluster partials [2][CLUSTER_K][own units][kNPad][4]
};

__device__ __forceinline__ Carve carve(uint4* smem) {
    Carve s;
    s.a = smem;
    s.red = reinterpret_cast<float*>(smem + kSmemTileU4);
    s.vec = reinterpret_cast<unsigned int*>(s.red + kRedFloats);
    s.in_a = reinterpret_cast<uint4*>(s.vec + kWarps * kVecWordsPerWarp);
    s.xs = reinterpret_cast<unsigned int*>(s.in_a + kInSmemTileU4);
    s.cluster = reinterpret_cast<float*>(s.xs + kWarps * kXWordsPerWarp);
    return s;
}


// v51 (INPUT_PART): the unit's 4 values of step t in xw_part [D][T][B][4H] (the GEMM's share of x W_ih^T).
__device__ __forceinline__ float4 load_xw_part(const float* __restrict__ xw_part, const Slot& p, int T, int H, int t) {
    const size_t row = ((size_t)p.d * T + t) * kBatchAll + batch_column(p);
    return __ldg(reinterpret_cast<const float4*>(xw_part + row * 4 * (size_t)H + 4 * (size_t)p.j));
}

// Offset of the exchange rows [B][exchange_ld(k_len)] that step `step` (processing order) of
// direction d publishes: slot step & 1 of xch [D][2][B][exchange_ld(k_len)].
__device__ __forceinline__ size_t xch_rows(int d, int step, int k_len) {
    return slot_offset(d, step, exchange_ld(k_len));
}

#if PASS == 0
// v34: where column b's largest biased h0 exponent stays for step 0: the 4 padding floats of partial line b / 4
// (never written by a product; 4 per line: B=33 on 8 warps of one m-tile has 32 lines).
__device__ __forceinline__ unsigned int* h0_exponent_slot(float* red_s, int b) {
    return reinterpret_cast<unsigned int*>(red_s + (b / 4) * kRedStride + 4 * kNPad + b % 4);
}

// v34: column b's e (h0_column_exponent) from its slot: 0 where every value is zero or subnormal.
__device__ __forceinline__ int h0_exponent(float* red_s, int b) {
    const int biased = static_cast<int>(*h0_exponent_slot(red_s, b));
    return biased == 0 ? 0 : biased - 126;
}
static_assert(!kH0InProduct || kBatch <= kWarps * kRows, "a padding float of the partials per batch column");

// v34: the exponent e of max |h0[d][b][:]| over the finite values (0 when they are all zero or subnormal: nothing
// to scale) of every batch column, as the largest biased exponent (a shared-memory atomicMax per value, or per warp
// where its values lie in one row); returns this thread's column's. h0 * 2^-e then has its largest value in
// [0.5, 1). One flat loop (a loop of warps over columns spilled the 255-register plan on sm_90).
// v57 (H0_WIDE_LOADS): every block reads the whole of its columns' h0 here, before its first step, and each round of
// loads is a round trip to L2 that all blocks make at once (fp32 H=1024 B=8: 8 rounds of 4 loads, 9.6 us from the
// kernel's entry to step 0, diag_early_steps_v57). So where H % 4 == 0 and the rows start 16-byte aligned, each
// thread has kH0Vectors 16-byte loads in flight per round (H=1024 B=8: one round; 4.7 us); else v34's 4 single loads.
// Ungrouped plans only (measured there): the grouped builds keep v56's code (the clustered fp32 B=16 split sits at 255
// registers, and v44's GPU test found it built unclustered in call 13, cause not established).
#ifndef H0_WIDE_LOADS
#define H0_WIDE_LOADS 1
#endif
constexpr bool kH0Wide = H0_WIDE_LOADS != 0 && kGroups == 1;
constexpr int kH0Loads = 4, kH0Vectors = 8;

__device__ __forceinline__ unsigned int biased_exponent(unsigned int bits) {
    const unsigned int e = (bits >> 23) & 0xffu;
    return e == 0xffu ? 0u : e;   // inf, NaN: they reach the outputs as they are
}

__device__ __forceinline__ void h0_exponent_of_vectors(const uint4* rows, int vectors, int H, float* red_s) {
    const bool warp_in_one_row = H % 128 == 0;   // a warp's 32 vectors then lie in one row, its trips warp-uniform
    for (int first = threadIdx.x; first < vectors; first += kH0Vectors * kThreads) {
        uint4 q[kH0Vectors];
#pragma unroll
        for (int u = 0; u < kH0Vectors; ++u) {
            const int i = first + u * kThreads;
            q[u] = i < vectors ? __ldg(rows + i) : make_uint4(0u, 0u, 0u, 0u);
        }
#pragma unroll
        for (int u = 0; u < kH0Vectors; ++u) {
            const int i = first + u * kThreads;
            unsigned int top = max(max(biased_exponent(q[u].x), biased_exponent(q[u].y)),
                                   max(biased_exponent(q[u].z), biased_exponent(q[u].w)));
            if (warp_in_one_row) top = __reduce_max_sync(0xffffffffu, top);
            if (i < vectors && (!warp_in_one_row || threadIdx.x % 32 == 0)) atomicMax(h0_exponent_slot(red_s, 4 * i / H), top);
        }
    }
}

__device__ __forceinline__ void h0_exponent_of_values(const unsigned int* rows, int n, int H, float* red_s) {
    const bool warp_in_one_row = H % 32 == 0;   // the loop's trips and `i < n` are then warp-uniform too
    for (int first = threadIdx.x; first < n; first += kH0Loads * kThreads) {
        unsigned int biased[kH0Loads];
#pragma unroll
        for (int u = 0; u < kH0Loads; ++u) {
            const int i = first + u * kThreads;
            biased[u] = i < n ? biased_exponent(__ldg(rows + i)) : 0u;
        }
#pragma unroll
        for (int u = 0; u < kH0Loads; ++u) {
            const int i = first + u * kThreads;
            unsigned int top = biased[u];
            if (warp_in_one_row) top = __reduce_max_sync(0xffffffffu, top);
            if (i < n && (!warp_in_one_row || threadIdx.x % 32 == 0)) atomicMax(h0_exponent_slot(red_s, i / H), top);
        }
    }
}

__device__ __forceinline__ int h0_column_exponent(const float* __restrict__ h0, float* red_s, const Slot& p, int H) {
    if (threadIdx.x < kBatch) *h0_exponent_slot(red_s, threadIdx.x) = 0u;
    __syncthreads();
    const unsigned int* rows = reinterpret_cast<const unsigned int*>(h0) + ((size_t)p.d * kBatchAll + p.g * kBatch) * H;
    const int n = kBatch * H;
    if (kH0Wide && H % 4 == 0 && reinterpret_cast<size_t>(rows) % 16 == 0)
        h0_exponent_of_vectors(reinterpret_cast<const uint4*>(rows), n / 4, H, red_s);
    else
        h0_exponent_of_values(rows, n, H, red_s);
    __syncthreads();
    return p.b < kBatch ? h0_exponent(red_s, p.b) : 0;
}
#endif

#if PASS == 0
// Publish h (unit j, batch b) of step `step` to the forward's exchange: its fp16/bf16 bits (SPLIT:
// the hi bits in row b, the lo bits, (h - hi) * 2^11, in row BATCH + b), tagged or packed.
__device__ __forceinline__ void publish_h(unsigned int* xch, int d, int step, int H, int b, int j, float h,
                                          unsigned int tag) {
    const unsigned short hi = half_bits(h);
    unsigned short lo = kSplit ? half_bits((h - unpack_half<kBf16>(hi)) * kLoScale) : 0;
    if constexpr (kSplitWords) lo = (lo & 0xfffeu) | bit_of_tag(tag);   // v28 (both exchanges)
    if constexpr (kTagged) {
        const int ld = exchange_ld(H);
        unsigned int* word = xch + xch_rows(d, step, H) + (size_t)b * ld + j;
        if constexpr (kSplitWords) {
            store_relaxed(word, hi | ((unsigned int)lo << 16));
            return;
        }
        store_relaxed(word, hi | (tag << 16));
        if constexpr (kSplit) store_relaxed(word + (size_t)kBatch * ld, lo | (tag << 16));
    } else {
        const int ld = packed_ld(H);
        unsigned short* value = reinterpret_cast<unsigned short*>(xch) + packed_rows(d, step, H) + (size_t)b * ld + j;
        *value = hi;
        if constexpr (kSplit) value[(size_t)kBatch * ld] = lo;
    }
}
#endif

#if PASS == 0
// v23: one output value, fp32 or (out16, uniform over the grid) the layer's 16-bit bits. The split's
// outputs are fp32 (its layers are), and its 16-warp B = 8 plan spills with the branch in it.
// v56, a replayed graph: out_at = the replay ring's fetched words {x, h0, c0, tag matched, delta}. The outputs that
// out_shift names (kMoveY: y; kMoveStates: hT and cT; those that lie in the graph's packed output buffer) are written
// delta bytes from where the capture put them, i.e. into the caller's new buffer of the same layout, so the replay
// copies nothing out. delta is 0 where the tag did not match or the host keeps the graph's own buffer.
// v58: OUT_DELTA=0 builds the plain stores (the host then copies a replay's outputs out): the spill back-off's last
// step, where the delta's registers spill a plan at its fewest register tiles (fp32 H=1024 B=16 on clusters, NVRTC)
#ifndef OUT_DELTA
#define OUT_DELTA 1
#endif
constexpr bool kOutDelta = OUT_DELTA != 0;
constexpr int kMoveY = 1, kMoveStates = 2;
__device__ __forceinline__ long long output_delta(const long long* out_at, int out_shift, int bit) {
    return out_at == nullptr || (out_shift & bit) == 0 ? 0 : out_at[4];
}

__device__ __forceinline__ long long shared_delta(const long long* deltas, int k) {   // read where used, every time
    return kOutDelta ? static_cast<const volatile long long*>(deltas)[k] : 0;
}

__device__ __forceinline__ float* byte_offset(float* out, long long bytes) {
    return reinterpret_cast<float*>(reinterpret_cast<char*>(out) + bytes);
}

__device__ __forceinline__ void store_output(float* out, size_t at, float v, int out16) {
    if (!kSplit && out16) reinterpret_cast<unsigned short*>(out)[at] = half_bits(v);
    else out[at] = v;
}

// v23: one initial-state value, fp32 or (states16) the layer's 16-bit value.
__device__ __forceinline__ float load_state(const float* state, size_t at, int states16) {
    if (!kSplit && states16) return unpack_half<kBf16>(reinterpret_cast<const unsigned short*>(state)[at]);
    return state[at];
}

// The pre-activations of (unit u, batch b): the warps' partials summed in warp order.
__device__ __forceinline__ float4 unit_sums(const float* red_s, int u, int b) {
    float4 z = make_float4(0.f, 0.f, 0.f, 0.f);
    // Partly unrolled: fully unrolled, ptxas hoists all NWARPS loads (4 registers each) and the
    // register tiles spill. The order of the sum is the same either way.
#pragma unroll 4
    for (int w = 0; w < kWarps; ++w) {
        const float4 p = *reinterpret_cast<const float4*>(red_s + (w * (kRows / 4) + u) * kRedStride + 4 * b);
        z.x += p.x; z.y += p.y; z.z += p.z; z.w += p.w;
    }
    return z;
}

// v42: float offset of (sender rank, own unit, batch column) in slot step & 1 of the cluster partials.
__device__ __forceinline__ int cluster_partial_index(int step, int rank, int unit, int b) {
    return (((step & 1) * kClusterK + rank) * kUnitsPerRank + unit) * (4 * kNPad) + 4 * b;
}

// v42: this block's sums over its warps (unit_sums) of every unit of the virtual block, each stored in the cluster
// partials of the rank that owns the unit, then the cluster barrier after which every rank reads its own.
// (v42's mbarrier arrivals per store instead of the cluster barrier measured slower: results/persistent_v42 call 6,
// code in commit 7ff2bd9.)
__device__ __forceinline__ void send_unit_sums(const float* red_s, float* cluster_s, int step) {
    if constexpr (kClustered) {
        const int rank = (int)rank_in_cluster();
        // v45: kNPad threads per unit (those of b >= B idle), so a quarter warp's float4 reads of the partials lie in
        // one unit's line (bank-conflict free) at B % 8 != 0 too
        constexpr int count = (kRows / 4) * kNPad;
        for (int i = threadIdx.x; i < count; i += kThreads) {
            const int unit = i / kNPad, b = i % kNPad;
            if (b < kBatch)
                store_remote4(cluster_s + cluster_partial_index(step, rank, unit % kUnitsPerRank, b),
                              unit / kUnitsPerRank, unit_sums(red_s, unit, b));
        }
        cluster_arrive();
        cluster_wait();
    }
}

// v42: the pre-activations of own unit u, batch b: the ranks' sums added in rank order.
__device__ __forceinline__ float4 cluster_unit_sums(const float* cluster_s, int step, int u, int b) {
    float4 z = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int r = 0; r < kClusterK; ++r) {
        const float4 p = *reinterpret_cast<const float4*>(cluster_s + cluster_partial_index(step, r, u, b));
        z.x += p.x; z.y += p.y; z.z += p.z; z.w += p.w;
    }
    return z;
}

// tiles [D][blocks][NWARPS][K_TILES][M_TILES][32] uint4; xin: xw [D][T][B][4H] fp32 (gate-interleaved,
// without biases), or with IN_K_TILES the layer input x [T][B][in_size] as 16-bit values (in_size a
// multiple of 8) and in_tiles [D][blocks][NWARPS][IN_K_TILES][M_TILES][32] the packed W_ih rows;
// bias [D][4H] (b_ih + b_hh, gate-interleaved); h0, c0, hT, cT [D][B][H]; y [T][B][ldy] (direction d
// at columns d*H); gates_out [D][T][B][4H] activated, cells_out [D][T][B][H] (both null at
// inference); xch zeroed: [D][2][kXchRows][exchange_ld(H)] tagged words (TAGGED=1; v28 split: B rows) or
// [D][2][kVecRows][packed_ld(H)] 16-bit values (TAGGED=0); barrier: a zeroed word (the split grid
// barrier of the grid.sync plans with IN_K_TILES); w_unscale [D]: SPLIT, the factor that undoes the
// power-of-two scale of the packed W_hh halves (null otherwise); x_at: v21, see below (null otherwise);
// out_at, out_shift: v56, see output_delta (null, 0 otherwise);
// out16: v23, y, hT and cT are stored as the layer's 16-bit values (the bits of the exchange, round
// to nearest even: what a cast of the fp32 outputs would give) instead of fp32, so an inference
// forward whose caller wants 16-bit outputs needs no cast kernel after this one (6-22 us at T=256);
// states16: v23, h0 and c0 are read as the layer's 16-bit values (no conversion kernels before it).
// SPLIT: h0 is h0 itself, published per batch column scaled by a power of two into the split's range (v34,
// H0_IN_PRODUCT), or (H0_IN_PRODUCT=0) the fp32 product W_hh h0 [D][B][4H] (gate-interleaved; h0 is unbounded,
// fp16 is not), added at step 0 (v32; before, the host added it to xw); v29, SPLIT with IN_K_TILES (no xw): xin the
// split input (see kInTileU4), in_tiles W_ih's hi fragments, w_unscale [D][2].
// xw_row_exp [T][B], xw_col_exp [D][4H]: v32, SPLIT without IN_K_TILES, xw as the fp16-split GEMM left
// it (gpu_blas.matmul_fp16_split3 without its unscale pass): xw[t][b][r] is brought back as
// ldexpf(xw, xw_row_exp[t][b] + xw_col_exp[d][r]) where it is loaded, exact, as the pass did (null: xw
// is unscaled). xw_part: v51, INPUT_PART's GEMM share of x W_ih^T (null otherwise).
extern "C" __global__ void ECORNN_MMA_CLUSTER __launch_bounds__(kThreads, 1)
persistent_lstm_fwd(const uint4* __restrict__ tiles, const float* __restrict__ xin,
                    const float* __restrict__ h0, const float* __restrict__ c0, float* y, float* hT,
                    float* cT, float* gates_out, float* cells_out, int T, int H, int units,
                    int blocks_per_dir, int ldy, int dir0, unsigned int* xch, const float* __restrict__ bias,
                    const uint4* __restrict__ in_tiles, int in_size, unsigned int* barrier,
                    const float* __restrict__ w_unscale, const long long* __restrict__ x_at, int out16,
                    int states16, const int* __restrict__ xw_row_exp, const int* __restrict__ xw_col_exp,
                    const float* __restrict__ xw_part, const long long* __restrict__ out_at, int out_shift) {
    block_mark(0, kMarkEntryNs, true);   // v57 (STEP_CLOCKS): the prologue's start
    extern __shared__ __align__(16) uint4 smem[];
    const Carve s = carve(smem);
    const Slot p = slot_of(H, units, blocks_per_dir, dir0);
    // v56: a replay's outputs in the caller's new buffer (output_delta). The deltas are read from shared memory where
    // the outputs are stored: pointers moved here, or out_at read there, stayed live over the loop (+2-24 registers,
    // spills in two check builds)
    __shared__ long long out_delta[2];   // y's, hT's and cT's
    if (kOutDelta && threadIdx.x < 2) out_delta[threadIdx.x] = output_delta(out_at, out_shift, threadIdx.x == 0 ? kMoveY : kMoveStates);
    // v34: h0 scaled per batch column, before the register tiles load (live over the reduction, they spilled the
    // B=8 plan); h0 is "step -1": slot 1 (tagged: tag 1; h_t of step t gets tag t + 2). (v57 loaded the thread's own
    // h0 with the exponents' loads and read the delta after the tiles': the prologue -0.26 us, ~0.001 us/step;
    // reverted with v44's unexplained failure in call 13, results/persistent_v57)
    if constexpr (kH0InProduct) {
        const int h0_exp = h0_column_exponent(h0, s.red, p, H);
        if (p.active) publish_h(xch, p.x, -1, H, p.b, p.j, ldexpf(h0[p.state_at], -h0_exp), 1u);
    }
    RegTiles a_reg;
    load_tiles(a_reg, s.a, tiles, p.tile);
    InRegTiles in_reg;   // v52
    if constexpr (kInput)
        load_fragment_tiles<kInKTiles, kInRegKTiles, kMTiles>(in_reg, s.in_a, in_tiles + p.tile * kInTileU4);   // v52
    // v21, a replayed graph: x_at = the replay ring's fetched {x, h0, c0, tag matched}; the kernel
    // reads the caller's x there instead of a copy (xin, NaN-filled, when the tag did not match).
    const bool x_by_reference = kInput && x_at != nullptr && x_at[3] != 0;
    const unsigned short* x_layer = reinterpret_cast<const unsigned short*>(
        x_by_reference ? reinterpret_cast<const float*>(x_at[0]) : xin);
    if constexpr (kInput && X_PREFETCH)
        prefetch_to_l2(x_layer, (size_t)T * kGroups * kVecRows * in_size * sizeof(unsigned short));
    const unsigned short* x16 = x_layer + (size_t)p.g * kBatch * in_size;   // v30: the group's first row
    const SplitInput sx = split_input(xin, T, in_size);   // v29 (SPLIT with IN_K_TILES only)
    const size_t x_step = (size_t)kBatchAll * in_size;     // x_t's row offset
    float c = p.active ? load_state(c0, p.state_at, states16) : 0.0f;   // cell state stays in this thread's register
    const size_t G = 4 * (size_t)H;
    // The unit's 4 gate biases, added here rather than to all of xw by a kernel of its own.
    const float4 b4 = p.active ? __ldg(reinterpret_cast<const float4*>(bias + p.d * G + 4 * (size_t)p.j))
                               : make_float4(0.f, 0.f, 0.f, 0.f);
    // split: [D] W_hh unscale factors, or (v29, with the projection) [D][2] of W_hh and W_ih
    const float unscale = kSplit ? w_unscale[kInput ? 2 * p.d : p.d] : 1.0f;
    const float input_ratio = kSplit && kInput ? w_unscale[2 * p.d + 1] / unscale : 1.0f;
    const float lo_product_unscale = kSplit && kInput ? w_unscale[2 * p.d + 1] * (1.0f / kLoScale) : 1.0f;
    const bool xw_scaled = kSplit && !kInput && xw_row_exp != nullptr;   // v32
    // h0 is "step -1" (above with H0_IN_PRODUCT); the split without it starts from 0 (h0 is then W_hh h0, added at step 0)
    if (!kH0InProduct && p.active) publish_h(xch, p.x, -1, H, p.b, p.j, kSplit ? 0.0f : load_state(h0, p.state_at, states16), 1u);
    cg::grid_group grid = cg::this_grid();
    constexpr bool kSplitBarrier = !kTagged && (SPLIT_BARRIER != 0 || kGroupBarriers);
    unsigned int* const counter = barrier_of(barrier, p.x);
    const unsigned int arrivals = barrier_blocks(blocks_per_dir);
    if constexpr (kSplitBarrier) grid_arrive(counter);   // every block's h0 is published ...
    else __syncthreads();
    Acc acc;   // kInput: this warp's slice of the next step's input product
    // v51 (INPUT_PART): the unit's 4 xw_part values of the next step, loaded in the window after the publish (at the
    // step's top their round trip sat on the pointwise: whole forwards 0.2-0.3 us/step slower, call 7)
    float4 xw_next = make_float4(0.f, 0.f, 0.f, 0.f);
    if constexpr (kInput) {   // (the W_ih tiles are in shared memory after the block barrier above)
        const int t0 = p.reverse ? T - 1 : 0;
        if (kInputPart && p.active) xw_next = load_xw_part(xw_part, p, T, H, t0);
        stage_input(s.xs, x16 + t0 * x_step, sx.lo + t0 * x_step, in_size);
        input_product(acc, in_reg, s.in_a, s.xs);
        ColumnFactors first;
        load_column_factors(first, sx.factors + (size_t)t0 * kBatch, input_ratio);
        input_in_recurrent_units(acc, first);
    }
    if constexpr (kSplitBarrier) grid_wait(counter, 1u, arrivals);   // ... round 1
    else if constexpr (!kTagged) grid.sync();
    if constexpr (kClustered) {   // v42: every rank started before any stores into its shared memory
        cluster_arrive();
        cluster_wait();
    }
    for (int step = 0; step < T; ++step) {
        const int t = p.reverse ? T - 1 - step : step;
        const int t_next = p.reverse ? t - 1 : t + 1;
        block_mark(step, kMarkTop);
        block_mark(step, kMarkTopNs, true);
        const size_t row = ((size_t)p.d * T + t) * kBatchAll + batch_column(p);
        ColumnFactors next_factors;   // v29 split: x_{t+1}'s, for the input product in the wait
        if (kInput && step + 1 < T) load_column_factors(next_factors, sx.factors + (size_t)t_next * kBatch, input_ratio);
        // Issued now, used after the product: the loads' latency hides behind it.
        float4 xz = b4, xw4 = make_float4(0.f, 0.f, 0.f, 0.f);
        int row_exp = 0;
        int4 col_exp = make_int4(0, 0, 0, 0);
        if ((!kInput || kInputPart) && p.active) {
            xw4 = kInputPart ? xw_next : __ldg(reinterpret_cast<const float4*>(xin + row * G + 4 * (size_t)p.j));
            if (xw_scaled) {   // the unit's 4 column exponents are loaded per step: registers are short at B=8
                row_exp = __ldg(xw_row_exp + (size_t)t * kBatchAll + batch_column(p));
                col_exp = __ldg(reinterpret_cast<const int4*>(xw_col_exp + p.d * G + 4 * (size_t)p.j));
            }
            if constexpr (kXwAtLoad) {   // v32's place (the ablation; sm_80)
                if (xw_scaled) xw4 = unscaled(xw4, row_exp, col_exp);
                xz = make_float4(xw4.x + b4.x, xw4.y + b4.y, xw4.z + b4.z, xw4.w + b4.w);
            }
        }
        if (kSplit && kInput && p.active) {   // v29: x_hi . W_lo^T, scaled
            const float f = sx.factors[(size_t)t * kBatch + p.b] * lo_product_unscale;
            const float4 x4 = __ldg(reinterpret_cast<const float4*>(sx.lo_product + row * G + 4 * (size_t)p.j));
            xz = make_float4(fmaf(x4.x, f, b4.x), fmaf(x4.y, f, b4.y), fmaf(x4.z, f, b4.z), fmaf(x4.w, f, b4.w));
        }
        if constexpr (kTagged) {   // h_{step-1} (h0 at step 0): slot (step-1) & 1, tag step+1
            tagged_product(s.red, s.vec, a_reg, s.a, xch + xch_rows(p.x, step - 1, H), H, (step + 1) & 0xffffu,
                           acc, step);
        } else {   // h_{step-1} (h0 at step 0), packed by the step before
            packed_product(s.red, s.vec, a_reg, s.a,
                           reinterpret_cast<const unsigned short*>(xch) + packed_rows(p.x, step - 1, H), H, acc,
                           step);
        }
        send_unit_sums(s.red, s.cluster, step);   // v42 (clustered plans only)
        if (p.active) {
            const float4 z = kClustered ? cluster_unit_sums(s.cluster, step, p.u, p.b) : unit_sums(s.red, p.u, p.b);
            // v33: xw unscaled (v32) and biased here, after the product, not where loaded (where its ldexpf can
            // wait for the exponents before the step's polls, as the grid kernel's SASS showed): fp32 H=1024 B=4,
            // B=8 and H=1536 B=4 forwards 0.03-0.14 us/step faster (results/persistent_v33, call 10)
            if ((!kInput || kInputPart) && !kXwAtLoad) {
                if (xw_scaled) xw4 = unscaled(xw4, row_exp, col_exp);
                xz = make_float4(xw4.x + b4.x, xw4.y + b4.y, xw4.z + b4.z, xw4.w + b4.w);
            }
            if (kSplit && !kH0InProduct && step == 0) {   // W_hh h0 (in h0's place); read here, once: no registers held for it
                const float4 r = __ldg(reinterpret_cast<const float4*>(h0 + ((size_t)p.d * kBatchAll + batch_column(p)) * G + 4 * (size_t)p.j));
                xz = make_float4(xz.x + r.x, xz.y + r.y, xz.z + r.z, xz.w + r.w);
            }
            // v34: the step-0 product with h0's exponent back (powers of two: exact), read where the prologue left it
            const float zs = kH0InProduct && step == 0 ? ldexpf(unscale, h0_exponent(s.red, p.b)) : unscale;
            const float gi = gate_sigmoid(fmaf(z.x, zs, xz.x)), gf = gate_sigmoid(fmaf(z.y, zs, xz.y));
            const float gg = gate_tanh(fmaf(z.z, zs, xz.z)), go = gate_sigmoid(fmaf(z.w, zs, xz.w));
            c = gf * c + gi * gg;
            const float h = go * gate_tanh(c);
            if (step + 1 < T) publish_h(xch, p.x, step, H, p.b, p.j, h, (step + 2) & 0xffffu);
            // v56: y after the publish, so that its delta's shared-memory read does not hold the publish back
            store_output(byte_offset(y, shared_delta(out_delta, 0)),
                         ((size_t)t * kBatchAll + batch_column(p)) * ldy + (size_t)p.d * H + p.j, h, out16);
            if (gates_out != nullptr) {
                *reinterpret_cast<float4*>(gates_out + row * G + 4 * (size_t)p.j) = make_float4(gi, gf, gg, go);
                cells_out[row * H + p.j] = c;
            }
            if (step == T - 1) {
                const long long states_delta = shared_delta(out_delta, 1);   // v56
                store_output(byte_offset(hT, states_delta), p.state_at, h, out16);
                store_output(byte_offset(cT, states_delta), p.state_at, c, out16);
            }
        }
        block_mark(step, kMarkPointwise);
        block_mark(step, kMarkPublishedNs, true);
        if constexpr (kSplitBarrier) grid_arrive(counter);   // h_t published (also orders the reads of red)
        if (kInput && step + 1 < T) {   // the next step's input product while the other blocks finish
            if (kInputPart && p.active) xw_next = load_xw_part(xw_part, p, T, H, t_next);
            if (kXStageEvery <= 1 || (step + 1) % kXStageEvery == 0)   // v55's diagnostic: every step unless set
                stage_input(s.xs, x16 + t_next * x_step, sx.lo + t_next * x_step, in_size);
            input_product(acc, in_reg, s.in_a, s.xs);
            input_in_recurrent_units(acc, next_factors);
        }
        if constexpr (kSplitBarrier) grid_wait(counter, step + 2u, arrivals);
        else if constexpr (!kTagged) grid.sync();   // also orders this step's reads of red before the next stores
        block_mark(step, kMarkEnd);
    }
    flush_marks(T);
}
#else
// The step's BwdInputs; dy as fp32 or (dy16, v31) the layer's 16-bit values.
__device__ __forceinline__ BwdInputs load_mma_bwd_inputs(const float* gates, const float* cells, const float* c0,
                                                         const float* dy, int dy16, const Slot& p, int T, int H,
                                                         int ldy, int step) {
    const int b = batch_column(p);
    BwdInputs in = load_bwd_saved<kBatchAll>(gates, cells, c0, p.d, T, H, step, p.reverse, b, p.j);
    const size_t at = dy_index(kBatchAll, p.d, T, H, ldy, step, p.reverse, b, p.j);
    in.dy = dy16 ? unpack_half<kBf16>(__ldg(reinterpret_cast<const unsigned short*>(dy) + at)) : __ldg(dy + at);
    return in;
}

// dh of (unit u, batch b) from the recurrence: the warps' partials summed in warp order.
__device__ __forceinline__ float unit_sum(const float* red_s, int u, int b) {
    float s = 0.0f;
#pragma unroll 4
    for (int w = 0; w < kWarps; ++w) s += red_s[(w * kRows + u) * kRedStride + b];
    return s;
}

// tiles: packed W_hh^T rows (unit j's column of the gate-interleaved W_hh, K = 4H);
// dy [T][B][ldy] (direction d at columns d*H); gates [D][T][B][4H] activated, cells [D][T][B][H];
// c0, dhT, dcT, dh0, dc0 [D][B][H]; dz [D][T][B][4H] gate-interleaved output, fp32 or (v30, dz16) the
// layer's 16-bit values (the bits of the exchange: what the 16-bit GEMMs after the kernel take, so no
// conversion pass; v31 tried dz gate-blocked, 4 two-byte stores per thread: the kernel measured the
// same, not kept); dy16: dy holds the layer's 16-bit values (v31: the caller's dy, or the layer above's
// 16-bit dX);
// xch zeroed: [D][2][B][4H] tagged words (TAGGED=1) or 16-bit values (TAGGED=0);
// barrier: zeroed words, a counter per (direction, group) 32 words apart (v30, GROUP_BARRIERS only).
extern "C" __global__ void __launch_bounds__(kThreads, 1)
persistent_lstm_bwd(const uint4* __restrict__ tiles, const float* __restrict__ dy,
                    const float* __restrict__ gates, const float* __restrict__ cells,
                    const float* __restrict__ c0, const float* __restrict__ dhT,
                    const float* __restrict__ dcT, float* dz, float* dh0, float* dc0, int T, int H,
                    int units, int blocks_per_dir, int ldy, int dir0, unsigned int* xch, int dz16,
                    int dy16, unsigned int* barrier) {
    extern __shared__ __align__(16) uint4 smem[];
    const Carve s = carve(smem);
    const Slot p = slot_of(H, units, blocks_per_dir, dir0);
    if (kLateLoads && dy16) prefetch_to_l2(dy, (size_t)T * kBatchAll * ldy * sizeof(unsigned short));
    RegTiles a_reg;
    load_tiles(a_reg, s.a, tiles, p.tile);
    float dc_next = 0.0f, dh_rec = 0.0f;   // dh_rec: W_hh^T . dz of the step after (dhT first)
    BwdInputs in{};
    if (p.active) {
        dc_next = dcT[p.state_at];
        dh_rec = dhT[p.state_at];
        in = load_mma_bwd_inputs(gates, cells, c0, dy, dy16, p, T, H, ldy, T - 1);
    }
    __syncthreads();
    cg::grid_group grid = cg::this_grid();
    const size_t G = 4 * (size_t)H;
    for (int step = T - 1; step >= 0; --step) {
        const int t = p.reverse ? T - 1 - step : step;
        if (p.active) {
            const float tc = tanh_fast(in.c);
            float dc;
            const float4 out = pointwise_backward(in, in.dy + dh_rec, tc, dc_next, dc);
            const uint2 out16 = make_uint2(pack_pair<kBf16>(out.x, out.y), pack_pair<kBf16>(out.z, out.w));
            const size_t dz_at = (((size_t)p.d * T + t) * kBatchAll + batch_column(p)) * G + 4 * (size_t)p.j;
            if (dz16) *reinterpret_cast<uint2*>(reinterpret_cast<unsigned short*>(dz) + dz_at) = out16;   // v30
            else *reinterpret_cast<float4*>(dz + dz_at) = out;
            if constexpr (!kTagged) {   // the packed copy the blocks stage after the barrier
                unsigned short* q = reinterpret_cast<unsigned short*>(xch) + packed_rows(p.x, T - 1 - step, (int)G)
                                    + (size_t)p.b * packed_ld((int)G) + 4 * (size_t)p.j;
                *reinterpret_cast<uint2*>(q) = out16;
            }
            if constexpr (kTagged) {   // iteration T-1-step publishes with tag T-step
                const unsigned int tag = (T - step) & 0xffffu;
                store_relaxed4(xch + xch_rows(p.x, T - 1 - step, (int)G) + (size_t)p.b * G + 4 * (size_t)p.j,
                               make_uint4(tagged_word(out.x, tag), tagged_word(out.y, tag),
                                          tagged_word(out.z, tag), tagged_word(out.w, tag)));
            }
            dc_next = dc * in.g.y;
            if (!kLateLoads && step > 0)
                in = load_mma_bwd_inputs(gates, cells, c0, dy, dy16, p, T, H, ldy, step - 1);
        }
        Acc acc;
        if constexpr (kTagged) {
            tagged_product(s.red, s.vec, a_reg, s.a, xch + xch_rows(p.x, T - 1 - step, (int)G), (int)G,
                           (T - step) & 0xffffu, acc);
        } else {
            if constexpr (kGroupBarriers) {   // v30: the group's blocks only; round T - step
                grid_arrive(barrier_of(barrier, p.x));
                grid_wait(barrier_of(barrier, p.x), (unsigned int)(T - step), barrier_blocks(blocks_per_dir));
            } else {
                grid.sync();   // dz_t of every block is written; also orders red reads before the next stores
            }
            if (kLateLoads && p.active && step > 0)   // v31: not in flight at the barrier's fence
                in = load_mma_bwd_inputs(gates, cells, c0, dy, dy16, p, T, H, ldy, step - 1);
            packed_product(s.red, s.vec, a_reg, s.a,
                           reinterpret_cast<const unsigned short*>(xch) + packed_rows(p.x, T - 1 - step, (int)G), (int)G,
                           acc);
        }
        if (p.active) dh_rec = unit_sum(s.red, p.u, p.b);
    }
    if (p.active) {
        dh0[p.state_at] = dh_rec;
        dc0[p.state_at] = dc_next;
    }
}
#endif
