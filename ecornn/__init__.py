"""ecornn: fast LSTM layers for NVIDIA GPUs (persistent and fused kernels) with a NumPy reference."""
from .api import (LSTMGradients, LSTMOutput, PreparedWeights, Reserve, lstm_backward, lstm_forward,
                  make_config, prepare_weights)
from .config import LSTMConfig
from .errors import ConfigError, EcornnError, NotSupported
from .planner import Plan, plan
from .weights import LayerWeights, init_weights

__version__ = "0.1.0"

__all__ = ["LSTMConfig", "LayerWeights", "init_weights", "lstm_forward", "lstm_backward",
           "LSTMOutput", "LSTMGradients", "PreparedWeights", "prepare_weights", "Reserve", "make_config", "plan", "Plan",
           "ConfigError", "EcornnError", "NotSupported", "__version__"]


def __getattr__(name):
    # The Gluon block needs mxnet; import it only when asked for.
    if name == "LSTM":
        from .gluon import LSTM
        return LSTM
    raise AttributeError(f"module 'ecornn' has no attribute {name!r}")
