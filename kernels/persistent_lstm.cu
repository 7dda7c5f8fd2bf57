// Persistent LSTM recurrence: one cooperative kernel runs every timestep of one layer (all its
// directions). Each block owns whole hidden units and keeps its slice of the recurrent matrix on
// chip for the whole sequence: the first REG_COLS columns of each lane in registers (fully
// unrolled, compile-time indices), the rest in shared memory. h (forward) or dz (backward) travels
// through L2 between steps.
//
// PASS=0 forward:  z[4U x B] = W_hh[own gate rows] . h_{t-1} + xw_t, pointwise, write h_t.
// PASS=1 backward: dh_{t-1}[U x B] = W_hh[:, own units]^T . dz_t; the pointwise step of the own
//                  units makes dz_t (published to global) from dh, dc and the saved gates.
//
// Lane mapping inside a warp: lane = r * LANE_K + kk; r picks the rows rl*LANE_ROWS + r, kk a
// strided subset of the warp's columns (k = warp*WARP_COLS + i*LANE_K + kk). The packed weight
// layout is [block][warp][i][rl][lane] (layouts/persistent.py: pack_block_rows); the matvec and
// tile-loading helpers shared with persistent_cluster.cu are in persistent_common.cuh.
//
// v6: the step's vector goes through an exchange buffer xch [D][2][COLS][B] (fp32 bits, slot =
// step parity) laid out [k][b] like the shared-memory vector, so a warp copies its own K-slice
// (the only columns it multiplies) with 16-byte loads, all in flight at once, straight into shared
// memory: one L2 round trip, no transposition, and no __syncthreads before the product (v2 loaded
// the vector scalar by scalar, 4 loads in flight, then synchronised the block). The pointwise
// threads sum the warps' partials themselves (v2 had one more pass and __syncthreads for that).
// Exchanges: TAGGED=0, one grid.sync() per step (h0 is published before the loop, then one more
// grid.sync()); TAGGED=1, no grid barrier: the lowest mantissa bit of every published word is a
// tag that alternates per use of a slot, and a warp polls its slice (relaxed gpu-scope loads)
// until every word carries the awaited tag. One bit suffices: while a block waits for slot s, no
// producer can be more than one publication ahead (it would need this block's next vector), so a
// word holds either the awaited value or the slot's previous one. The vector the product sees is
// then rounded to 22 mantissa bits (relative error <= 2^-22; y, hT and dz keep the exact values).
// Per-step partials alternate between two buffers, so without a grid barrier a fast warp's next
// product cannot overwrite partials a pointwise thread still reads. The host zeroes xch before
// each launch (zero padding words, never awaited; tags start at 1). Polling re-reads the slice
// until it is complete, so the tagged exchange only pays for small slices
// (persistent_capacity.tagged_exchange_pays).
//
// v15, IN_COLS > 0 (forward): the block computes x_t W_ih^T of its own gate rows itself instead of
// reading xw from a GEMM before the kernel. W_ih's rows sit in registers with the W_hh lane
// mapping (IN_COLS columns per lane, K = the layer input, zero padded); a warp stages its K-slice
// of x_{t+1} ([B][in_size] rows, loaded at the top of step t) into shared memory [k][b] after the
// block published h_t and multiplies it into per-lane partials, to which the next step's W_hh
// product is added before the lane and warp sums (one reduction for both); the pointwise adds the
// bias. Under the tagged exchange that product runs while the other blocks still compute h_t;
// under grid.sync it runs before the barrier (tests and the ablation only:
// capacity.input_projection_pays).
//
// ecornn-persistent
// Check lines: the capacity model's H100 plans fwd H=1024 B=4 and B=8, H=1536 B=4 (shared-memory
// columns), H=1280 B=16 (5 rows per lane), H=397 B=3 (odd slices: the word-by-word staging), bwd
// H=1024 B=4, H=256 B=1, B=1 with shared-memory columns; then the other exchange of three of them.
// ecornn-check: -DPASS=0 -DBATCH=4 -DNWARPS=16 -DLANE_ROWS=16 -DROWS_PER_LANE=2 -DCOLS_PER_LANE=32 -DREG_COLS=32 -DTAGGED=1 -DKERNEL_BIAS=1
// ecornn-check: -DPASS=0 -DBATCH=8 -DNWARPS=16 -DLANE_ROWS=16 -DROWS_PER_LANE=2 -DCOLS_PER_LANE=32 -DREG_COLS=32 -DTAGGED=1
// ecornn-check: -DPASS=0 -DBATCH=4 -DNWARPS=16 -DLANE_ROWS=16 -DROWS_PER_LANE=3 -DCOLS_PER_LANE=48 -DREG_COLS=22 -DTAGGED=1
// ecornn-check: -DPASS=0 -DBATCH=16 -DNWARPS=8 -DLANE_ROWS=8 -DROWS_PER_LANE=5 -DCOLS_PER_LANE=40 -DREG_COLS=24 -DTAGGED=0
// ecornn-check: -DPASS=0 -DBATCH=3 -DNWARPS=16 -DLANE_ROWS=16 -DROWS_PER_LANE=1 -DCOLS_PER_LANE=13 -DREG_COLS=13 -DTAGGED=1 -DKERNEL_BIAS=1
// ecornn-check: -DPASS=1 -DBATCH=4 -DNWARPS=16 -DLANE_ROWS=8 -DROWS_PER_LANE=1 -DCOLS_PER_LANE=64 -DREG_COLS=64 -DTAGGED=0
// ecornn-check: -DPASS=1 -DBATCH=1 -DNWARPS=16 -DLANE_ROWS=2 -DROWS_PER_LANE=1 -DCOLS_PER_LANE=4 -DREG_COLS=4 -DTAGGED=1
// ecornn-check: -DPASS=1 -DBATCH=1 -DNWARPS=16 -DLANE_ROWS=4 -DROWS_PER_LANE=1 -DCOLS_PER_LANE=32 -DREG_COLS=16 -DTAGGED=0
// ecornn-check: -DPASS=0 -DBATCH=4 -DNWARPS=16 -DLANE_ROWS=16 -DROWS_PER_LANE=2 -DCOLS_PER_LANE=32 -DREG_COLS=32 -DTAGGED=0 -DKERNEL_BIAS=1
// ecornn-check: -DPASS=0 -DBATCH=8 -DNWARPS=16 -DLANE_ROWS=16 -DROWS_PER_LANE=2 -DCOLS_PER_LANE=32 -DREG_COLS=32 -DTAGGED=0
// ecornn-check: -DPASS=1 -DBATCH=4 -DNWARPS=16 -DLANE_ROWS=8 -DROWS_PER_LANE=1 -DCOLS_PER_LANE=64 -DREG_COLS=64 -DTAGGED=1
// v32, the late loads: the grid.sync backward at B=4 (H=512) and B=1 (H=1024).
// ecornn-check: -DPASS=1 -DBATCH=4 -DNWARPS=16 -DLANE_ROWS=8 -DROWS_PER_LANE=1 -DCOLS_PER_LANE=64 -DREG_COLS=64 -DTAGGED=0 -DBWD_LATE_LOADS=1
// ecornn-check: -DPASS=1 -DBATCH=1 -DNWARPS=16 -DLANE_ROWS=4 -DROWS_PER_LANE=1 -DCOLS_PER_LANE=32 -DREG_COLS=16 -DTAGGED=0 -DBWD_LATE_LOADS=1
// v15 (input projection in the kernel): H=512 B=4 tagged, bidirectional layer 2 (input 2H), B=1, B=3
// with odd slices, grid.sync.
// ecornn-check: -DPASS=0 -DBATCH=4 -DNWARPS=16 -DLANE_ROWS=16 -DROWS_PER_LANE=1 -DCOLS_PER_LANE=16 -DREG_COLS=16 -DTAGGED=1 -DIN_COLS=16
// ecornn-check: -DPASS=0 -DBATCH=4 -DNWARPS=16 -DLANE_ROWS=16 -DROWS_PER_LANE=1 -DCOLS_PER_LANE=16 -DREG_COLS=16 -DTAGGED=1 -DIN_COLS=32
// ecornn-check: -DPASS=0 -DBATCH=1 -DNWARPS=16 -DLANE_ROWS=16 -DROWS_PER_LANE=1 -DCOLS_PER_LANE=16 -DREG_COLS=16 -DTAGGED=1 -DIN_COLS=16
// ecornn-check: -DPASS=0 -DBATCH=3 -DNWARPS=16 -DLANE_ROWS=16 -DROWS_PER_LANE=1 -DCOLS_PER_LANE=13 -DREG_COLS=13 -DTAGGED=1 -DIN_COLS=3
// ecornn-check: -DPASS=0 -DBATCH=4 -DNWARPS=16 -DLANE_ROWS=16 -DROWS_PER_LANE=1 -DCOLS_PER_LANE=16 -DREG_COLS=16 -DTAGGED=0 -DIN_COLS=16
// v16 (the first poll's delay): H=512 B=1 with the projection, H=768 B=2.
// ecornn-check: -DPASS=0 -DBATCH=1 -DNWARPS=16 -DLANE_ROWS=16 -DROWS_PER_LANE=1 -DCOLS_PER_LANE=16 -DREG_COLS=16 -DTAGGED=1 -DIN_COLS=16 -DPOLL_DELAY_NS=250
// ecornn-check: -DPASS=0 -DBATCH=2 -DNWARPS=16 -DLANE_ROWS=8 -DROWS_PER_LANE=3 -DCOLS_PER_LANE=12 -DREG_COLS=12 -DTAGGED=1 -DPOLL_DELAY_NS=250 -DKERNEL_BIAS=1
// v23 (the kernel adds the biases, KERNEL_BIAS=1 on the lines above where the model sets it): H=512 B=4.
// ecornn-check: -DPASS=0 -DBATCH=4 -DNWARPS=16 -DLANE_ROWS=16 -DROWS_PER_LANE=1 -DCOLS_PER_LANE=16 -DREG_COLS=16 -DTAGGED=1 -DKERNEL_BIAS=1
// v41 (GROUPS, the backward in batch groups): the H100 plans of H=256 B=16 in 8 groups of 2 (tagged), H=512 B=32 in 8
// of 4 (columns in shared memory; 28 register columns, where the engine's back-off lands: 36 spill), H=768 B=16 in 2
// of 8 (8 warps, 3 rows per lane, grid.sync, late loads: the engine's build after 4 groups spill), H=128 B=64 in 16 of 4.
// ecornn-check: -DPASS=1 -DBATCH=2 -DNWARPS=16 -DLANE_ROWS=16 -DROWS_PER_LANE=1 -DCOLS_PER_LANE=32 -DREG_COLS=32 -DTAGGED=1 -DGROUPS=8
// ecornn-check: -DPASS=1 -DBATCH=4 -DNWARPS=16 -DLANE_ROWS=16 -DROWS_PER_LANE=2 -DCOLS_PER_LANE=64 -DREG_COLS=28 -DTAGGED=1 -DGROUPS=8
// ecornn-check: -DPASS=1 -DBATCH=8 -DNWARPS=8 -DLANE_ROWS=4 -DROWS_PER_LANE=3 -DCOLS_PER_LANE=48 -DREG_COLS=48 -DTAGGED=0 -DBWD_LATE_LOADS=1 -DGROUPS=2
// ecornn-check: -DPASS=1 -DBATCH=4 -DNWARPS=16 -DLANE_ROWS=16 -DROWS_PER_LANE=1 -DCOLS_PER_LANE=16 -DREG_COLS=16 -DTAGGED=1 -DGROUPS=16
#include <cooperative_groups.h>

