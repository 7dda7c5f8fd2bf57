"""What the planner knows about a GPU: a DeviceSpec read off the device, or a synthetic one.

Everything the capacity model and the cost model use is derived from properties any CUDA device
reports (SM count, register file, shared memory, clocks, memory bus), so a GPU the planner has
never seen still gets feasible plans.
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import asdict, dataclass

# FMA-pipe throughput per SM per clock, by architecture (dense, flops = 2 x FMAs).
_FP32_FLOPS_PER_CLK_SM = {7: 128, 8: 128, 9: 256, 10: 256, 12: 256}   # sm_80 A100: 64 FMA/clk
_MMA_FLOPS_PER_CLK_SM = {7: 1024, 8: 2048, 9: 4096, 10: 8192, 12: 2048}  # 16-bit tensor cores


@dataclass(frozen=True)
class DeviceSpec:
    name: str
    compute_capability: tuple
    sm_count: int
    regs_per_sm: int              # 32-bit registers
    regs_per_block: int
    smem_per_sm: int              # bytes
    smem_per_block_optin: int     # bytes
    max_threads_per_sm: int
    l2_bytes: int
    clock_ghz: float
    mem_bandwidth_gbs: float

    @property
    def fp32_tflops(self) -> float:
        per_clk = _FP32_FLOPS_PER_CLK_SM.get(self.compute_capability[0], 128)
        if self.compute_capability == (8, 0):
            per_clk = 128  # A100: 64 FP32 FMA/clk/SM
        return self.sm_count * per_clk * self.clock_ghz / 1e3

    @property
    def tensor_tflops(self) -> float:
        per_clk = _MMA_FLOPS_PER_CLK_SM.get(self.compute_capability[0], 1024)
        return self.sm_count * per_clk * self.clock_ghz / 1e3

    @property
    def onchip_bytes(self) -> int:
        """Registers + shared memory of all SMs: what a persistent kernel could keep resident."""
        return self.sm_count * (4 * self.regs_per_sm + self.smem_per_sm)

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_properties(cls, p: dict) -> "DeviceSpec":
        """Build from cupy.cuda.runtime.getDeviceProperties(...) output."""
        name = p["name"].decode() if isinstance(p["name"], bytes) else str(p["name"])
        bus_bits, mem_khz = p.get("memoryBusWidth", 0), p.get("memoryClockRate", 0)
        return cls(name=name, compute_capability=(p["major"], p["minor"]),
                   sm_count=p["multiProcessorCount"], regs_per_sm=p["regsPerMultiprocessor"],
                   regs_per_block=p["regsPerBlock"], smem_per_sm=p["sharedMemPerMultiprocessor"],
                   smem_per_block_optin=p["sharedMemPerBlockOptin"],
                   max_threads_per_sm=p["maxThreadsPerMultiProcessor"], l2_bytes=p["l2CacheSize"],
                   clock_ghz=p.get("clockRate", 1_500_000) / 1e6,
                   mem_bandwidth_gbs=2 * bus_bits / 8 * mem_khz / 1e6 or 1000.0)


H100 = DeviceSpec("NVIDIA H100 80GB HBM3", (9, 0), 132, 65536, 65536, 233472, 232448, 2048,
                  52428800, 1.98, 3350.0)
A100 = DeviceSpec("NVIDIA A100-SXM4-40GB", (8, 0), 108, 65536, 65536, 167936, 166912, 2048,
                  41943040, 1.41, 1555.0)
SMALL_20SM = DeviceSpec("synthetic 20-SM GPU (sm_86)", (8, 6), 20, 65536, 65536, 102400, 101376, 1536,
                        4194304, 1.7, 360.0)
H200 = DeviceSpec("NVIDIA H200", (9, 0), 132, 65536, 65536, 233472, 232448, 2048, 62914560, 1.98, 4800.0)
KNOWN = {"h100": H100, "h200": H200, "a100": A100, "small": SMALL_20SM}


def current() -> DeviceSpec | None:
    """The current CUDA device, or None without a GPU (properties read once per device)."""
    device_id = current_id()
    return None if device_id is None else _spec_of(device_id)


def current_id() -> int | None:
    """The current CUDA device's ordinal, or None without a GPU: a cheap key for per-device caches (v50)."""
    from .arrays import cupy_or_none, gpu_available
    return cupy_or_none().cuda.runtime.getDevice() if gpu_available() else None


# cudaDeviceAttr values: CUDA 13 dropped clockRate / memoryClockRate from cudaDeviceProp (CuPy's
# property dict then lacks them), but the attributes still answer.
_ATTRIBUTES = {"clockRate": 13, "memoryClockRate": 36, "memoryBusWidth": 37}


@functools.lru_cache(maxsize=None)
def _spec_of(device_id: int) -> DeviceSpec:
    cupy = __import__("cupy")
    props = dict(cupy.cuda.runtime.getDeviceProperties(device_id))
    for key, attribute in _ATTRIBUTES.items():
        if not props.get(key):
            try:
                props[key] = cupy.cuda.runtime.deviceGetAttribute(attribute, device_id)
            except Exception:
                pass
    return with_known_rates(DeviceSpec.from_properties(props), props)


def with_known_rates(spec: DeviceSpec, props: dict) -> DeviceSpec:
    """Fill clock and bandwidth that the driver did not report from a known device of that name."""
    if props.get("clockRate") and props.get("memoryClockRate"):
        return spec
    for known in KNOWN.values():
        if known.name == spec.name:
            return dataclasses.replace(spec, clock_ghz=known.clock_ghz,
                                       mem_bandwidth_gbs=known.mem_bandwidth_gbs)
    return spec
