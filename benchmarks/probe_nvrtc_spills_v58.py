"""v58 probe: NVRTC's registers and spills for fp32 H=1024 B=16's clustered grouped split forward (v44's plan) at
each register k-tile count, in this checkout's kernel and (if given) an older kernels/ directory: the device's
build spilled where nvcc 13.0 here does not (v57 call 13, v58 call 1)."""
import sys
import cupy
from ecornn import LSTMConfig
from ecornn.engines import persistent
from ecornn.kernels import source

print("nvrtc", cupy.cuda.nvrtc.getVersion(), "runtime", cupy.cuda.runtime.runtimeGetVersion(),
      "driver", cupy.cuda.runtime.driverGetVersion())
config = LSTMConfig(1024, 1024, 1, False, "float32", 16, 20)
asked = persistent.plans_for(config, False)["forward"]
print(asked.describe())


def report(code, label, reg_k_tiles, cooperative):
    defines = {**asked.with_reg_tiles(reg_k_tiles).defines(), **persistent._flag_defines()}
    options = ("-std=c++17",) + tuple(f"-D{k}={v}" for k, v in sorted(defines.items()))
    module = cupy.RawModule(code=code, options=options, enable_cooperative_groups=cooperative)
    kern = module.get_function("persistent_lstm_fwd")
    print(f"{label} REG_K_TILES={reg_k_tiles} cooperative={cooperative}: regs {kern.num_regs} "
          f"local {kern.local_size_bytes} B", flush=True)


for reg in (2, 1):
    report(source(asked.kernel_file), "now", reg, True)
report(source(asked.kernel_file), "now", 2, False)
if len(sys.argv) > 1:   # an older kernels/ directory, its headers inlined by its own source()
    import importlib.util
    spec = importlib.util.spec_from_file_location("old_kernels", f"{sys.argv[1]}/__init__.py")
    old = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(old)
    report(old.source(asked.kernel_file), "old", 2, True)
