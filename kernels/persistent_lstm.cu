// Persistent LSTM recurrence: one cooperative kernel runs every timestep of one layer (all its
// directions). Each block owns whole hidden units and keeps its slice of the recurrent matrix on
// chip for the whole sequence: the first REG_COLS columns of each lane in registers (fully
// unrolled, compile-time indices), the rest in shared memory. h (forward) or dz (backward) travels
// through L2 between steps; one grid.sync() per step.
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
// ecornn-persistent
// ecornn-check: -DPASS=0 -DBATCH=4 -DNWARPS=16 -DLANE_ROWS=16 -DROWS_PER_LANE=2 -DCOLS_PER_LANE=32 -DREG_COLS=32
// ecornn-check: -DPASS=0 -DBATCH=16 -DNWARPS=8 -DLANE_ROWS=8 -DROWS_PER_LANE=5 -DCOLS_PER_LANE=40 -DREG_COLS=24
// ecornn-check: -DPASS=1 -DBATCH=4 -DNWARPS=16 -DLANE_ROWS=8 -DROWS_PER_LANE=1 -DCOLS_PER_LANE=64 -DREG_COLS=64
// ecornn-check: -DPASS=0 -DBATCH=3 -DNWARPS=8 -DLANE_ROWS=16 -DROWS_PER_LANE=3 -DCOLS_PER_LANE=96 -DREG_COLS=24
// ecornn-check: -DPASS=1 -DBATCH=1 -DNWARPS=16 -DLANE_ROWS=4 -DROWS_PER_LANE=1 -DCOLS_PER_LANE=32 -DREG_COLS=16
#include <cooperative_groups.h>

#include "persistent_common.cuh"

namespace cg = cooperative_groups;

constexpr int kBatch = BATCH;
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
static_assert(REG_COLS <= COLS_PER_LANE, "REG_COLS must not exceed COLS_PER_LANE");

// Shared memory carve-up (floats): vector | smem weights | warp partials | sums.
constexpr int kVecFloats = kCols * kBatch;
constexpr int kWsFloats = kWarps * kSmemCols * kRowsPerLane * 32;
constexpr int kRedFloats = kWarps * kBatch * kRows;
constexpr int kSumFloats = kBatch * kRows;

// Block-wide matrix-vector product of the on-chip rows with vec_s; sums_s[b][m] gets the result.
// Fixed summation order (lanes, then warps 0..n-1): bitwise reproducible.
__device__ __forceinline__ void block_matvec(const float (&w)[kRowsPerLane][kRegCols > 0 ? kRegCols : 1],
                                             const float* w_s, const float* vec_s, float* red_s,
                                             float* sums_s) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    float acc[kRowsPerLane][kBatch];
    lane_partials<kLaneK, kRegCols, kSmemCols>(w, w_s, vec_s, acc, warp, lane);
    lane_group_sum<kLaneK>(acc);
    if (lane % kLaneK == 0) {
        const int row = lane / kLaneK;
#pragma unroll
        for (int r = 0; r < kRowsPerLane; ++r)
#pragma unroll
            for (int b = 0; b < kBatch; ++b)
                red_s[(warp * kBatch + b) * kRows + r * kLaneRows + row] = acc[r][b];
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < kBatch * kRows; idx += kThreads) {
        float s = 0.0f;
#pragma unroll
        for (int w2 = 0; w2 < kWarps; ++w2) s += red_s[w2 * kBatch * kRows + idx];
        sums_s[idx] = s;
    }
    __syncthreads();
}

// Registers and shared memory get tile number `tile`; the vector's padding is zeroed.
__device__ __forceinline__ void load_tile(float (&w)[kRowsPerLane][kRegCols > 0 ? kRegCols : 1],
                                          float* w_s, float* vec_s, const float* tiles, size_t tile) {
    load_weights<kWarps, kRegCols, kSmemCols>(w, w_s, tiles, tile);
    for (int idx = threadIdx.x; idx < kVecFloats; idx += kThreads) vec_s[idx] = 0.0f;
}

