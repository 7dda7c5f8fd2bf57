"""Let FlashRNN 1.0.8 build on CUDA 13: its gpu_info extension reads cudaDeviceProp fields that
CUDA 13 removed (clockRate, computeMode, ...), so torch's JIT build of `gpu_info2` fails before any
FlashRNN kernel is compiled. FlashRNN's Python code never reads those fields; this replaces each
read by 0 in an installed (or unpacked) flashrnn tree. Idempotent.

    python benchmarks/patch_flashrnn_cuda13.py /tmp/frsite
"""
import re
import sys
from pathlib import Path

REMOVED_IN_CUDA13 = ("clockRate", "deviceOverlap", "kernelExecTimeoutEnabled", "computeMode",
                     "maxTexture1DLinear", "memoryClockRate", "singleToDoublePrecisionPerfRatio",
                     "cooperativeMultiDeviceLaunch")
FIELD_READ = re.compile(r"\bprop\.(%s)\b" % "|".join(REMOVED_IN_CUDA13))


def patch(root: Path) -> int:
    """Number of field reads replaced under ``root``."""
    count = 0
    for path in root.rglob("gpu_info*.cc"):
        text = path.read_text()
        new, n = FIELD_READ.subn(r"0 /* \1: removed in CUDA 13 */", text)
        if n:
            path.write_text(new)
            count += n
    return count


if __name__ == "__main__":
    print(f"patched {patch(Path(sys.argv[1]))} cudaDeviceProp reads")
