"""Pure layout transforms between the framework's weight layout and the kernels' layouts.

Installed as ``ecornn.layouts``. Every transform works on NumPy and CuPy arrays alike, copies
nothing it does not have to, and has an exact inverse (see tests/test_layouts.py).
"""
from .batch import first_columns, pad_columns
from .gates import (block_tiles, gate_deinterleave, gate_deinterleave_as, gate_deinterleave_copy, gate_interleave,
                    interleaved_permutation, unblock_tiles)

__all__ = ["gate_interleave", "gate_deinterleave", "gate_deinterleave_as", "gate_deinterleave_copy",
           "interleaved_permutation", "block_tiles", "unblock_tiles", "pad_columns", "first_columns"]
