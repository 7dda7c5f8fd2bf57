// Pointwise kernels of the `fused` strategy: one launch per LSTM step forward and backward,
// plus the small casts and masks around the time loop.
//
// Gate pre-activations z are fp32 rows [B][4H] (the per-step GEMM accumulates into them). With
// INTERLEAVED=1 the four gates of hidden unit j are adjacent (z[b][4j+q]), so one thread reads them
// with one 16-byte load; with INTERLEAVED=0 they are gate-blocked (z[b][qH+j]), the ablation.
// Storage (x, h, y, dz) is STORAGE: 0 fp32, 1 fp16, 2 bf16 (16-bit as raw bits: no header needed
// under NVRTC). Cell state and all arithmetic are fp32.
//
// ecornn-check: -DSTORAGE=0 -DINTERLEAVED=1
// ecornn-check: -DSTORAGE=1 -DINTERLEAVED=1
// ecornn-check: -DSTORAGE=2 -DINTERLEAVED=0

#ifndef STORAGE
#define STORAGE 0
#endif
#ifndef INTERLEAVED
#define INTERLEAVED 1
#endif

constexpr int kStorage = STORAGE;
constexpr bool kInterleaved = INTERLEAVED != 0;

#if STORAGE == 0
typedef float storage_t;
#else
typedef unsigned short storage_t;
#endif

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(unsigned short bits) {
    if (kStorage == 1) {
        float f;
        asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(bits));
        return f;
    }
    return __uint_as_float(static_cast<unsigned int>(bits) << 16);
}

__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(unsigned short* p, float v) {
    unsigned short bits;
    if (kStorage == 1) {
        asm("cvt.rn.f16.f32 %0, %1;" : "=h"(bits) : "f"(v));
    } else {  // bf16, round to nearest even; NaN stays NaN
        unsigned int u = __float_as_uint(v);
        bits = (u & 0x7fffffffu) > 0x7f800000u
                   ? static_cast<unsigned short>((u >> 16) | 0x40u)
                   : static_cast<unsigned short>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
    *p = bits;
}

__device__ __forceinline__ float sigmoidf(float x) { return 1.0f / (1.0f + __expf(-x)); }

// Offset of gate q of unit j inside one [4H] row.
__device__ __forceinline__ int gate_at(int q, int j, int hidden) {
    return kInterleaved ? 4 * j + q : q * hidden + j;
}

struct Gates { float i, f, g, o; };

__device__ __forceinline__ Gates load_gates(const float* row, int j, int hidden) {
    if (kInterleaved) {
        float4 v = *reinterpret_cast<const float4*>(row + 4 * j);
        return {v.x, v.y, v.z, v.w};
    }
    return {row[j], row[hidden + j], row[2 * hidden + j], row[3 * hidden + j]};
}

__device__ __forceinline__ void store_gates(float* row, int j, int hidden, Gates v) {
    if (kInterleaved) {
        *reinterpret_cast<float4*>(row + 4 * j) = make_float4(v.i, v.f, v.g, v.o);
        return;
    }
    row[j] = v.i; row[hidden + j] = v.f; row[2 * hidden + j] = v.g; row[3 * hidden + j] = v.o;
}

// One forward step for every (b, j): z holds x W_ih^T + h_prev W_hh^T (no bias yet).
// Writes c_out, h into y (row stride h_ld), and when save_gates the activated gates over z
// (what backward needs). h_final / c_final (may be null) receive the last step's state.
extern "C" __global__ void lstm_forward_step(float* z, const float* bias, const float* c_prev,
                                             float* c_out, storage_t* h_out, int h_ld,
                                             storage_t* h_final, storage_t* c_final,
                                             int save_gates, int batch, int hidden) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    const int b = blockIdx.y;
    if (j >= hidden || b >= batch) return;
    float* row = z + static_cast<size_t>(b) * 4 * hidden;
    Gates pre = load_gates(row, j, hidden);
    Gates bj = load_gates(bias, j, hidden);
    Gates a = {sigmoidf(pre.i + bj.i), sigmoidf(pre.f + bj.f), tanhf(pre.g + bj.g),
               sigmoidf(pre.o + bj.o)};
    const size_t cell = static_cast<size_t>(b) * hidden + j;
    const float c = a.f * c_prev[cell] + a.i * a.g;
    const float h = a.o * tanhf(c);
    c_out[cell] = c;
    store(h_out + static_cast<size_t>(b) * h_ld + j, h);
    if (save_gates) store_gates(row, j, hidden, a);
    if (h_final) {
        store(h_final + cell, h);
        store(c_final + cell, c);
    }
}

// One backward step for every (b, j). dh = dy + dh_rec (dh_rec = dz_next W_hh, or dL/dh_T at the
// first step); dc carries dL/dc_t in and dL/dc_{t-1} out. Writes dz (pre-activation grads).
extern "C" __global__ void lstm_backward_step(const float* gates, const float* c_cur,
                                              const float* c_prev, const float* dy, int dy_ld,
                                              const float* dh_rec, float* dc, storage_t* dz,
                                              int batch, int hidden) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    const int b = blockIdx.y;
    if (j >= hidden || b >= batch) return;
    const size_t cell = static_cast<size_t>(b) * hidden + j;
    Gates a = load_gates(gates + static_cast<size_t>(b) * 4 * hidden, j, hidden);
    const float tanh_c = tanhf(c_cur[cell]);
    const float dh = dy[static_cast<size_t>(b) * dy_ld + j] + dh_rec[cell];
    const float dcell = dh * a.o * (1.0f - tanh_c * tanh_c) + dc[cell];
    storage_t* row = dz + static_cast<size_t>(b) * 4 * hidden;
    store(row + gate_at(0, j, hidden), dcell * a.g * a.i * (1.0f - a.i));
    store(row + gate_at(1, j, hidden), dcell * c_prev[cell] * a.f * (1.0f - a.f));
    store(row + gate_at(2, j, hidden), dcell * a.i * (1.0f - a.g * a.g));
    store(row + gate_at(3, j, hidden), dh * tanh_c * a.o * (1.0f - a.o));
    dc[cell] = dcell * a.f;
}

// Strided 2-D copies with conversion: rows x cols, source/destination row strides in elements.
// Rows stride over gridDim.y (at most 65535 blocks high).
extern "C" __global__ void storage_to_f32(const storage_t* src, int src_ld, float* dst, int dst_ld,
                                          int rows, int cols) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= cols) return;
    for (int r = blockIdx.y; r < rows; r += gridDim.y) {
        dst[static_cast<size_t>(r) * dst_ld + col] = to_float(src[static_cast<size_t>(r) * src_ld + col]);
    }
}

extern "C" __global__ void f32_to_storage(const float* src, int src_ld, storage_t* dst, int dst_ld,
                                          int rows, int cols) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= cols) return;
    for (int r = blockIdx.y; r < rows; r += gridDim.y) {
        store(dst + static_cast<size_t>(r) * dst_ld + col, src[static_cast<size_t>(r) * src_ld + col]);
    }
}

// Dropout between layers: dst = src * mask (forward, storage) and g *= mask (backward, fp32).
extern "C" __global__ void mask_storage(const storage_t* src, const float* mask, storage_t* dst,
                                        long long n) {
    for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<long long>(gridDim.x) * blockDim.x) {
        store(dst + i, to_float(src[i]) * mask[i]);
    }
}

extern "C" __global__ void mask_f32(float* g, const float* mask, long long n) {
    for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<long long>(gridDim.x) * blockDim.x) {
        g[i] *= mask[i];
    }
}
