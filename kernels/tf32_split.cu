// v25: the operands of a one-pass 3xTF32 GEMM (ecornn/gpu_blas.py, matmul_3xtf32_onepass).
// A row-major fp32 a [rows, k] is split into hi (rounded to TF32's 10 mantissa bits: a TF32 GEMM
// reads it without loss) and lo = a - hi, and written as three parts of out:
//   first, second, third = (lo, hi, hi) when lo_first, else (hi, lo, hi),
// part p of row r, column c at out[r * row_stride + p * part_stride + c]. Concatenating along the
// GEMM's reduction dimension, [a_lo | a_hi | a_hi] . [b_hi ; b_lo ; b_hi] = a_lo b_hi + a_hi b_lo +
// a_hi b_hi: 3xTF32's three products in one GEMM, the small terms first.
// Rows are the y dimension (grid-stride), columns x: coalesced and no index division.

extern "C" __global__ void tf32_split3(const float* __restrict__ a, int rows, int k,
                                       long long row_stride, long long part_stride, int lo_first,
                                       float* __restrict__ out) {
    for (int r = blockIdx.y; r < rows; r += gridDim.y) {
        const float* src = a + static_cast<long long>(r) * k;
        float* dst = out + r * row_stride;
        for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < k; c += gridDim.x * blockDim.x) {
            const float x = src[c];
            const float hi = __uint_as_float((__float_as_uint(x) + 0x1000u) & 0xFFFFE000u);
            const float lo = x - hi;
            dst[c] = lo_first ? lo : hi;
            dst[part_stride + c] = lo_first ? hi : lo;
            dst[2 * part_stride + c] = hi;
        }
    }
}
