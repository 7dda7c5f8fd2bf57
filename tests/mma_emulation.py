"""NumPy emulation of kernels/persistent_mma.cu at the level of mma fragments.

The fragment map is written here from the comment in kernels/mma_common.cuh (the PTX ISA's
m16n8k16 map), independently of layouts.persistent.pack_mma_fragments, so a packing bug or an
index slip in the kernel's staging / partial-sum formulas (mirrored below) fails on the CPU.
"""
from dataclasses import replace

import ml_dtypes
import numpy as np

LANES = np.arange(32)
G, C = LANES // 4, LANES % 4


def _a_map():
    """Row and column of every (lane, register, half) of an A fragment (16 x 16)."""
    rows, cols = np.zeros((32, 4, 2), int), np.zeros((32, 4, 2), int)
    for reg, (dr, dc) in enumerate([(0, 0), (8, 0), (0, 8), (8, 8)]):   # a0, a1, a2, a3
        for half in range(2):
            rows[:, reg, half] = G + dr
            cols[:, reg, half] = 2 * C + dc + half
    return rows, cols


A_ROWS, A_COLS = _a_map()


def halves(words):
    """uint32 words -> (low, high) 16-bit patterns, stacked on a new last axis."""
    words = np.asarray(words, np.uint32)
    return np.stack([words & 0xFFFF, words >> 16], axis=-1).astype(np.uint16)


def to_float(bits, bf16: bool):
    """16-bit patterns -> float64 values."""
    dtype = ml_dtypes.bfloat16 if bf16 else np.float16
    return np.asarray(bits, np.uint16).view(dtype).astype(np.float64)


def round_16(values, bf16: bool):
    """fp32 values rounded to the kernel's 16-bit format (as float64)."""
    dtype = ml_dtypes.bfloat16 if bf16 else np.float16
    return np.asarray(values, np.float32).astype(dtype).astype(np.float64)


def decode_a(words, bf16: bool):
    """A fragments [..., 32 lanes, 4 regs] -> A tiles [..., 16, 16]."""
    vals = to_float(halves(words), bf16)                      # [..., 32, 4, 2]
    tile = np.zeros(vals.shape[:-3] + (16, 16))
    tile[..., A_ROWS, A_COLS] = vals
    return tile


def decode_b(b0, b1, bf16: bool):
    """B fragments (b0, b1 per lane, [..., 32]) -> B tiles [..., 16 k, 8 n]."""
    tile = np.zeros(np.shape(b0)[:-1] + (16, 8))
    for words, dk in ((b0, 0), (b1, 8)):
        vals = to_float(halves(words), bf16)                  # [..., 32, 2]
        for half in range(2):
            tile[..., 2 * C + dk + half, G] = vals[..., half]
    return tile