#include "persistent_common.cuh"

namespace cg = cooperative_groups;

#ifndef TAGGED
#define TAGGED 0
#endif
#ifndef IN_COLS
#define IN_COLS 0
#endif
#ifndef POLL_DELAY_NS   // v16: tagged forwards at B <= 2 sleep this long before a warp's first poll
#define POLL_DELAY_NS 0
#endif
#ifndef GROUPS          // v41 (backward): the batch as GROUPS groups of BATCH columns, each on blocks of its own
#define GROUPS 1
#endif

constexpr bool kTagged = TAGGED != 0;
constexpr int kBatch = BATCH;
// v41, GROUPS > 1 (backward only): the layer's batch is GROUPS x BATCH columns. Group g runs on blocks of its
// own (a grid of GROUPS x the blocks of one group, like two directions) with its own exchange region, as if it
// were a layer of batch BATCH: each block owns GROUPS x the units of the ungrouped plan and stages only its
// group's dz (the ungrouped fp32 backward staged the whole batch's 4H x B words per block per step). The
// saved gates and cells, dy, dz and the states keep the layer's [.][GROUPS * BATCH][.] rows.
constexpr int kGroups = GROUPS;
constexpr int kBatchAll = GROUPS * BATCH;
static_assert(GROUPS == 1 || PASS == 1, "GROUPS: the backward only");
constexpr int kWarps = NWARPS;
constexpr int kThreads = 32 * NWARPS;
constexpr int kLaneRows = LANE_ROWS;
constexpr int kLaneK = 32 / LANE_ROWS;
constexpr int kRowsPerLane = ROWS_PER_LANE;
constexpr int kRows = ROWS_PER_LANE * LANE_ROWS;        // padded rows per block
constexpr int kRegCols = REG_COLS;
constexpr int kSmemCols = COLS_PER_LANE - REG_COLS;
constexpr int kWarpCols = COLS_PER_LANE * kLaneK;
constexpr int kCols = kWarpCols * NWARPS;               // padded reduction length

