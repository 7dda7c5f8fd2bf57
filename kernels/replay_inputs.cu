// A graph replay's inputs (v17): the caller's x, h0 and c0 copied into the graph's own input
// buffers by one kernel launch. Three cudaMemcpyAsync calls cost ~5.6 us of host time each before
// the launch (H100 host, benchmarks/profile_replay_host.py), a kernel launch about as much as one.
// Pointers and byte counts are multiples of 16 (the host checks; memcpys otherwise).
extern "C" __global__ void copy_three(uint4* d0, const uint4* __restrict__ s0, long long n0,
                                      uint4* d1, const uint4* __restrict__ s1, long long n1,
                                      uint4* d2, const uint4* __restrict__ s2, long long n2) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n0 + n1 + n2; i += stride) {
        if (i < n0) d0[i] = s0[i];
        else if (i < n0 + n1) d1[i - n0] = s1[i - n0];
        else d2[i - n0 - n1] = s2[i - n0 - n1];
    }
}
