"""fused v3: one tensor-core kernel per step for fp16/bf16 (kernels/fused_step_mma.cu).

Pure Python/NumPy (CuPy arrays work too): the size rule deciding when the mma step replaces the
cuBLAS GEMM + pointwise pair, the tile choice, and the packing of W_hh into mma B-fragment order.

Packing. The kernels compute D[b][n] = sum_k act[b][k] Op[k][n] with mma.m16n8k16 (A = activations,
B = Op). Op is W_hh^T (forward: n = gate-interleaved row 4j+q, k = hidden input) or W_hh (backward:
n = hidden unit, k = gate-interleaved row). Per the maps of kernels/mma_common.cuh (g = lane/4,
c = lane%4) a lane holds logical k = 2c, 2c+1 in a0/a1/b0 and 2c+8, 2c+9 in a2/a3/b1. The sum over k
does not care which physical k sits at which logical k as long as A and B agree, so the kernels use
physical k = 4c + 2*half + (0 | 1) (half 0: a0/a1/b0, half 1: a2/a3/b1): a lane's four activations
of a row (a0 and a2) are then ONE 8-byte load and a warp reads whole 32-byte sectors.
The packed array is uint32 [col_block][k_step][lane][2*n_tiles], entry 2*nt + half holding
Op[16*ks + 4c + 2*half + (0 | 1)][col_block*8*n_tiles + 8*nt + g] (lower k in the low 16 bits). A
warp's B loads for one k-step are then 8*n_tiles contiguous bytes per lane. Rows of Op past K and
columns past N are zero.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Use the mma step only while the recurrent product of one step is at most this many GFLOP
# (2 * B * 4H * H) and the batch at most MMA_MAX_BATCH: there the step is latency-bound and one launch
# instead of two wins. Measured on the H200 (results/fused_mma_h200.md, forward on/off): 1.3-1.6x at
# 0.01-0.03 GFLOP, 1.0-1.26x at 0.07-0.13, 0.69-0.92x from 0.27 up (cuBLAS's pipelined GEMM; the mma
# kernel has no shared-memory staging), and 0.72x at H=256 B=256 (0.13 GFLOP, but 4 batch tiles re-read
# the weights).
MMA_MAX_STEP_GFLOP = 0.14
MMA_MAX_BATCH = 128

# A grid of at least this fraction of the SM count counts as "fills the GPU" when choosing tiles.
FILL_FRACTION = 0.9
DEFAULT_SM_COUNT = 132
DEFAULT_SMEM_PER_BLOCK = 227 * 1024

_FWD_UNITS = (8, 4)     # hidden units per block, forward (4 gate columns each: n_tiles = units / 2)
_BWD_UNITS = (16, 8)    # hidden units per block, backward (n_tiles = units / 8)
_ROWS = (64, 32, 16)    # batch rows per block (m_tiles = rows / 16)


@dataclass(frozen=True)
class Tile:
    """One compiled configuration of fused_step_mma.cu and the grid it runs."""

    m_tiles: int
    n_tiles: int
    warps: int
    backward: bool
    m_warps: int = 1    # warp groups splitting the rows (the other warps_ / m_warps split K)

    def __post_init__(self):
        if self.warps % self.m_warps or self.m_tiles % self.m_warps:
            raise ValueError(f"m_warps {self.m_warps} must divide warps {self.warps} and m_tiles {self.m_tiles}")

    @property
    def k_warps(self) -> int:
        """Warps splitting K (K-slices): the number of partial tiles summed per output."""
        return self.warps // self.m_warps

    @property
    def rows(self) -> int:
        return 16 * self.m_tiles

    @property
    def cols(self) -> int:
        return 8 * self.n_tiles

    @property
    def units(self) -> int:
        return self.cols if self.backward else self.cols // 4

    @property
    def threads(self) -> int:
        return 32 * self.warps

    def smem_bytes(self) -> int:
        """Per-K-slice fp32 partial tiles, pitch cols + 8 (as the kernel lays them out)."""
        return self.k_warps * self.rows * (self.cols + 8) * 4

    def grid(self, batch: int, hidden: int) -> tuple:
        return (-(-hidden // self.units), -(-batch // self.rows))

    def defines(self, dtype: str) -> dict:
        return {"BF16": int(dtype == "bfloat16"), "M_TILES": self.m_tiles, "N_TILES": self.n_tiles,
                "NWARPS": self.warps, "M_WARPS": self.m_warps}

    @property
    def pack_key(self) -> tuple:
        """What the packed weights depend on: direction of the product and columns per block."""
        return (self.backward, self.n_tiles)

    def describe(self) -> str:
        split = f"({self.m_warps}x{self.k_warps})" if self.m_warps > 1 else ""
        return f"{'bwd' if self.backward else 'fwd'} {self.rows}x{self.units}u/{self.warps}w{split}"


def step_gflop(batch: int, hidden: int) -> float:
    return 2.0 * batch * 4 * hidden * hidden / 1e9


def mma_decision(config, opts) -> tuple:
    """(use the mma step?, why) for a config under FusedOptions ``opts``."""
    if config.dtype not in ("float16", "bfloat16"):
        return False, f"{config.dtype}: cuBLAS + pointwise (the mma step is 16-bit only)"
    if not getattr(opts, "epilogue", True):
        return False, "epilogue off: cuBLAS + pointwise"
    if not opts.interleave:
        return False, "gate-blocked layout: cuBLAS + pointwise (the mma step needs interleaved gates)"
    flop = step_gflop(config.batch, config.hidden_size)
    if flop > MMA_MAX_STEP_GFLOP:
        return False, f"step product {flop:.2f} GFLOP > {MMA_MAX_STEP_GFLOP}: cuBLAS + pointwise"
    if config.batch > MMA_MAX_BATCH:
        return False, f"batch {config.batch} > {MMA_MAX_BATCH}: cuBLAS + pointwise"
    return True, f"mma step (product {flop:.2f} GFLOP <= {MMA_MAX_STEP_GFLOP})"


def _warps_for(k: int, m_tiles: int, n_tiles: int) -> int:
    """Warps splitting K, about 4 k-steps each or more: up to 16 for small tiles (<= 128
    registers a thread at 512 threads), 8 otherwise."""
    steps = -(-k // 16)
    if steps >= 64 and m_tiles * n_tiles <= 4:
        return 16
    return 8 if steps >= 32 else 4 if steps >= 8 else 2


MAX_WARPS = 16
# Forward tiles with at least this many m-tiles split their rows over 2 warp groups (v3.1; 2 would
# also split the 32-row tiles: benchmarks/profile_fused_step.py times both).
M_SPLIT_MIN_M_TILES = 4


def _m_warps_for(m_tiles: int, k_warps: int, backward: bool) -> int:
    """Forward tiles of 4 m-tiles split their rows over 2 warp groups (2 m-tiles a warp) while the
    block stays <= 16 warps: v3 ran them as 4 m-tiles a warp, whose 20 fragment registers per
    k-step allowed only 2 k-steps per load round, so a warp's K-slice took 2 dependent L2 round
    trips (fp16 H=256 B=128: 5.6 us/step against 4.5 at B=64, one round); with 2 m-tiles a warp
    the whole K-slice is one round, the block has twice the warps (loads in flight) and each
    thread one epilogue pair. The backward's 16-warp tiles are one round already."""
    if backward or m_tiles < M_SPLIT_MIN_M_TILES or 2 * k_warps > MAX_WARPS:
        return 1
    return 2