static_assert(32 % LANE_ROWS == 0, "LANE_ROWS must divide 32");
static_assert(IN_COLS == 0 || PASS == 0, "the input projection runs in the forward kernel only");

// v15: W_ih columns per lane (all in registers), the staged x_t [k][b] (kInSliceWords per warp,
// after the partials in shared memory) and each lane's share of its warp's slice in flight.
constexpr int kInCols = IN_COLS;
constexpr bool kInput = kInCols > 0;
constexpr int kInWarpCols = kInCols * kLaneK;
constexpr int kInSliceWords = kInWarpCols * kBatch;
constexpr int kInPerLane = kInput ? (kInSliceWords + 31) / 32 : 1;
static_assert(REG_COLS <= COLS_PER_LANE, "REG_COLS must not exceed COLS_PER_LANE");
static_assert(PASS == 1 || kRows % 4 == 0, "forward rows come in whole units of 4 gates");

// Shared memory carve-up (floats): vector [k][b] | smem weights | warp partials (tagged: two
// buffers by step parity; grid.sync() orders one buffer's reuse, and a computed buffer offset
// spilled the B=16 plan).
constexpr int kVecFloats = kCols * kBatch;
constexpr int kWsFloats = kWarps * kSmemCols * kRowsPerLane * 32;
constexpr int kRedFloats = kWarps * kBatch * kRows;
constexpr int kSliceWords = kWarpCols * kBatch;         // one warp's K-slice of the vector
constexpr int kStageChunk = 4;                          // 16-byte loads per lane in flight
static_assert(kVecFloats % 4 == 0 && kWsFloats % 4 == 0 && kRedFloats % 4 == 0, "16-byte aligned carve-up");
constexpr int kRedBuffers = kTagged ? 2 : 1;
// v23, KERNEL_BIAS=1 (forward without IN_COLS): the unit's 4 biases stay in registers and are
// added to xw after the product, as the add kernel they replace did (xw + b, then + the product).
// Read from shared memory at each gate instead, each read sat on the critical path (+0.13 us/step at
// fp32 H=512 B=4); plans without 4 spare registers go without (persistent_capacity.with_kernel_bias).
#ifndef KERNEL_BIAS
#define KERNEL_BIAS 0
#endif
constexpr bool kKernelBias = PASS == 0 && KERNEL_BIAS != 0 && IN_COLS == 0;

