// Persistent LSTM forward (v3) on ONE thread-block cluster per sequence (Hopper, sm_90+).
//
// The grid is CLUSTER x D blocks; cluster d runs direction d of one layer for all T steps, so
// clusters never wait on each other and only the CLUSTER blocks of one cluster synchronise (a
// cluster barrier, ~0.18 us, instead of a grid barrier, ~1 us). Block `rank` owns hidden units
// [rank*units, rank*units + units): their 4 gate-interleaved rows of W_hh, the first REG_COLS
// columns of each lane in registers (fully unrolled), the rest in shared memory; the cell state of
// its (unit, batch) pairs stays in the pointwise threads' registers. Lane/warp mapping and the
// packed tile layout are those of persistent_lstm.cu (persistent_common.cuh; layouts/persistent.py:
// pack_block_rows).
//
// Per step s (t = s, or T-1-s for direction 1), in every block:
//   1. partial dot products of the own rows with h_{s-1} = hbuf[s & 1] (local shared memory),
//      written to red_s; __syncthreads.
//   2. pointwise thread (u, b) sums the warps' partials in a fixed order (bitwise reproducible),
//      adds xw_t (loaded one step ahead), updates c, and PUSHES h_t[j, b] into hbuf[(s+1) & 1] of
//      every block of the cluster (DSMEM st.shared::cluster, itself included); y/gates/cells go
//      to global memory (never read back by this kernel: off the critical path).
//   3. barrier.cluster.arrive.release + wait.acquire: one cluster barrier per step.
// Hazards (why one barrier per step is enough with two h buffers):
//   - RAW on hbuf[(s+1)&1]: all pushes of step s precede every block's arrive (release) of step
//     s; step s+1 reads after wait (acquire) -> it sees the whole h_t.
//   - WAR on hbuf[(s+1)&1]: it was last READ in step s-1 (as hbuf[(s-1)&1]), before that reader's
//     arrive of step s-1; a writer pushes in step s, after its wait of step s-1 -> ordered.
//   - hbuf[s&1] is not written during step s (pushes go to the other buffer).
//   - red_s: written in step 1, read in step 2 after __syncthreads; rewritten in step s+1 only
//     after the cluster barrier of step s, which every reader of step s has arrived at.
//   - Lifetime: a block's shared memory must exist while others write it: a cluster barrier
//     before the first push (all blocks started) and after the last push (none has exited).
//
// tiles [D][CLUSTER][NWARPS][COLS_PER_LANE][ROWS_PER_LANE][32]; xw [D][T][B][4H] (gate-
// interleaved, biases included); h0, c0, hT, cT [D][B][H]; y [T][B][ldy] (direction d at columns
// d*H); gates_out [D][T][B][4H] activated, cells_out [D][T][B][H] (null at inference).
//
// ecornn-persistent
// ecornn-check: -DCLUSTER=8 -DBATCH=1 -DNWARPS=8 -DLANE_ROWS=32 -DROWS_PER_LANE=4 -DCOLS_PER_LANE=32 -DREG_COLS=32
// ecornn-check: -DCLUSTER=8 -DBATCH=4 -DNWARPS=8 -DLANE_ROWS=32 -DROWS_PER_LANE=4 -DCOLS_PER_LANE=32 -DREG_COLS=32
// ecornn-check: -DCLUSTER=8 -DBATCH=1 -DNWARPS=4 -DLANE_ROWS=32 -DROWS_PER_LANE=2 -DCOLS_PER_LANE=32 -DREG_COLS=32
// ecornn-check: -DCLUSTER=8 -DBATCH=3 -DNWARPS=4 -DLANE_ROWS=8 -DROWS_PER_LANE=7 -DCOLS_PER_LANE=7 -DREG_COLS=7
// ecornn-check: -DCLUSTER=16 -DBATCH=4 -DNWARPS=8 -DLANE_ROWS=32 -DROWS_PER_LANE=4 -DCOLS_PER_LANE=64 -DREG_COLS=46
#include "cluster_common.cuh"
#include "persistent_common.cuh"

