// A graph replay's inputs (v17): the caller's x, h0 and c0 copied into the graph's own input
// buffers by one kernel launch instead of three cudaMemcpyAsync calls (~5 us of host time each
// before the graph launch on the H100 host: benchmarks/profile_replay_host.py). Sources and
// destinations start 16-byte aligned (the host checks; memcpys otherwise); n0..n2 are byte counts.
__device__ __forceinline__ void copy_part(long long i, char* dst, const char* src, long long bytes) {
    const long long words = bytes / 16;
    if (i < words) {
        reinterpret_cast<uint4*>(dst)[i] = reinterpret_cast<const uint4*>(src)[i];
    } else if (i == words) {   // the last bytes % 16 bytes
        for (long long b = 16 * words; b < bytes; ++b) dst[b] = src[b];
    }
}

extern "C" __global__ void copy_three(char* d0, const char* __restrict__ s0, long long n0,
                                      char* d1, const char* __restrict__ s1, long long n1,
                                      char* d2, const char* __restrict__ s2, long long n2) {
    const long long w0 = n0 / 16 + 1, w1 = n1 / 16 + 1, w2 = n2 / 16 + 1;   // + 1: the tail's thread
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < w0 + w1 + w2; i += stride) {
        if (i < w0) copy_part(i, d0, s0, n0);
        else if (i < w0 + w1) copy_part(i - w0, d1, s1, n1);
        else copy_part(i - w0 - w1, d2, s2, n2);
    }
}