// ---- the exchange (see the header) ----
// Slot n & 1 of direction d (n: publications so far in processing order; h0 is n = 0).
__device__ __forceinline__ size_t xch_slot(int d, int n) { return ((size_t)d * 2 + (n & 1)) * kVecFloats; }

// The tag of publication n: 1 at each slot's first use (the host zeroed xch), then alternating.
__device__ __forceinline__ unsigned int xch_tag(int n) { return 1u ^ ((unsigned int)(n >> 1) & 1u); }

// Publish value v as word k*B + b of slot n (tagged: its lowest bit replaced by the tag).
__device__ __forceinline__ void publish(unsigned int* xch, int d, int n, int k, int b, float v) {
    unsigned int* p = xch + xch_slot(d, n) + (size_t)k * kBatch + b;
    if constexpr (kTagged) store_relaxed(p, (__float_as_uint(v) & ~1u) | xch_tag(n));
    else *p = __float_as_uint(v);
}

// Whether the words of quad q (words 4q..4q+3 of the warp's slice) that hold real columns
// (k < k_len; the rest is zero padding, never published) carry the tag.
__device__ __forceinline__ bool quad_ready(const uint4& v, int first_word, int k_len, unsigned int tag) {
    const unsigned int w[4] = {v.x, v.y, v.z, v.w};
    bool ready = true;
#pragma unroll
    for (int j = 0; j < 4; ++j)
        if ((first_word + j) / kBatch < k_len) ready &= ((w[j] ^ tag) & 1u) == 0;
    return ready;
}