def c_fragments(tile):
    """C tiles [..., 16, 8] -> per-lane accumulators [..., 32, 4] (c0..c3 of the map)."""
    out = np.zeros(tile.shape[:-2] + (32, 4))
    for i in range(4):
        out[..., i] = tile[..., G + 8 * (i // 2), 2 * C + i % 2]
    return out


def staged_words(vec_slice, bf16: bool):
    """What the staging (stage_packed, stage_tagged) leaves in one warp's region: [n][k/2] words, pair (k, k+1) in word k/2."""
    bits = np.asarray(vec_slice, np.float32).astype(ml_dtypes.bfloat16 if bf16 else np.float16).view(np.uint16)
    bits = bits.astype(np.uint32)
    return bits[:, 0::2] | (bits[:, 1::2] << 16)


def warp_accumulators(a_words, words, batch, kt_count, m_tiles, bf16):
    """acc[..., mt, nt, lane, reg] of one warp (leading axes: blocks): mma_ktile over its k-tiles,
    the B-fragment words read as the kernel reads them (n = nt*8 + g, word kt*8 + c and + 4; zero
    for n >= batch). a_words: [..., k_tiles, m_tiles, 32, 4]."""
    n_tiles = -(-batch // 8)
    a_tiles = decode_a(a_words, bf16)                          # [..., kt, mt, 16, 16]
    acc = np.zeros(a_words.shape[:-4] + (m_tiles, n_tiles, 32, 4))
    for kt in range(kt_count):
        for nt in range(n_tiles):
            n = nt * 8 + G
            live = n < batch
            nn = np.minimum(n, batch - 1)
            b0 = np.where(live, words[nn, kt * 8 + C], 0)
            b1 = np.where(live, words[nn, kt * 8 + C + 4], 0)
            acc[..., nt, :, :] += c_fragments(a_tiles[..., kt, :, :, :] @ decode_b(b0, b1, bf16))
    return acc


def partial_index(forward: bool, warp, row, col, rows, n_pad):
    """The kernel's partial_index (mirrored)."""
    if forward:
        return (warp * (rows // 4) + row // 4) * (4 * n_pad + 4) + col * 4 + row % 4
    return (warp * rows + row) * (n_pad + 4) + col


def block_sums(plan, tiles, vec):
    """[blocks, 16*m_tiles, B]: every block's product of its packed tile with vec ([padded K, B]),
    through the kernel's fragments, partial stores and per-unit reads."""
    bf16 = plan.dtype == "bfloat16"
    batch, k_tiles, m_tiles = vec.shape[1], plan.tile_shape().k_tiles, plan.tile_shape().m_tiles

    def warp_acc(w, cols):
        words = staged_words(vec[cols].T, bf16)
        return warp_accumulators(tiles[:, w], words, batch, k_tiles, m_tiles, bf16)
    return _summed_partials(plan, batch, warp_acc)


def _summed_partials(plan, batch, warp_acc):
    """The blocks' sums from every warp's accumulators warp_acc(w, its columns) [..., mt, nt, 32, 4]:
    the kernel's partial stores (store_partials) and per-unit reads."""
    forward = plan.pass_name == "forward"
    shape = plan.tile_shape()
    rows, n_pad = shape.tile_rows, 8 * -(-batch // 8)
    warp_k = 16 * shape.k_tiles
    red = np.full((shape.blocks, shape.warps * rows * (4 * n_pad + 4)), np.nan)
    mt, nt, i = np.meshgrid(np.arange(shape.m_tiles), np.arange(n_pad // 8), np.arange(4), indexing="ij")
    row = mt[..., None, :] * 16 + G[:, None] + 8 * (i[..., None, :] // 2)     # [mt, nt, 32, 4]
    col = nt[..., None, :] * 8 + 2 * C[:, None] + i[..., None, :] % 2
    for w in range(shape.warps):
        red[:, partial_index(forward, w, row, col, rows, n_pad)] = warp_acc(w, slice(w * warp_k, (w + 1) * warp_k))
    return _read_partials(red, forward, shape.warps, rows, batch, n_pad)


def split_vector(vec):
    """The vector's halves as the kernel publishes them: hi = fp16(h), lo = fp16((h - hi) * 2^11)."""
    vec_hi = round_16(vec, False)
    return vec_hi, round_16((vec - vec_hi) * 2048.0, False)


def split_block_sums(plan, tiles, vec):
    """block_sums of the fp32 split (v13): tiles [..., 2 * m_tiles, 32, 4] hold the hi fragments,
    then the lo ones; the vector is split as the kernel publishes it (split_vector), and the
    products combine as hi.hi + (lo.hi + hi.lo) / 2^11. Paired plans (v14): paired_block_sums."""
    if plan.paired and vec.shape[1] > plan.batch:   # v40: groups of B columns, each its own paired N tile
        return np.concatenate([paired_block_sums(plan, tiles, vec[:, g:g + plan.batch])
                               for g in range(0, vec.shape[1], plan.batch)], axis=2)
    if plan.paired:
        return paired_block_sums(plan, tiles, vec)
    halves = replace(plan, dtype="float16")
    m = plan.m_tiles
    hi_tiles, lo_tiles = tiles[..., :m, :, :], tiles[..., m:, :, :]
    vec_hi, vec_lo = split_vector(vec)
    correction = block_sums(halves, lo_tiles, vec_hi) + block_sums(halves, hi_tiles, vec_lo)
    return block_sums(halves, hi_tiles, vec_hi) + correction / 2048.0


def cluster_block_sums(plan, tiles, vec, rank_sums):
    """v42 (plan.cluster_k > 1): [blocks, 4 units, B], every real block's rows as the clustered kernel leaves them.
    ``tiles`` are the virtual blocks' (tile_shape: cluster_k x warps warps); rank r's warps are the virtual warps
    r * warps.., multiply its 1/cluster_k slice of K, and sum their partials in warp order over every row of the
    virtual block (``rank_sums`` of a plan of the rank's warps: block_sums or split_block_sums); the owner of a unit
    adds the ranks' sums in rank order (cluster_unit_sums)."""
    c, warps = plan.cluster_k, plan.warps
    rank_plan = replace(plan, cluster_k=1, units=plan.units * c, blocks_per_dir=plan.blocks_per_dir // c)
    cols = 16 * warps * plan.k_tiles
    total = 0.0
    for r in range(c):
        total = total + rank_sums(rank_plan, tiles[:, r * warps:(r + 1) * warps], vec[r * cols:(r + 1) * cols])
    return total.reshape(plan.blocks_per_dir, -1, vec.shape[1])


def paired_column(acc, batch):
    """The kernel's paired_column for every lane and element of C fragments [..., 32, 4]: element i of
    lane + B/2 (__shfl_down_sync: a source past lane 31 gives the lane's own value), for B = 1 the
    lane's element i | 1."""
    if batch == 1:
        return acc[..., [1, 1, 3, 3]]
    source = np.where(LANES + batch // 2 < 32, LANES + batch // 2, LANES)
    return acc[..., source, :]


def paired_block_sums(plan, tiles, vec):
    """The paired split (v14, B = 1, 2, 4): the staged rows are [h_hi | h_lo] (2B of the N tile's 8),
    W_hi and W_lo each times them in one mma, and column b < B of the stored partial is
    hi.hi + (lo.hi + hi.lo from column B + b) / 2^11."""
    batch, m = vec.shape[1], plan.m_tiles
    k_tiles = plan.tile_shape().k_tiles
    rows = np.concatenate(split_vector(vec), axis=1)            # [K, 2B]: hi columns, then lo

    def warp_acc(w, cols):
        words = staged_words(rows[cols].T, False)
        hi, lo = (warp_accumulators(tiles[:, w, :, part], words, 2 * batch, k_tiles, m, False)
                  for part in (slice(0, m), slice(m, 2 * m)))
        return hi + (lo + paired_column(hi, batch)) / 2048.0
    return _summed_partials(plan, batch, warp_acc)


def _read_partials(red, forward, warps, rows, batch, n_pad):
    """The pointwise threads' reads (unit_sums / unit_sum of the kernel), summed in warp order."""
    row, b = np.meshgrid(np.arange(rows), np.arange(batch), indexing="ij")
    sums = np.zeros((red.shape[0], rows, batch))
    for w in range(warps):
        if forward:   # float4 at (w * rows/4 + u) * stride + 4b, gate = row % 4
            idx = (w * (rows // 4) + row // 4) * (4 * n_pad + 4) + 4 * b + row % 4
        else:
            idx = (w * rows + row) * (n_pad + 4) + b
        sums += red[:, idx]
    return sums


def input_projection(plan, x16, input_tiles):
    """[D, T, B, 4H] x W_ih^T as the in-kernel projection (v12) makes it, without the biases: x16
    [T, B, I] (the 16-bit storage, bf16 as uint16 words) through the packed W_ih tiles, block by
    block, own rows only."""
    bf16 = plan.dtype == "bfloat16"
    x = to_float(np.asarray(x16).view(np.uint16), bf16)
    shape = plan.input_tile_shape()
    as_tiles = replace(plan, k_tiles=plan.input_k_tiles)
    hidden, rows = plan.hidden, 4 * plan.hidden
    out = np.zeros((input_tiles.shape[0], x.shape[0], x.shape[1], rows))
    for d in range(input_tiles.shape[0]):
        for t in range(x.shape[0]):
            vec = np.zeros((shape.padded_cols, x.shape[1]))
            vec[: x.shape[2]] = x[t].T
            sums = (cluster_block_sums(as_tiles, input_tiles[d], vec, block_sums) if plan.cluster_k > 1   # v44
                    else block_sums(as_tiles, input_tiles[d], vec))
            out[d, t] = sums[:, : plan.rows_per_unit * plan.units].reshape(-1, x.shape[1])[:rows].T
    assert hidden * 4 == rows
    return out.astype(np.float32)


def split_input_projection(plan, x_split, input_tiles, input_size, unscale, steps):
    """[D, T, B, 4H] x W_ih^T as the v29 split kernel makes it, without the biases: x_split is the
    engine's split input (gpu_blas.split_x_rows' hi rows, lo rows and row factors, then x_hi W_lo^T
    [D, T B, 4H] from the GEMM); the kernel's part is W_hi . [x_hi | x_lo] through the packed hi tiles,
    combined as hi.hi + hi.lo / 2^11; both parts times each row's factor and W_ih's unscale
    (unscale[:, 1]), the GEMM's part over 2^11."""
    from ecornn import gpu_blas
    batch, gates = plan.batch, 4 * plan.hidden
    directions = input_tiles.shape[0]
    rows = steps * batch
    hi, lo, factors, tail = gpu_blas.split_x_parts(np.asarray(x_split), rows, input_size)
    halves = replace(plan, dtype="float16")
    shape = plan.input_tile_shape()
    as_tiles = replace(halves, k_tiles=plan.input_k_tiles)
    lo_product = tail.reshape(directions, steps, batch, gates).astype(np.float64)
    out = np.zeros((directions, steps, batch, gates))
    for d in range(directions):
        for t in range(steps):
            def product(part):
                vec = np.zeros((shape.padded_cols, batch))
                vec[:input_size] = np.asarray(part[t * batch:(t + 1) * batch], np.float64).T
                sums = block_sums(as_tiles, input_tiles[d], vec)
                return sums[:, : plan.rows_per_unit * plan.units].reshape(-1, batch)[:gates].T
            out[d, t] = product(hi) + (product(lo) + lo_product[d, t]) / 2048.0
        out[d] *= factors.reshape(steps, batch)[..., None] * unscale[d, 1]
    return out.astype(np.float32)
