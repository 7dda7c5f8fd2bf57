"""`persistent` v39 on the CPU: the tagged 16-bit forwards' packed tags (PACKED_TAGS). Which plans take them, the
exchange buffer's shape, defines, describe and graph key; the kernel's encoding and decoding of a value, mirrored in
NumPy and checked over every fp16 and bf16 bit pattern: every |h| <= 1 comes back exactly, every NaN as a NaN, and a
value is ready exactly when it carries the step's bit."""
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent
from ecornn.engines import persistent_capacity as cap

KERNEL = Path(__file__).resolve().parents[1] / "kernels" / "persistent_mma.cu"
ONE = {"float16": 0x3C00, "bfloat16": 0x3F80}
NAN = {"float16": 0x7E00, "bfloat16": 0x7FC0}


def _forward(dtype, hidden, batch, training=False, inputs=None):
    config = LSTMConfig(inputs or hidden, hidden, 1, False, dtype, batch, 64)
    return cap.plan_config(cap.h100_properties(), config, training)


@pytest.mark.parametrize("dtype, hidden, batch", [("float16", 1024, 16), ("float16", 1024, 8), ("bfloat16", 1024, 4),
                                                  ("float16", 1000, 1), ("bfloat16", 2048, 2)])
def test_tagged_16bit_forwards_take_packed_tags_at_half_the_exchange(dtype, hidden, batch):
    plan = _forward(dtype, hidden, batch)["forward"]
    assert plan.tagged and not plan.tags_packed and "PACKED_TAGS" not in plan.defines()
    packed = cap.with_packed_tags(plan, True)
    assert packed.tags_packed and packed.defines()["PACKED_TAGS"] == 1 and "of packed values" in packed.describe()
    words, packed_words = plan.exchange_shape(1), packed.exchange_shape(1)
    assert packed_words[:3] == words[:3] and packed_words[3] == -(-hidden // 8) * 4 < words[3]
    assert cap.with_packed_tags(packed, False) == plan   # the ablation gives the plan back


def test_no_packed_tags_for_grid_sync_fp32_or_backward_plans():
    grid_sync = _forward("bfloat16", 2048, 4)["forward"]
    assert not grid_sync.tagged and not cap.with_packed_tags(grid_sync, True).tags_packed
    split = _forward("float32", 1024, 4)["forward"]
    assert split.tagged and split.parts == 2 and not cap.with_packed_tags(split, True).tags_packed
    backward = _forward("float16", 1024, 8, training=True)["backward"]
    assert backward.kind == "mma" and not cap.with_packed_tags(replace(backward, tagged=True), True).tags_packed


def test_the_flag_is_off_by_default_and_in_the_graph_key(monkeypatch):
    assert persistent.PACKED_TAGS is False
    before = persistent._graph_mode("mma")
    monkeypatch.setattr(persistent, "PACKED_TAGS", True)
    assert persistent._graph_mode("mma") != before


# --- the kernel's bit tricks, mirrored (packed_tag_bits, packed_tags_ready, packed_tags_value) ---

def _published(bits: np.ndarray, tag_bit: int) -> np.ndarray:
    """packed_tag_bits on values already 16-bit (|h| <= 1 or NaN): bit 14 replaced by the tag bit."""
    return (bits & 0xBFFF) | (tag_bit << 14)


def _decoded_words(words: np.ndarray, dtype: str) -> np.ndarray:
    """packed_tags_value over uint32 words (two values each)."""
    one = ONE[dtype]
    w = words & np.uint32(0xBFFFBFFF)
    above_one = 0x7FFF - one
    rare = ((w & np.uint32(0x7FFF7FFF)) + np.uint32(above_one | above_one << 16)) & np.uint32(0x80008000)
    lo, hi = w & np.uint32(0xFFFF), w >> np.uint32(16)
    lo = np.where((lo & 0x7FFF) > one, NAN[dtype], lo)
    hi = np.where((hi & 0x7FFF) > one, NAN[dtype], hi)
    fixed = (hi << np.uint32(16)) | lo
    return np.where(rare != 0, fixed, w).astype(np.uint32)


def _as_float(bits: np.ndarray, dtype: str) -> np.ndarray:
    bits = bits.astype(np.uint16)
    if dtype == "float16":
        return bits.view(np.float16).astype(np.float32)
    return (bits.astype(np.uint32) << 16).view(np.float32)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("tag_bit", [0, 1])
def test_every_value_of_at_most_one_comes_back_and_every_nan_as_a_nan(dtype, tag_bit):
    bits = np.arange(1 << 16, dtype=np.uint32)
    values = _as_float(bits, dtype)
    bounded, nan = np.abs(values) <= 1.0, np.isnan(values)
    words = _published(bits, tag_bit) | (_published(bits[::-1].copy(), tag_bit) << 16)   # every value in both halves
    out = _decoded_words(words.astype(np.uint32), dtype)
    lo, hi = out & 0xFFFF, out >> 16
    assert np.array_equal(lo[bounded], bits[bounded]) and np.array_equal(hi[bounded[::-1]], bits[::-1][bounded[::-1]])
    assert np.isnan(_as_float(lo[nan], dtype)).all() and np.isnan(_as_float(hi[nan[::-1]], dtype)).all()
    # bit 14 of every value of at most 1 is free: the tag changes nothing else
    assert not (bits[bounded] & 0x4000).any()


def test_a_value_is_ready_exactly_when_it_carries_the_bit():
    rng = np.random.default_rng()
    for _ in range(200):
        valid = int(rng.integers(1, 9))
        tag_bit = int(rng.integers(0, 2))
        halves = rng.integers(0, 1 << 16, 8).astype(np.uint32)
        words = halves[0::2] | (halves[1::2] << 16)
        t = 0x40004000 if tag_bit else 0
        mask = [(0x4000 if 2 * w < valid else 0) | (0x40000000 if 2 * w + 1 < valid else 0) for w in range(4)]
        ready = all(((int(words[w]) ^ t) & mask[w]) == 0 for w in range(4))
        assert ready == all(((int(h) >> 14) & 1) == tag_bit for h in halves[:valid])


def test_the_kernel_lines_match_the_mirror():
    source = KERNEL.read_text()
    assert "constexpr bool kPackedTags = PACKED_TAGS != 0 && kTagged && !kSplit && PASS == 0;" in source
    assert "constexpr unsigned int kOneBits = kBf16 ? 0x3f80u : 0x3c00u;" in source
    assert "constexpr unsigned int kNanBits = kBf16 ? 0x7fc0u : 0x7e00u;" in source
    assert "return static_cast<unsigned short>((half_bits(h) & 0xbfffu) | (bit << 14));" in source
    assert "if (fabsf(h) > 1.0f) h = copysignf(1.0f, h);" in source   # a NaN fails the test and stays
    assert re.search(r"w &= 0xbfffbfffu;\s*constexpr unsigned int above_one = 0x7fffu - kOneBits;", source)
    assert "(((w & 0x7fff7fffu) + (above_one | above_one << 16)) & 0x80008000u)" in source
    assert "const unsigned int t = bit ? 0x40004000u : 0u;" in source
    assert "(2 * word < valid ? 0x4000u : 0u) | (2 * word + 1 < valid ? 0x40000000u : 0u)" in source
    # the published value is one relaxed 16-bit store, the slot the packed rows' (in words of two values)
    assert 'st.relaxed.gpu.global.u16 [%0], %1;' in source
    assert "if constexpr (kPackedTags) return packed_rows(d, step, k_len) / 2;" in source
