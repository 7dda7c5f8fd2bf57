// v28: the operands of an fp32-accurate GEMM on the fp16 tensor cores (ecornn/gpu_blas.py,
// matmul_fp16_split3), twice the rate of v25's one-pass 3xTF32. Each row of a row-major fp32
// a [rows, k] is scaled by a power of two s_r (from the row's largest |value|) into [2^13, 2^14), then
// split into hi = fp16(a s) and lo = fp16(a s - hi): about 22 significant bits relative to the row's
// largest value. Written as three parts of out (fp16 bits) along the GEMM's reduction dimension:
// (hi, lo, hi) for the left operand, (lo, hi, hi) for the right one (whose rows are the result's
// columns), so [a_hi | a_lo | a_hi] . [b_lo ; b_hi ; b_hi] = a_hi b_lo + a_lo b_hi + a_hi b_hi, the
// small terms first; row_exp[r] = -log2(s_r), an integer: the result is unscaled by ldexpf with the
// sum of its row's and column's exponents, exact and without a subnormal product of two scales (which
// fast math flushes to 0). Scales on the device: a captured graph (the weights' refresh, v10) stays
// right when the values change.
#include <cuda_fp16.h>
#include "split_chunks.cuh"

// The power-of-two exponent that brings m (> 0, finite) into [2^13, 2^14); 0 for 0 or non-finite m.
__device__ __forceinline__ int scale_exponent(float m) {
    if (!(m > 0.0f) || !isfinite(m)) return 0;
    int e;
    frexpf(m, &e);   // m = f 2^e, f in [0.5, 1)
    return 14 - e;
}

// Largest |a[c]| of one row, over the block (blockDim.x a multiple of 32, at most 1024).
__device__ float row_abs_max(const float* row, int k) {
    __shared__ float warp_max[32];
    float m = 0.0f;
    for (int c = threadIdx.x; c < k; c += blockDim.x) m = fmaxf(m, fabsf(row[c]));
    for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = m;
    __syncthreads();
    if (threadIdx.x < 32) {
        m = threadIdx.x < blockDim.x / 32 ? warp_max[threadIdx.x] : 0.0f;
        for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
        if (threadIdx.x == 0) warp_max[0] = m;
    }
    __syncthreads();
    m = warp_max[0];
    __syncthreads();   // warp_max is reused by the next row
    return m;
}

// One block per row (grid-stride). a_at (v35, a replayed graph; null otherwise): the replay ring's
// fetched {x, h0, c0, tag matched}; on a matched tag the rows are read at the caller's x (a's bytes),
// else from a, which the ring has NaN-filled (kernels/replay_inputs.cu, copy_current).
// v36: the parts in chunks of `chunk` columns (split_chunks.cuh; chunk >= k: v28's layout), one GEMM each.
extern "C" __global__ void fp16_split3(const float* __restrict__ a, int rows, int k, int chunk, int lo_first,
                                       unsigned short* __restrict__ out, int* __restrict__ row_exp,
                                       const long long* __restrict__ a_at) {
    if (a_at != nullptr && a_at[3] != 0) a = reinterpret_cast<const float*>(a_at[0]);
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        const float* src = a + static_cast<long long>(r) * k;
        const int e = scale_exponent(row_abs_max(src, k));
        if (threadIdx.x == 0) row_exp[r] = -e;
        unsigned short* dst = out + static_cast<long long>(r) * 3 * k;
        for (int c = threadIdx.x; c < k; c += blockDim.x) {
            const float x = ldexpf(src[c], e);
            const __half hi = __float2half_rn(x);
            const __half lo = __float2half_rn(x - __half2float(hi));
            const unsigned short h = __half_as_ushort(hi), l = __half_as_ushort(lo);
            dst[split_position(c, k, chunk, 0)] = lo_first ? l : h;
            dst[split_position(c, k, chunk, 1)] = lo_first ? h : l;
            dst[split_position(c, k, chunk, 2)] = h;
        }
    }
}

// v48: the same split, one warp per row and four values per lane (16-byte loads, 8-byte stores): no
// block-wide barriers per row (row_abs_max's three), a quarter of the memory instructions. Bitwise
// fp16_split3 (the same maximum, scale and roundings). Needs k % 4 == 0 and chunk % 4 == 0 (every
// chunk, the last one too, then starts and ends on a multiple of 4: four values land together in each
// part); the host checks. A source off 16-byte alignment (a caller's x read by reference) is read
// value by value.
__device__ __forceinline__ void split4_store(unsigned short* dst, int c, int k, int chunk, int lo_first,
                                             float4 v, int e) {
    const float x[4] = {ldexpf(v.x, e), ldexpf(v.y, e), ldexpf(v.z, e), ldexpf(v.w, e)};
    unsigned short hi[4], lo[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const __half h = __float2half_rn(x[j]);
        hi[j] = __half_as_ushort(h);
        lo[j] = __half_as_ushort(__float2half_rn(x[j] - __half2float(h)));
    }
    const uint2 hv = make_uint2(hi[0] | (unsigned(hi[1]) << 16), hi[2] | (unsigned(hi[3]) << 16));
    const uint2 lv = make_uint2(lo[0] | (unsigned(lo[1]) << 16), lo[2] | (unsigned(lo[3]) << 16));
    *reinterpret_cast<uint2*>(dst + split_position(c, k, chunk, 0)) = lo_first ? lv : hv;
    *reinterpret_cast<uint2*>(dst + split_position(c, k, chunk, 1)) = lo_first ? hv : lv;
    *reinterpret_cast<uint2*>(dst + split_position(c, k, chunk, 2)) = hv;
}

