// v36: where part p (0..2) of reduction index i lands in a three-part split operand whose reduction of
// length n is cut into chunks of `chunk` (the last one shorter): chunk j's parts lie together,
// [part0_j | part1_j | part2_j], so a GEMM over one chunk reads one contiguous range.
// chunk >= n gives one chunk: p n + i, the unchunked layout.

__device__ __forceinline__ long long split_position(int i, int n, int chunk, int p) {
    const int start = (i / chunk) * chunk;
    const int length = min(chunk, n - start);
    return 3LL * start + static_cast<long long>(p) * length + (i - start);
}
