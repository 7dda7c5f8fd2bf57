"""Device probe (v11): can a cooperative launch use thread-block clusters, and what does sharing the
step's staging loads across a cluster save? A synthetic persistent loop of 128 blocks x 512 threads
(one block per SM): per step every block publishes its 1/128 of a vector, grid.sync(), then stages the
whole vector (V bytes) from L2 into shared memory. With clusters of C blocks each block loads 1/C of
the vector and stores it into all C blocks' shared memory (DSMEM), then cluster.sync(). Prints
µs/step per (V, C) and whether the launch ran; writes OUT/probe_cluster_staging.json.

    python tools/probe_cluster_staging.py OUT_DIR
"""
import ctypes
import json
import sys
from pathlib import Path

import cupy as cp

from ecornn.engines.persistent import _LaunchConfig, _libcuda

SOURCE = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
constexpr int kThreads = 512, kVecU4 = VEC_U4, kPer = (kVecU4 + kThreads * C - 1) / (kThreads * C);

extern "C" __global__ void
#if C > 1
__cluster_dims__(C, 1, 1)
#endif
__launch_bounds__(kThreads, 1) probe(uint4* vec, int steps, float* out) {
    extern __shared__ uint4 s[];
    cg::grid_group grid = cg::this_grid();
#if C > 1
    cg::cluster_group cluster = cg::this_cluster();
    const int rank = cluster.block_rank();
#else
    const int rank = 0;
#endif
    const int per_block = kVecU4 / gridDim.x;
    float acc = 0.f;
    for (int step = 0; step < steps; ++step) {
        uint4* cur = vec + (size_t)(step & 1) * kVecU4;
        for (int i = threadIdx.x; i < per_block; i += kThreads)
            cur[blockIdx.x * per_block + i] = make_uint4(step, i, blockIdx.x, 1);
        grid.sync();
        uint4 v[kPer];
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
            const int i = (j * kThreads + threadIdx.x) * C + rank;
            v[j] = i < kVecU4 ? __ldcg(cur + i) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
            const int i = (j * kThreads + threadIdx.x) * C + rank;
            if (i < kVecU4) {
#if C > 1
#pragma unroll
                for (int r = 0; r < C; ++r) *cluster.map_shared_rank(s + i, r) = v[j];
#else
                s[i] = v[j];
#endif
            }
        }
#if C > 1
        cluster.sync();
#else
        __syncthreads();
#endif
        acc += __uint_as_float(s[(threadIdx.x * 7 + step) % kVecU4].x);
    }
    out[blockIdx.x * kThreads + threadIdx.x] = acc;
}
"""

COOPERATIVE_ATTR = 2   # CU_LAUNCH_ATTRIBUTE_COOPERATIVE


class _Attr(ctypes.Structure):
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_char * 64)]


def _launch_ex(kern, grid, smem, args):
    """cuLaunchKernelEx with the cooperative attribute (cluster size compiled in)."""
    lib = _libcuda()
    attr = _Attr(COOPERATIVE_ATTR, b"", (1).to_bytes(4, "little") + bytes(60))
    config = _LaunchConfig(grid, 1, 1, 512, 1, 1, smem, ctypes.c_void_p(cp.cuda.get_current_stream().ptr),
                     ctypes.cast(ctypes.pointer(attr), ctypes.c_void_p), 1)
    values = [ctypes.c_void_p(args[0].data.ptr), ctypes.c_int(args[1]), ctypes.c_void_p(args[2].data.ptr)]
    params = (ctypes.c_void_p * 3)(*[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in values])
    rc = lib.cuLaunchKernelEx(ctypes.byref(config), ctypes.c_void_p(kern.kernel.ptr), params, None)
    if rc != 0:
        raise RuntimeError(f"cuLaunchKernelEx: CUresult {rc}")


def measure(vec_bytes, cluster, steps=2000, grid=128):
    vec_u4 = vec_bytes // 16
    module = cp.RawModule(code=SOURCE, options=("-std=c++17", f"-DVEC_U4={vec_u4}", f"-DC={cluster}"),
                          enable_cooperative_groups=True)
    kern = module.get_function("probe")
    smem = 200 * 1024   # one block per SM whatever V is
    kern.max_dynamic_shared_size_bytes = smem
    vec = cp.zeros(2 * vec_u4 * 4, cp.uint32)
    out = cp.zeros(grid * 512, cp.float32)
    launch = ((lambda: _launch_ex(kern, grid, smem, (vec, steps, out))) if cluster > 1 else
              (lambda: kern((grid,), (512,), (vec, cp.int32(steps), out), shared_mem=smem)))
    launch()
    cp.cuda.runtime.deviceSynchronize()
    times = []
    for _ in range(5):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        launch()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop) * 1e3 / steps)
    return sorted(times)[len(times) // 2]


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for vec_bytes in (2048, 16384, 32768, 131072):
        for cluster in (1, 2, 4, 8):
            row = {"vec_bytes": vec_bytes, "cluster": cluster}
            try:
                row["us_per_step"] = measure(vec_bytes, cluster)
            except Exception as exc:  # recorded: whether the launch is possible is the question
                row["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
            rows.append(row)
            print(row, flush=True)
    (out / "probe_cluster_staging.json").write_text(json.dumps({"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
                                                                "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