__device__ __forceinline__ float4 load4(const float* src, int c, bool aligned) {
    if (aligned) return *reinterpret_cast<const float4*>(src + c);
    return make_float4(src[c], src[c + 1], src[c + 2], src[c + 3]);
}

extern "C" __global__ void fp16_split3_warps(const float* __restrict__ a, int rows, int k, int chunk, int lo_first,
                                             unsigned short* __restrict__ out, int* __restrict__ row_exp,
                                             const long long* __restrict__ a_at) {
    if (a_at != nullptr && a_at[3] != 0) a = reinterpret_cast<const float*>(a_at[0]);
    const bool aligned = reinterpret_cast<unsigned long long>(a) % 16 == 0;
    const int lane = threadIdx.x % 32, warps = blockDim.x / 32;
    for (int r = blockIdx.x * warps + threadIdx.x / 32; r < rows; r += gridDim.x * warps) {
        const float* src = a + static_cast<long long>(r) * k;
        float m = 0.0f;
        for (int c = 4 * lane; c < k; c += 128) {
            const float4 v = load4(src, c, aligned);
            m = fmaxf(m, fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w))));
        }
        for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
        const int e = scale_exponent(m);
        if (lane == 0) row_exp[r] = -e;
        unsigned short* dst = out + static_cast<long long>(r) * 3 * k;
        for (int c = 4 * lane; c < k; c += 128) split4_store(dst, c, k, chunk, lo_first, load4(src, c, aligned), e);
    }
}

// out[r][c] *= 2^(row_exp[r] + col_exp[c]) (the GEMM's result back to the operands' units).
extern "C" __global__ void unscale_rows_cols(float* __restrict__ out, long long rows, int n,
                                            const int* __restrict__ row_exp, const int* __restrict__ col_exp) {
    const long long total = rows * n;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x)
        out[i] = ldexpf(out[i], row_exp[i / n] + col_exp[i % n]);
}

// v35: the same product, four columns per thread (n % 4 == 0; out and col_exp 16-byte aligned) and the
// rows strided over blockIdx.y: no 64-bit index division per element, the column exponents loaded
// once per thread, 16-byte accesses. Bitwise unscale_rows_cols (the same ldexpf of the same values).
extern "C" __global__ void unscale_rows_cols4(float* __restrict__ out, int rows, int n,
                                             const int* __restrict__ row_exp, const int* __restrict__ col_exp) {
    const int c = 4 * (blockIdx.x * blockDim.x + threadIdx.x);
    if (c >= n) return;
    const int4 ce = *reinterpret_cast<const int4*>(col_exp + c);
#pragma unroll 4
    for (int r = blockIdx.y; r < rows; r += gridDim.y) {
        const int e = row_exp[r];
        float4* p = reinterpret_cast<float4*>(out + static_cast<long long>(r) * n + c);
        float4 v = *p;
        v.x = ldexpf(v.x, e + ce.x);
        v.y = ldexpf(v.y, e + ce.y);
        v.z = ldexpf(v.z, e + ce.z);
        v.w = ldexpf(v.w, e + ce.w);
        *p = v;
    }
}

// v29: the layer input of the fp32 split kernel's in-kernel projection (persistent_mma.cu, SPLIT with
// IN_K_TILES). Row r = t B + b of a [T B, k] is scaled by its power of two 2^e into [2^13, 2^14) and
// split as the kernel splits h: hi = fp16(a 2^e), lo = fp16((a 2^e - hi) 2^11). out (fp16 bits):
// the hi rows [T B][k], the lo rows [T B][k], then the rows' factors 2^-e as fp32 [T B] (what the
// kernel multiplies the row's products by).
extern "C" __global__ void split_x_rows(const float* __restrict__ a, int rows, int k,
                                        unsigned short* __restrict__ out) {
    const long long values = static_cast<long long>(rows) * k;
    float* factors = reinterpret_cast<float*>(out + 2 * values);
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        const float* src = a + static_cast<long long>(r) * k;
        const int e = scale_exponent(row_abs_max(src, k));
        if (threadIdx.x == 0) factors[r] = ldexpf(1.0f, -e);
        unsigned short* hi_row = out + static_cast<long long>(r) * k;
        unsigned short* lo_row = hi_row + values;
        for (int c = threadIdx.x; c < k; c += blockDim.x) {
            const float x = ldexpf(src[c], e);
            const __half hi = __float2half_rn(x);
            hi_row[c] = __half_as_ushort(hi);
            lo_row[c] = __half_as_ushort(__float2half_rn((x - __half2float(hi)) * 2048.0f));
        }
    }
}
