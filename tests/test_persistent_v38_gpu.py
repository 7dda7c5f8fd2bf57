"""v38's 8-warp plans of the 16-bit forwards (H=1728-2048 at B <= 4, H=1088-1472 at B=1, two directions in one grid
at H=704-1216) on the GPU: forward, final states and (training) every gradient within 1e-2 of float64, bitwise
reruns, inference graph replays, and the plan the engine built is the 8-warp one."""
import pytest

from ecornn import LSTMConfig
from tests.test_persistent_gpu import HALF_TOL, _assert_bitwise_reruns, _assert_graph_replays_match_float64, _compare

pytestmark = pytest.mark.gpu
cp = pytest.importorskip("cupy")
if cp.cuda.runtime.getDeviceCount() == 0:   # pragma: no cover
    pytest.skip("no GPU", allow_module_level=True)

from ecornn.engines import persistent  # noqa: E402


def _built_forward(config, training):
    plan = persistent.plans_for(config, training)["forward"]
    return persistent._final(plan)


# (dtype, input, hidden, batch, steps, tagged): grid.sync at B >= 3, tagged below; an odd input size; one step
@pytest.mark.parametrize("dtype, inputs, hidden, batch, steps, tagged", [
    ("bfloat16", 2048, 2048, 4, 33, False), ("float16", 300, 2048, 3, 17, False), ("bfloat16", 1792, 1792, 2, 25, True),
    ("float16", 2048, 2048, 1, 1, True), ("bfloat16", 1000, 1984, 4, 12, False), ("float16", 1216, 1216, 1, 40, True),
    ("bfloat16", 700, 1472, 1, 19, True)])
def test_the_8_warp_forwards_train_within_tolerance_of_float64(rng, dtype, inputs, hidden, batch, steps, tagged):
    config = LSTMConfig(inputs, hidden, 1, False, dtype, batch, steps)
    _compare(rng, config, HALF_TOL)
    built = _built_forward(config, True)
    assert (built.warps, built.tagged) == (8, tagged) and built.reg_k_tiles >= 9, built


# two directions in one grid (v38: 8 warps; fp16 H=1024 B=8 with the projection in the kernel), 2 layers
@pytest.mark.parametrize("dtype, inputs, hidden, layers, batch, steps", [
    ("float16", 1024, 1024, 1, 8, 21), ("bfloat16", 300, 1216, 1, 1, 18), ("float16", 64, 704, 2, 2, 15)])
def test_the_8_warp_bidirectional_forwards_train_within_tolerance_of_float64(rng, dtype, inputs, hidden, layers, batch,
                                                                            steps):
    config = LSTMConfig(inputs, hidden, layers, True, dtype, batch, steps)
    _compare(rng, config, HALF_TOL)
    built = _built_forward(config, True)
    assert (built.warps, built.directions_per_launch) == (8, 2), built


def test_the_8_warp_forward_reruns_bitwise(rng):
    _assert_bitwise_reruns(rng, LSTMConfig(2048, 2048, 1, False, "bfloat16", 4, 20))


def test_the_8_warp_inference_graph_replays_match_float64(rng):
    config = LSTMConfig(2048, 2048, 1, False, "bfloat16", 4, 16)
    _assert_graph_replays_match_float64(rng, config, "mma", HALF_TOL)
    assert _built_forward(config, False).warps == 8
