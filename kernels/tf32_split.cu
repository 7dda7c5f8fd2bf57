// v25: the operands of a one-pass 3xTF32 GEMM (ecornn/gpu_blas.py, matmul_3xtf32_onepass).
// A row-major fp32 a [rows, k] is split into hi (rounded to TF32's 10 mantissa bits: a TF32 GEMM
// reads it without loss) and lo = a - hi, and written as three parts of out:
//   first, second, third = (lo, hi, hi) when lo_first, else (hi, lo, hi),
// concatenated along the GEMM's reduction dimension (the columns, or with along_rows the rows):
// [a_lo | a_hi | a_hi] . [b_hi ; b_lo ; b_hi] = a_lo b_hi + a_hi b_lo + a_hi b_hi, 3xTF32's three
// products in one GEMM, the small terms first.
// v36: in chunks of the reduction (chunk >= its length: one chunk, v25's layout): chunk j's three parts
// lie together, [lo_j | hi_j | hi_j], so each chunk can be a GEMM of its own whose fp32 sums the caller
// adds (gpu_blas.matmul_3xtf32_onepass with chunk): the tensor cores' accumulation error grows with the
// reduction's length, the adds between chunks round to nearest.
// Rows are the y dimension (grid-stride), columns x: coalesced.
#include "split_chunks.cuh"


extern "C" __global__ void tf32_split3(const float* __restrict__ a, int rows, int k, int along_rows,
                                       int chunk, int lo_first, float* __restrict__ out) {
    for (int r = blockIdx.y; r < rows; r += gridDim.y) {
        const float* src = a + static_cast<long long>(r) * k;
        for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < k; c += gridDim.x * blockDim.x) {
            const float x = src[c];
            const float hi = __uint_as_float((__float_as_uint(x) + 0x1000u) & 0xFFFFE000u);
            const float lo = x - hi;
            const float part[3] = {lo_first ? lo : hi, lo_first ? hi : lo, hi};
#pragma unroll
            for (int p = 0; p < 3; ++p) {
                if (along_rows) out[split_position(r, rows, chunk, p) * k + c] = part[p];
                else out[3LL * k * r + split_position(c, k, chunk, p)] = part[p];
            }
        }
    }
}