// Copy this warp's K-slice of the exchange slot src into vec_s (same [k][b] layout). Tagged:
// reload a chunk until every real word of it carries `tag`. The loads of a chunk are all issued
// before any is used: one L2 round trip per chunk.
__device__ __forceinline__ void stage_slice(float* vec_s, const unsigned int* src, int k_len, unsigned int tag) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int first = warp * kSliceWords;
    if constexpr (kTagged && POLL_DELAY_NS > 0) __nanosleep(POLL_DELAY_NS);   // v16: fewer polls before the data can be there
    if constexpr (kSliceWords % 4 == 0) {
        constexpr int quads = kSliceWords / 4, iters = (quads + 31) / 32;
        constexpr int chunk = iters < kStageChunk ? iters : kStageChunk;
#pragma unroll 1
        for (int base = 0; base < iters; base += chunk) {
            uint4 v[chunk];
            for (long long polls = 0;; ++polls) {
                bool ready = true;
#pragma unroll
                for (int j = 0; j < chunk; ++j) {
                    const int q = (base + j) * 32 + lane;
                    if (q >= quads) continue;
                    const unsigned int* p = src + first + 4 * q;
                    v[j] = kTagged ? load_relaxed(p) : __ldcg(reinterpret_cast<const uint4*>(p));
                }
#pragma unroll
                for (int j = 0; j < chunk; ++j) {
                    const int q = (base + j) * 32 + lane;
                    if (kTagged && q < quads) ready &= quad_ready(v[j], first + 4 * q, k_len, tag);
                }
                if (ready) break;
                if (polls > kMaxPolls) __trap();
            }
#pragma unroll
            for (int j = 0; j < chunk; ++j) {
                const int q = (base + j) * 32 + lane;
                if (q < quads) *reinterpret_cast<uint4*>(vec_s + first + 4 * q) = v[j];
            }
        }
    } else {   // slices of an odd length (B odd and an odd number of columns per warp): word by word
        for (int i = lane; i < kSliceWords; i += 32) {
            const unsigned int* p = src + first + i;
            unsigned int word;
            for (long long polls = 0;; ++polls) {
                word = kTagged ? load_relaxed_word(p) : __ldcg(p);
                if (!kTagged || (first + i) / kBatch >= k_len || ((word ^ tag) & 1u) == 0) break;
                if (polls > kMaxPolls) __trap();
            }
            vec_s[first + i] = __uint_as_float(word);
        }
    }
    __syncwarp();
}

// This warp's partial products of the on-chip rows with its K-slice of vec_s, into red_s
// [warp][b][row] (the warp's lanes summed; the warps are summed by the pointwise threads). acc:
// the lane's input-projection partials (v15; zeros without it), to which this product is added.
__device__ __forceinline__ void warp_product(const float (&w)[kRowsPerLane][kRegCols > 0 ? kRegCols : 1],
                                             const float* w_s, const float* vec_s, float* red_s,
                                             float (&acc)[kRowsPerLane][kBatch]) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    float part[kRowsPerLane][kBatch];
    lane_partials<kLaneK, kRegCols, kSmemCols>(w, w_s, vec_s, part, warp, lane);
#pragma unroll
    for (int r = 0; r < kRowsPerLane; ++r)
#pragma unroll
        for (int b = 0; b < kBatch; ++b) acc[r][b] += part[r][b];
    lane_group_sum<kLaneK>(acc);
    if (lane % kLaneK == 0) {
        const int row = lane / kLaneK;
#pragma unroll
        for (int r = 0; r < kRowsPerLane; ++r)
#pragma unroll
            for (int b = 0; b < kBatch; ++b)
                red_s[(warp * kBatch + b) * kRows + r * kLaneRows + row] = acc[r][b];
    }
}

// The step's product for the pointwise thread of (unit u, batch b): the warps' partials of row
// `row` (forward: the unit's 4 gate rows from row 4u, as one float4), summed in warp order.
__device__ __forceinline__ float4 gate_sums(const float* red_s, int u, int b) {
    float4 z = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 4
    for (int w = 0; w < kWarps; ++w) {
        const float4 p = *reinterpret_cast<const float4*>(red_s + (w * kBatch + b) * kRows + 4 * u);
        z.x += p.x; z.y += p.y; z.z += p.z; z.w += p.w;
    }
    return z;
}

__device__ __forceinline__ float row_sum(const float* red_s, int u, int b) {
    float s = 0.0f;
#pragma unroll 4
    for (int w = 0; w < kWarps; ++w) s += red_s[(w * kBatch + b) * kRows + u];
    return s;
}

struct Carve {
    float *vec, *ws, *red, *xs;   // red: kRedFloats, twice under the tagged exchange; xs: staged x (v15)
};

__device__ __forceinline__ Carve carve(float* smem) {
    Carve c;
    c.vec = smem;
    c.ws = c.vec + kVecFloats;
    c.red = c.ws + kWsFloats;
    c.xs = c.red + kRedBuffers * kRedFloats;
    return c;
}

