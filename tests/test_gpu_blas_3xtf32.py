"""The 3xTF32 split of gpu_blas (fp32-accurate GEMMs on TF32 tensor cores), on the CPU: the split is
exact, its high part is a TF32 value, and the three-GEMM scheme, with every operand truncated to
TF32 the way a tensor core may read it, stays at fp32 accuracy where one TF32 GEMM does not."""
import numpy as np
import pytest

from ecornn.gpu_blas import tf32_parts
from tests.helpers import rel_err


def _tf32_truncated(a):
    """What a TF32 tensor core reads of fp32 ``a`` at worst: the 13 low mantissa bits dropped."""
    return (np.ascontiguousarray(a, np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def _tf32_gemm(a, b):
    """A TF32 GEMM with fp32 accumulation, emulated: truncated operands, exact products."""
    return (_tf32_truncated(a).astype(np.float64) @ _tf32_truncated(b).astype(np.float64)).astype(np.float32)


def _three_tf32_gemms(a, b):
    (a_hi, a_lo), (b_hi, b_lo) = tf32_parts(a), tf32_parts(b)
    out = _tf32_gemm(a_lo, b_hi)
    out += _tf32_gemm(a_hi, b_lo)
    return out + _tf32_gemm(a_hi, b_hi)


def test_split_is_exact_and_its_high_part_is_tf32(rng):
    a = (rng.standard_normal((64, 97)) * np.exp(rng.uniform(-20, 20, (64, 97)))).astype(np.float32)
    hi, lo = tf32_parts(a)
    assert np.array_equal(hi + lo, a)
    assert not np.any(hi.view(np.uint32) & np.uint32(0x1FFF))
    assert np.all(np.abs(lo) <= np.abs(a) * 2.0 ** -11)


def test_transposed_views_are_split_through_their_base(rng):
    base = rng.standard_normal((33, 20)).astype(np.float32)
    hi, lo = tf32_parts(base.T)
    assert hi.T.flags.c_contiguous and lo.T.flags.c_contiguous
    assert np.array_equal(hi + lo, base.T)


@pytest.mark.parametrize("m, k, n", [(256, 1024, 512), (64, 4096, 128), (7, 33, 5)])
def test_three_tf32_gemms_reach_fp32_accuracy(rng, m, k, n):
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = (rng.standard_normal((k, n)) * 0.05).astype(np.float32)
    want = a.astype(np.float64) @ b.astype(np.float64)
    assert rel_err(_three_tf32_gemms(a, b), want) <= 2e-6
    assert rel_err(a @ b, want) <= 2e-6               # what strict fp32 gives, for scale
    assert rel_err(_tf32_gemm(a, b), want) >= 1e-4    # one TF32 GEMM is not fp32-accurate


def test_matmul_names_the_operand_type_it_expected():
    from ecornn.gpu_blas import matmul
    a, b, out = np.zeros((2, 3), np.float32), np.zeros((3, 4), np.float16), np.zeros((2, 4), np.float32)
    with pytest.raises(ValueError, match=r"operand a should hold float16 elements \(2 bytes\), got float32"):
        matmul(a, b, out, a_type="float16")
    with pytest.raises(ValueError, match="out should be float32, got float16"):
        matmul(a, a.T, np.zeros((2, 2), np.float16))                     # 16-bit out needs 16-bit operands
    with pytest.raises(ValueError, match="out should be float32 or bfloat16, got float16"):
        matmul(b.T, b, np.zeros((4, 4), np.float16), a_type="bfloat16")  # v31: out of the operands' type