def choose_tile(batch: int, hidden: int, backward: bool, sm_count: int = DEFAULT_SM_COUNT,
                smem_limit: int = DEFAULT_SMEM_PER_BLOCK) -> Tile:
    """Largest tile (fewest re-reads of W_hh and of the activations) whose grid still fills the
    GPU; the tile with the most blocks if none does. Warps: K-slices per _warps_for, times the
    row groups of _m_warps_for."""
    k = 4 * hidden if backward else hidden
    padded_batch = -(-batch // 16) * 16
    candidates = []
    for rows in _ROWS:
        if rows > padded_batch:
            continue
        for units in (_BWD_UNITS if backward else _FWD_UNITS):
            n_tiles = units // 8 if backward else units // 2
            k_warps = _warps_for(k, rows // 16, n_tiles)
            m_warps = _m_warps_for(rows // 16, k_warps, backward)
            tile = Tile(rows // 16, n_tiles, k_warps * m_warps, backward, m_warps)
            if tile.smem_bytes() <= smem_limit:
                candidates.append(tile)
    target = FILL_FRACTION * sm_count
    filling = [t for t in candidates if t.grid(batch, hidden)[0] * t.grid(batch, hidden)[1] >= target]
    if filling:
        return _prefer_more_units(filling[0], batch, hidden, sm_count, smem_limit)
    return max(candidates, key=lambda t: t.grid(batch, hidden)[0] * t.grid(batch, hidden)[1])


def _prefer_more_units(tile: Tile, batch: int, hidden: int, sm_count: int, smem_limit: int) -> Tile:
    """At B >= 128 a forward 64-row tile gives way to 32 rows x twice the units, one m-tile per warp
    (same warps, same blocks, half the activation fragments per warp): measured on the H200 at fp16
    H=256 B=128, 32 x 8 units / 8 warps (2 x 4) ran 4.26 µs/step against 5.18 for 64 x 4 (2 x 4)."""
    if tile.backward or tile.m_tiles != 4 or batch < 128:
        return tile
    other = Tile(2, 2 * tile.n_tiles, tile.warps, False, 2)
    rows, cols = other.grid(batch, hidden)
    fills = rows * cols >= FILL_FRACTION * sm_count
    return other if fills and other.smem_bytes() <= smem_limit else tile


# ---- packing --------------------------------------------------------------------------------

def _module(a):
    return np if isinstance(a, np.ndarray) else __import__("cupy")


def pack_fragments(op, n_tiles: int):
    """Op [K, N] 16-bit words (uint16) -> uint32 [col_blocks, k_steps, 32, 2*n_tiles] B fragments."""
    xp = _module(op)
    k, n = op.shape
    cols = 8 * n_tiles
    k_steps, blocks = -(-k // 16), -(-n // cols)
    padded = xp.zeros((16 * k_steps, cols * blocks), dtype=xp.uint16)
    padded[:k, :n] = op
    # k = 16 ks + 4 c + 2 half + p;  n = cols cb + 8 nt + g
    tiles = padded.reshape(k_steps, 4, 2, 2, blocks, n_tiles, 8)
    #                      ks      c  half p  cb      nt       g
    ordered = tiles.transpose(4, 0, 6, 1, 5, 2, 3)  # cb, ks, g, c, nt, half, p
    ordered = xp.ascontiguousarray(ordered).reshape(blocks, k_steps, 32, 2 * n_tiles, 2)
    return ordered.view(xp.uint32).reshape(blocks, k_steps, 32, 2 * n_tiles)


def unpack_fragments(packed, k: int, n: int):
    """Inverse of pack_fragments: Op [K, N] uint16 (the padding dropped)."""
    xp = _module(packed)
    blocks, k_steps, _, two_nt = packed.shape
    n_tiles = two_nt // 2
    halves = xp.ascontiguousarray(packed).view(xp.uint16).reshape(blocks, k_steps, 8, 4, n_tiles, 2, 2)
    op = halves.transpose(1, 3, 5, 6, 0, 4, 2).reshape(16 * k_steps, blocks * 8 * n_tiles)
    return op[:k, :n]


def forward_operand(w_hh_interleaved):
    """Op of the forward step: W_hh^T [H, 4H] (gate-interleaved columns)."""
    return w_hh_interleaved.T


def pack_weights(w_hh_interleaved, tile: Tile):
    """W_hh (gate-interleaved rows [4H, H], 16-bit words) packed for ``tile``'s kernel."""
    words = w_hh_interleaved.view(np.uint16)  # fp16 arrays too: pack bits, never convert values
    op = words if tile.backward else forward_operand(words)
    return pack_fragments(op, tile.n_tiles)
