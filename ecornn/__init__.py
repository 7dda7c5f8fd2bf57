"""ecornn: fast LSTM layers for NVIDIA GPUs (persistent and fused kernels) with a NumPy reference."""
from .api import (LSTMGradients, LSTMOutput, PreparedWeights, Reserve, lstm_backward, lstm_forward,
                  make_config, prepare_weights)
from .config import LSTMConfig
from .errors import ConfigError, EcornnError, NotSupported
from .planner import Plan, plan
from .weights import LayerWeights, init_weights

__version__ = "0.1.0"

# On numpy >= 1.24, make a later `import mxnet` work (mxnet 1.9.1 reads removed numpy names);
# numpy is only touched if and when mxnet is imported. See ecornn/mxnet_compat.py.
from . import mxnet_compat as _mxnet_compat  # noqa: E402
_mxnet_compat.install_import_hook()

__all__ = ["LSTMConfig", "LayerWeights", "init_weights", "lstm_forward", "lstm_backward",
           "LSTMOutput", "LSTMGradients", "PreparedWeights", "prepare_weights", "Reserve", "make_config", "plan", "Plan",
           "ConfigError", "EcornnError", "NotSupported", "__version__"]


def __getattr__(name):
    # The Gluon block needs mxnet; import it only when asked for.
    if name == "LSTM":
        from .gluon import LSTM
        return LSTM
    raise AttributeError(f"module 'ecornn' has no attribute {name!r}")