constexpr int kCluster = CLUSTER;
constexpr int kBatch = BATCH;
constexpr int kWarps = NWARPS;
constexpr int kThreads = 32 * NWARPS;
constexpr int kLaneRows = LANE_ROWS;
constexpr int kLaneK = 32 / LANE_ROWS;
constexpr int kRowsPerLane = ROWS_PER_LANE;
constexpr int kRows = ROWS_PER_LANE * LANE_ROWS;        // padded rows per block
constexpr int kRegCols = REG_COLS;
constexpr int kRegArray = REG_COLS > 0 ? REG_COLS : 1;
constexpr int kSmemCols = COLS_PER_LANE - REG_COLS;
constexpr int kWarpCols = COLS_PER_LANE * kLaneK;
constexpr int kCols = kWarpCols * NWARPS;               // padded reduction length (>= H)

static_assert(32 % LANE_ROWS == 0, "LANE_ROWS must divide 32");
static_assert(REG_COLS <= COLS_PER_LANE, "REG_COLS must not exceed COLS_PER_LANE");
static_assert(kRows % 4 == 0, "a block's padded rows must hold whole units (4 gate rows)");
static_assert(CLUSTER >= 1 && CLUSTER <= 16, "cluster of 1..16 blocks");

// Shared memory (floats): hbuf[2][kCols][B] | smem weights | red[warp][unit][B][gate].
constexpr int kVecFloats = kCols * kBatch;
constexpr int kWsFloats = kWarps * kSmemCols * kRowsPerLane * 32;
static_assert((2 * kVecFloats + kWsFloats) % 4 == 0, "red_s must be float4-aligned");

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define ECORNN_CLUSTER_DIMS __cluster_dims__(CLUSTER, 1, 1)

// This lane's partial dot products, reduced over its lane group, written to red_s
// ([warp][row / 4][b][row % 4]: a pointwise thread then reads one float4 per warp).
__device__ __forceinline__ void block_partials(const float (&w)[kRowsPerLane][kRegArray], const float* w_s,
                                               const float* vec_s, float* red_s) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    float acc[kRowsPerLane][kBatch];
    lane_partials<kLaneK, kRegCols, kSmemCols>(w, w_s, vec_s, acc, warp, lane);
    lane_group_sum<kLaneK>(acc);
    if (lane % kLaneK == 0) {
#pragma unroll
        for (int r = 0; r < kRowsPerLane; ++r) {
            const int row = r * kLaneRows + lane / kLaneK;
#pragma unroll
            for (int b = 0; b < kBatch; ++b)
                red_s[((warp * (kRows / 4) + row / 4) * kBatch + b) * 4 + row % 4] = acc[r][b];
        }
    }
}

// Gate pre-activations of pointwise thread t = u * B + b: warps summed in order 0..n-1.
__device__ __forceinline__ float4 gate_sums(const float* red_s, int t) {
    float4 z = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
        const float4 p = reinterpret_cast<const float4*>(red_s)[w * (kRows / 4) * kBatch + t];
        z.x += p.x; z.y += p.y; z.z += p.z; z.w += p.w;
    }
    return z;
}

// Registers and shared memory get tile number `tile`; both h buffers are zeroed (padding columns
// k >= H stay zero for the whole kernel).
__device__ __forceinline__ void load_tile(float (&w)[kRowsPerLane][kRegArray], float* w_s, float* hbuf,
                                          const float* tiles, size_t tile) {
    load_weights<kWarps, kRegCols, kSmemCols>(w, w_s, tiles, tile);
    for (int idx = threadIdx.x; idx < 2 * kVecFloats; idx += kThreads) hbuf[idx] = 0.0f;
}

