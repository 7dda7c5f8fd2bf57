"""ecornn: fast LSTM layers for NVIDIA GPUs (persistent and fused kernels) with a NumPy reference."""


def _map_checkout_folders():
    """kernels/ and layouts/ sit beside ecornn/ in a checkout and install as ecornn.kernels and
    ecornn.layouts. When the checkout shadows the install on sys.path (python -m pytest from the
    root, some editable-install modes), no finder maps them: load them from the checkout."""
    import importlib.util
    import sys
    from pathlib import Path
    here = Path(__file__).resolve().parent
    for name in ("kernels", "layouts"):
        full, init = f"{__name__}.{name}", here.parent / name / "__init__.py"
        if full in sys.modules or (here / name).exists() or not init.exists():
            continue
        if importlib.util.find_spec(full) is not None:  # an editable install's finder maps it
            continue
        spec = importlib.util.spec_from_file_location(full, init, submodule_search_locations=[str(init.parent)])
        module = importlib.util.module_from_spec(spec)
        sys.modules[full] = module
        spec.loader.exec_module(module)
        globals()[name] = module  # what the import system does for submodules it loads itself


_map_checkout_folders()
from .api import (LSTMGradients, LSTMOutput, PreparedWeights, Reserve, lstm_backward, lstm_forward,
                  make_config, prepare_weights, refresh_weights)
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
           "LSTMOutput", "LSTMGradients", "PreparedWeights", "prepare_weights", "refresh_weights", "Reserve", "make_config", "plan", "Plan",
           "ConfigError", "EcornnError", "NotSupported", "__version__"]


def __getattr__(name):
    # The Gluon block needs mxnet; import it only when asked for.
    if name == "LSTM":
        from .gluon import LSTM
        return LSTM
    raise AttributeError(f"module 'ecornn' has no attribute {name!r}")
