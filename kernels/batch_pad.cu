// v48: batch padding (v47, layouts/batch.py) in one launch: up to three C-ordered arrays [rows][b][...] copied
// into [rows][B][...] with the added columns zero, each row's bytes copied and the rest of the wider row zeroed
// in one pass (the memcpy2D + fill of layouts.pad_columns take two, and a node each). x_at (a replayed graph,
// ecornn/engines/persistent_replay_ring.py: {x, h0, c0, tag matched}; null otherwise): on a matched tag array
// 0 is read at the caller's x, else from its buffer (NaN-filled by the ring after a wrong tag), so the graph
// copies x once instead of twice. 16-byte units where an array's rows and addresses allow, else 2 bytes (every
// element type here is 2 or 4 bytes wide). The same rows with the destination's the shorter cut a replay's padded
// outputs back to the caller's columns (ecornn/engines/batch_pad.py, first_columns_into).

template <typename Unit>
__device__ __forceinline__ void pad_units(long long i, long long stride, char* dst, const char* src, long long rows,
                                          long long src_row, long long dst_row) {
    const long long have = src_row / sizeof(Unit), per_row = dst_row / sizeof(Unit);   // have > per_row: a cut
    for (long long u = i; u < rows * per_row; u += stride) {
        const long long r = u / per_row, c = u - r * per_row;
        Unit v{};
        if (c < have) v = reinterpret_cast<const Unit*>(src + r * src_row)[c];
        reinterpret_cast<Unit*>(dst + r * dst_row)[c] = v;
    }
}

__device__ __forceinline__ void pad_array(long long i, long long stride, char* dst, const char* src, long long rows,
                                          long long src_row, long long dst_row) {
    const bool wide = (src_row % 16 == 0) && (dst_row % 16 == 0) && (reinterpret_cast<unsigned long long>(src) % 16 == 0)
                      && (reinterpret_cast<unsigned long long>(dst) % 16 == 0);
    if (wide) pad_units<uint4>(i, stride, dst, src, rows, src_row, dst_row);
    else pad_units<unsigned short>(i, stride, dst, src, rows, src_row, dst_row);
}

extern "C" __global__ void pad_rows3(const long long* __restrict__ x_at,
                                     char* d0, const char* s0, long long rows0, long long src_row0, long long dst_row0,
                                     char* d1, const char* s1, long long rows1, long long src_row1, long long dst_row1,
                                     char* d2, const char* s2, long long rows2, long long src_row2, long long dst_row2) {
    if (x_at != nullptr && x_at[3] != 0) s0 = reinterpret_cast<const char*>(x_at[0]);
    const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
    pad_array(i, stride, d0, s0, rows0, src_row0, dst_row0);
    if (rows1 > 0) pad_array(i, stride, d1, s1, rows1, src_row1, dst_row1);
    if (rows2 > 0) pad_array(i, stride, d2, s2, rows2, src_row2, dst_row2);
}