extern "C" __global__ void ECORNN_CLUSTER_DIMS __launch_bounds__(kThreads, 1)
persistent_cluster_fwd(const float* __restrict__ tiles, const float* __restrict__ xw,
                       const float* __restrict__ h0, const float* __restrict__ c0, float* y, float* hT,
                       float* cT, float* gates_out, float* cells_out, int T, int H, int units, int ldy) {
    extern __shared__ __align__(16) float smem[];
    float* hbuf = smem;
    float* w_s = hbuf + 2 * kVecFloats;
    float* red_s = w_s + kWsFloats;
    const unsigned rank = cluster_rank();
    const int d = blockIdx.x / kCluster;
    const bool reverse = d == 1;
    float w[kRowsPerLane][kRegArray];
    load_tile(w, w_s, hbuf, tiles, (size_t)d * kCluster + rank);
    __syncthreads();
    for (int idx = threadIdx.x; idx < kBatch * H; idx += kThreads) {
        const int b = idx / H, k = idx % H;
        hbuf[k * kBatch + b] = h0[((size_t)d * kBatch + b) * H + k];
    }
    // One pointwise thread per own (unit, batch): t = u * B + b.
    const int u = threadIdx.x / kBatch, b = threadIdx.x % kBatch, j = (int)rank * units + u;
    const bool active = u < units && j < H;
    const size_t state_at = ((size_t)d * kBatch + b) * H + j;
    const size_t G = 4 * (size_t)H;
    float c = active ? c0[state_at] : 0.0f;
    float4 xz_next = make_float4(0.f, 0.f, 0.f, 0.f);
    if (active) {
        const int t0 = reverse ? T - 1 : 0;
        xz_next = __ldg(reinterpret_cast<const float4*>(xw + (((size_t)d * T + t0) * kBatch + b) * G + 4 * (size_t)j));
    }
    cluster_arrive();   // every block has started and initialised before anyone pushes
    cluster_wait();
    for (int step = 0; step < T; ++step) {
        const int t = reverse ? T - 1 - step : step;
        const float4 xz = xz_next;
        if (active && step + 1 < T) {   // one step ahead: the load's latency hides behind a step
            const int tn = reverse ? t - 1 : t + 1;
            xz_next = __ldg(reinterpret_cast<const float4*>(xw + (((size_t)d * T + tn) * kBatch + b) * G + 4 * (size_t)j));
        }
        float* h_next = hbuf + ((step + 1) & 1) * kVecFloats;
        block_partials(w, w_s, hbuf + (step & 1) * kVecFloats, red_s);
        __syncthreads();
        if (active) {
            const float4 z = gate_sums(red_s, threadIdx.x);
            const float gi = sigmoidf_(z.x + xz.x), gf = sigmoidf_(z.y + xz.y);
            const float gg = tanhf_(z.z + xz.z), go = sigmoidf_(z.w + xz.w);
            c = gf * c + gi * gg;
            const float h = go * tanhf_(c);
#pragma unroll
            for (int r = 0; r < kCluster; ++r) store_remote(h_next + j * kBatch + b, r, h);
            y[((size_t)t * kBatch + b) * ldy + (size_t)d * H + j] = h;
            if (gates_out != nullptr) {
                const size_t row = ((size_t)d * T + t) * kBatch + b;
                *reinterpret_cast<float4*>(gates_out + row * G + 4 * (size_t)j) = make_float4(gi, gf, gg, go);
                cells_out[row * H + j] = c;
            }
            if (step == T - 1) {
                hT[state_at] = h;
                cT[state_at] = c;
            }
        }
        cluster_arrive();
        cluster_wait();
    }
}
#else
// sm_80 and older have no thread-block clusters: a stub keeps the CI compile of every source for
// sm_80 meaningful; the engine never launches it (the capacity model refuses compute < 9.0).
extern "C" __global__ void __launch_bounds__(kThreads, 1)
persistent_cluster_fwd(const float* __restrict__, const float* __restrict__, const float* __restrict__,
                       const float* __restrict__, float*, float*, float*, float*, float*, int, int, int, int) {
    __trap();
}
#endif