// ---- v15: the input projection in the forward kernel (see the header) ----
// This lane's share of its warp's K-slice of x_t ([B][in_size] rows): word e of the slice is
// column warp * kInWarpCols + e / B of row e % B, zero past the input.
__device__ __forceinline__ void load_x_slice(float (&v)[kInPerLane], const float* x_t, int in_size) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
    for (int i = 0; i < kInPerLane; ++i) {
        const int e = i * 32 + lane, k = warp * kInWarpCols + e / kBatch;
        v[i] = (e < kInSliceWords && k < in_size) ? __ldg(x_t + (size_t)(e % kBatch) * in_size + k) : 0.0f;
    }
}

// The warp's staged slice times its W_ih columns into acc: the partials the next step's product adds to.
// Only this warp reads its slice of xs, and a __syncthreads of every step orders its reuse.
__device__ __forceinline__ void input_partials(float (&acc)[kRowsPerLane][kBatch],
                                               const float (&w_in)[kRowsPerLane][kInput ? kInCols : 1],
                                               const float (&v)[kInPerLane], float* xs) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
    for (int i = 0; i < kInPerLane; ++i)
        if (i * 32 + lane < kInSliceWords) xs[warp * kInSliceWords + i * 32 + lane] = v[i];
    __syncwarp();
    if constexpr (kInput) lane_partials<kLaneK, kInCols, 0>(w_in, nullptr, xs, acc, warp, lane);
}

// One pointwise thread per (unit, batch) pair: thread u * B + b (units * B <= threads).
struct Pointwise {
    int u, b, j;
    bool active;
};

__device__ __forceinline__ Pointwise pointwise_slot(int unit0, int units, int H) {
    Pointwise p;
    p.u = threadIdx.x / kBatch;
    p.b = threadIdx.x % kBatch;
    p.j = unit0 + p.u;
    p.active = p.u < units && p.j < H;
    return p;
}

// The start of a block of either pass: its shared-memory carve-up, its direction d, its tile loaded
// into w and shared memory, its pointwise slot, where that slot's [D][B][H] state lives, its exchange
// region x (v41: d * GROUPS + g) and its pointwise slot's batch column of the layer (v41: g * BATCH + b).
struct Start {
    Carve s;
    int d;
    bool reverse;
    Pointwise pw;
    size_t state_at;
    int x, col;
};

__device__ __forceinline__ Start start_block(float (&w)[kRowsPerLane][kRegCols > 0 ? kRegCols : 1],
                                             float* smem, const float* tiles, int H, int units,
                                             int blocks_per_dir, int dir0) {
    Start st;
    st.s = carve(smem);
    const int blk = blockIdx.x % blocks_per_dir, group_of_grid = blockIdx.x / blocks_per_dir;
    const int g = group_of_grid % kGroups;   // v41: blocks_per_dir is per group; the groups of a direction adjoin
    st.d = dir0 + group_of_grid / kGroups;
    st.x = st.d * kGroups + g;
    st.reverse = st.d == 1;
    load_weights<kWarps, kRegCols, kSmemCols>(w, st.s.ws, tiles, (size_t)st.d * blocks_per_dir + blk);
    st.pw = pointwise_slot(blk * units, units, H);
    st.col = g * kBatch + st.pw.b;
    st.state_at = ((size_t)st.d * kBatchAll + st.col) * H + st.pw.j;
    return st;
}