// vec_s[k][b] = src[b * ld + k] for k < n (L2 loads: other blocks wrote src during this kernel).
__device__ __forceinline__ void load_vector(float* vec_s, const float* src, int ld, int n) {
#pragma unroll 4
    for (int idx = threadIdx.x; idx < kBatch * n; idx += kThreads) {
        const int b = idx / n, k = idx % n;
        vec_s[k * kBatch + b] = __ldcg(src + (size_t)b * ld + k);
    }
    __syncthreads();
}

struct Carve {
    float *vec, *ws, *red, *sums;
};

__device__ __forceinline__ Carve carve(float* smem) {
    Carve c;
    c.vec = smem;
    c.ws = c.vec + kVecFloats;
    c.red = c.ws + kWsFloats;
    c.sums = c.red + kRedFloats;
    return c;
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
// into w and shared memory, its pointwise slot and where that slot's [D][B][H] state lives.
struct Start {
    Carve s;
    int d;
    bool reverse;
    Pointwise pw;
    size_t state_at;
};

__device__ __forceinline__ Start start_block(float (&w)[kRowsPerLane][kRegCols > 0 ? kRegCols : 1],
                                             float* smem, const float* tiles, int H, int units,
                                             int blocks_per_dir, int dir0) {
    Start st;
    st.s = carve(smem);
    const int blk = blockIdx.x % blocks_per_dir;
    st.d = dir0 + blockIdx.x / blocks_per_dir;
    st.reverse = st.d == 1;
    load_tile(w, st.s.ws, st.s.vec, tiles, (size_t)st.d * blocks_per_dir + blk);
    st.pw = pointwise_slot(blk * units, units, H);
    st.state_at = ((size_t)st.d * kBatch + st.pw.b) * H + st.pw.j;
    return st;
}

#if PASS == 0
// tiles [D][blocks][NWARPS][COLS_PER_LANE][ROWS_PER_LANE][32]; xw [D][T][B][4H] (gate-interleaved,
// biases included); h0, c0, hT, cT [D][B][H]; y [T][B][ldy] (direction d at columns d*H);
// gates_out [D][T][B][4H] activated, cells_out [D][T][B][H] (both null at inference).
extern "C" __global__ void __launch_bounds__(kThreads, 1)
persistent_lstm_fwd(const float* __restrict__ tiles, const float* __restrict__ xw,
                    const float* __restrict__ h0, const float* __restrict__ c0, float* y, float* hT,
                    float* cT, float* gates_out, float* cells_out, int T, int H, int units,
                    int blocks_per_dir, int ldy, int dir0) {
    extern __shared__ __align__(16) float smem[];
    float w[kRowsPerLane][kRegCols > 0 ? kRegCols : 1];
    const auto [s, d, reverse, pw, state_at] = start_block(w, smem, tiles, H, units, blocks_per_dir, dir0);
    float c = pw.active ? c0[state_at] : 0.0f;   // cell state stays in this thread's register
    __syncthreads();
    cg::grid_group grid = cg::this_grid();
    const size_t G = 4 * (size_t)H;
    for (int step = 0; step < T; ++step) {
        const int t = reverse ? T - 1 - step : step;
        const size_t row = ((size_t)d * T + t) * kBatch + pw.b;
        // Issued now, used after the matvec: the load's latency hides behind it.
        float4 xz = make_float4(0.f, 0.f, 0.f, 0.f);
        if (pw.active) xz = __ldg(reinterpret_cast<const float4*>(xw + row * G + 4 * (size_t)pw.j));
        if (step == 0) {
            load_vector(s.vec, h0 + (size_t)d * kBatch * H, H, H);
        } else {
            const int tp = reverse ? t + 1 : t - 1;
            load_vector(s.vec, y + (size_t)tp * kBatch * ldy + (size_t)d * H, ldy, H);
        }
        block_matvec(w, s.ws, s.vec, s.red, s.sums);
        if (pw.active) {
            const float* zs = s.sums + pw.b * kRows + 4 * pw.u;
            const float gi = sigmoidf_(zs[0] + xz.x), gf = sigmoidf_(zs[1] + xz.y);
            const float gg = tanhf(zs[2] + xz.z), go = sigmoidf_(zs[3] + xz.w);
            c = gf * c + gi * gg;
            const float h = go * tanhf(c);
            y[((size_t)t * kBatch + pw.b) * ldy + (size_t)d * H + pw.j] = h;
            if (gates_out != nullptr) {
                *reinterpret_cast<float4*>(gates_out + row * G + 4 * (size_t)pw.j) = make_float4(gi, gf, gg, go);
                cells_out[row * H + pw.j] = c;
            }
            if (step == T - 1) {
                hT[state_at] = h;
                cT[state_at] = c;
            }
        }
        grid.sync();
    }
}
#else
// tiles: packed W_hh^T rows (unit j's column of the gate-interleaved W_hh, K = 4H);
// dy [T][B][ldy] (direction d at columns d*H); gates [D][T][B][4H] activated, cells [D][T][B][H];
// c0, dhT, dcT, dh0, dc0 [D][B][H]; dz [D][T][B][4H] gate-interleaved output.
extern "C" __global__ void __launch_bounds__(kThreads, 1)
persistent_lstm_bwd(const float* __restrict__ tiles, const float* __restrict__ dy,
                    const float* __restrict__ gates, const float* __restrict__ cells,
                    const float* __restrict__ c0, const float* __restrict__ dhT,
                    const float* __restrict__ dcT, float* dz, float* dh0, float* dc0, int T, int H,
                    int units, int blocks_per_dir, int ldy, int dir0) {
    extern __shared__ __align__(16) float smem[];
    float w[kRowsPerLane][kRegCols > 0 ? kRegCols : 1];
    const auto [s, d, reverse, pw, state_at] = start_block(w, smem, tiles, H, units, blocks_per_dir, dir0);
    float dc_next = 0.0f;
    BwdInputs in{};
    if (pw.active) {
        dc_next = dcT[state_at];
        s.sums[pw.b * kRows + pw.u] = dhT[state_at];
        in = load_bwd_inputs<kBatch>(gates, cells, c0, dy, d, T, H, ldy, T - 1, reverse, pw.b, pw.j);
    }
    __syncthreads();
    cg::grid_group grid = cg::this_grid();
    const size_t G = 4 * (size_t)H;
    for (int step = T - 1; step >= 0; --step) {
        const int t = reverse ? T - 1 - step : step;
        if (pw.active) {
            const float gi = in.g.x, gf = in.g.y, gg = in.g.z, go = in.g.w;
            const float tc = tanhf(in.c);
            const float dh = in.dy + s.sums[pw.b * kRows + pw.u];
            const float dc = dh * go * (1.0f - tc * tc) + dc_next;
            const float4 out = make_float4(dc * gg * gi * (1.0f - gi), dc * in.c_prev * gf * (1.0f - gf),
                                           dc * gi * (1.0f - gg * gg), dh * tc * go * (1.0f - go));
            *reinterpret_cast<float4*>(dz + (((size_t)d * T + t) * kBatch + pw.b) * G + 4 * (size_t)pw.j) = out;
            dc_next = dc * gf;
            if (step > 0) in = load_bwd_inputs<kBatch>(gates, cells, c0, dy, d, T, H, ldy, step - 1, reverse, pw.b, pw.j);
        }
        grid.sync();
        load_vector(s.vec, dz + ((size_t)d * T + t) * kBatch * G, (int)G, (int)G);
        block_matvec(w, s.ws, s.vec, s.red, s.sums);
    }
    if (pw.active) {
        dh0[state_at] = s.sums[pw.b * kRows + pw.u];
        dc0[state_at] = dc_next;
    }
}
#endif