#if PASS == 0
// tiles [D][blocks][NWARPS][COLS_PER_LANE][ROWS_PER_LANE][32]; xw [D][T][B][4H] (gate-interleaved),
// or with IN_COLS the layer input x [T][B][in_size] and in_tiles [D][blocks][NWARPS][IN_COLS]
// [ROWS_PER_LANE][32] the packed W_ih rows (null otherwise); bias [D][4H] (gate-interleaved), added
// here with IN_COLS or KERNEL_BIAS (v23: to an xw that comes without them, instead of a kernel of its
// own before this one, ~11 us at fp32 H=512 B=4 T=256), else null (xw has them); h0, c0, hT, cT
// [D][B][H]; y [T][B][ldy] (direction d at columns d*H); gates_out [D][T][B][4H] activated,
// cells_out [D][T][B][H] (both null at inference); xch zeroed [D][2][COLS][B] words.
// xw_row_exp [T][B], xw_col_exp [D][4H]: v33 (v32's split fold), xw as the fp16-split GEMM left it
// (without IN_COLS): each value is brought back by ldexpf with its row's and column's exponents where
// it is loaded, exact, instead of by a pass over all of xw (null: xw is unscaled).
extern "C" __global__ void __launch_bounds__(kThreads, 1)
persistent_lstm_fwd(const float* __restrict__ tiles, const float* __restrict__ xw,
                    const float* __restrict__ h0, const float* __restrict__ c0, float* y, float* hT,
                    float* cT, float* gates_out, float* cells_out, int T, int H, int units,
                    int blocks_per_dir, int ldy, int dir0, unsigned int* xch,
                    const float* __restrict__ bias, const float* __restrict__ in_tiles, int in_size,
                    const int* __restrict__ xw_row_exp, const int* __restrict__ xw_col_exp) {
    extern __shared__ __align__(16) float smem[];
    float w[kRowsPerLane][kRegCols > 0 ? kRegCols : 1];
    const auto [s, d, reverse, pw, state_at, x, col] = start_block(w, smem, tiles, H, units, blocks_per_dir, dir0);
    float w_in[kRowsPerLane][kInput ? kInCols : 1];
    float acc[kRowsPerLane][kBatch] = {};   // the next product's input partials (v15), else zeros
    float xv[kInPerLane];
    float4 b4 = make_float4(0.f, 0.f, 0.f, 0.f);   // v15: the start of xz; v23: added to xw
    if ((kInput || kKernelBias) && pw.active && bias != nullptr)
        b4 = __ldg(reinterpret_cast<const float4*>(bias + (size_t)d * 4 * H + 4 * (size_t)pw.j));
    if constexpr (kInput) {
        load_weights<kWarps, kInCols, 0>(w_in, nullptr, in_tiles, (size_t)d * blocks_per_dir + blockIdx.x % blocks_per_dir);
        if constexpr (X_PREFETCH) prefetch_to_l2(xw, (size_t)T * kBatch * in_size * sizeof(float));
        load_x_slice(xv, xw + (size_t)(reverse ? T - 1 : 0) * kBatch * in_size, in_size);
        input_partials(acc, w_in, xv, s.xs);
    }
    float c = 0.0f;   // cell state stays in this thread's register
    if (pw.active) {
        c = c0[state_at];
        publish(xch, d, 0, pw.j, pw.b, h0[state_at]);   // h0 is publication 0
    }
    __syncthreads();
    cg::grid_group grid = cg::this_grid();
    if constexpr (!kTagged) grid.sync();
    const size_t G = 4 * (size_t)H;
    for (int step = 0; step < T; ++step) {
        const int t = reverse ? T - 1 - step : step;
        const size_t row = ((size_t)d * T + t) * kBatch + pw.b;
        // Issued now, used after the product: the loads' latency hides behind it.
        float4 xz = b4;
        if constexpr (kInput) {
            if (step + 1 < T) load_x_slice(xv, xw + (size_t)(reverse ? t - 1 : t + 1) * kBatch * in_size, in_size);
        } else if (pw.active) {
            xz = __ldg(reinterpret_cast<const float4*>(xw + row * G + 4 * (size_t)pw.j));
            // v33: the column exponents per step (registers are short). Unscaled where loaded: applied in the
            // pointwise, as the split kernel does, the exponents stay live over the product, and the plans at
            // the 128-register cap measured 0.04-0.33 us/step slower (results/persistent_v33, call 10)
            if (xw_row_exp != nullptr)
                xz = unscaled(xz, __ldg(xw_row_exp + (size_t)t * kBatch + pw.b),
                          __ldg(reinterpret_cast<const int4*>(xw_col_exp + (size_t)d * G + 4 * (size_t)pw.j)));
        }
        float* red = s.red + (kTagged ? (step & 1) * kRedFloats : 0);
        stage_slice(s.vec, xch + xch_slot(d, step), H, xch_tag(step));   // h_{step-1}: publication step
        warp_product(w, s.ws, s.vec, red, acc);
        __syncthreads();
        if (pw.active) {
            const float4 z = gate_sums(red, pw.u, pw.b);
            if constexpr (kKernelBias) xz = make_float4(xz.x + b4.x, xz.y + b4.y, xz.z + b4.z, xz.w + b4.w);
            const float gi = sigmoidf_(z.x + xz.x), gf = sigmoidf_(z.y + xz.y);
            const float gg = tanhf_(z.z + xz.z), go = sigmoidf_(z.w + xz.w);
            c = gf * c + gi * gg;
            const float h = go * tanhf_(c);
            y[((size_t)t * kBatch + pw.b) * ldy + (size_t)d * H + pw.j] = h;
            if (step + 1 < T) publish(xch, d, step + 1, pw.j, pw.b, h);
            if (gates_out != nullptr) {
                *reinterpret_cast<float4*>(gates_out + row * G + 4 * (size_t)pw.j) = make_float4(gi, gf, gg, go);
                cells_out[row * H + pw.j] = c;
            }
            if (step == T - 1) {
                hT[state_at] = h;
                cT[state_at] = c;
            }
        }
        // x_{t+1} W_ih^T (v15) while the other blocks still compute h_t; else zeros
        if (kInput && step + 1 < T) {
            input_partials(acc, w_in, xv, s.xs);
        } else {
#pragma unroll
            for (int r = 0; r < kRowsPerLane; ++r)
#pragma unroll
                for (int b = 0; b < kBatch; ++b) acc[r][b] = 0.0f;
        }
        if constexpr (!kTagged) grid.sync();
    }
}
#else
// tiles: packed W_hh^T rows (unit j's column of the gate-interleaved W_hh, K = 4H);
// dy [T][B][ldy] (direction d at columns d*H); gates [D][T][B][4H] activated, cells [D][T][B][H];
// c0, dhT, dcT, dh0, dc0 [D][B][H]; dz [D][T][B][4H] gate-interleaved output; xch zeroed
// [D][2][COLS][B] words.
extern "C" __global__ void __launch_bounds__(kThreads, 1)
persistent_lstm_bwd(const float* __restrict__ tiles, const float* __restrict__ dy,
                    const float* __restrict__ gates, const float* __restrict__ cells,
                    const float* __restrict__ c0, const float* __restrict__ dhT,
                    const float* __restrict__ dcT, float* dz, float* dh0, float* dc0, int T, int H,
                    int units, int blocks_per_dir, int ldy, int dir0, unsigned int* xch) {
    extern __shared__ __align__(16) float smem[];
    float w[kRowsPerLane][kRegCols > 0 ? kRegCols : 1];
    const auto [s, d, reverse, pw, state_at, x, col] = start_block(w, smem, tiles, H, units, blocks_per_dir, dir0);
    float dc_next = 0.0f, dh_rec = 0.0f;   // dh_rec: W_hh^T . dz of the step after (dhT first)
    constexpr bool kLateLoads = BWD_LATE_LOADS != 0 && !kTagged;
    BwdInputs in{};
    if (pw.active) {
        dc_next = dcT[state_at];
        dh_rec = dhT[state_at];
        in = load_bwd_inputs<kBatchAll>(gates, cells, c0, dy, d, T, H, ldy, T - 1, reverse, col, pw.j);
    }
    __syncthreads();
    cg::grid_group grid = cg::this_grid();
    const size_t G = 4 * (size_t)H;
    for (int step = T - 1; step >= 0; --step) {
        const int t = reverse ? T - 1 - step : step;
        const int n = T - 1 - step;   // publications so far (processing order)
        if (pw.active) {
            const float tc = tanhf_(in.c);
            float dc;
            const float4 out = pointwise_backward(in, in.dy + dh_rec, tc, dc_next, dc);
            *reinterpret_cast<float4*>(dz + (((size_t)d * T + t) * kBatchAll + col) * G + 4 * (size_t)pw.j) = out;
            publish(xch, x, n, 4 * pw.j, pw.b, out.x);
            publish(xch, x, n, 4 * pw.j + 1, pw.b, out.y);
            publish(xch, x, n, 4 * pw.j + 2, pw.b, out.z);
            publish(xch, x, n, 4 * pw.j + 3, pw.b, out.w);
            dc_next = dc * in.g.y;
            if (!kLateLoads && step > 0)
                in = load_bwd_inputs<kBatchAll>(gates, cells, c0, dy, d, T, H, ldy, step - 1, reverse, col, pw.j);
        }
        if constexpr (!kTagged) grid.sync();
        if (kLateLoads && pw.active && step > 0)   // v32: not in flight at the barrier's fence
            in = load_bwd_inputs<kBatchAll>(gates, cells, c0, dy, d, T, H, ldy, step - 1, reverse, col, pw.j);
        float* red = s.red + (kTagged ? (n & 1) * kRedFloats : 0);
        stage_slice(s.vec, xch + xch_slot(x, n), (int)G, xch_tag(n));
        float acc[kRowsPerLane][kBatch] = {};
        warp_product(w, s.ws, s.vec, red, acc);
        __syncthreads();
        if (pw.active) dh_rec = row_sum(red, pw.u, pw.b);
    }
    if (pw.active) {
        dh0[state_at] = dh_rec;
        dc0[state_at] = dc_next;
    }
}
#endif
