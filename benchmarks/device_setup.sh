# Sourced by the device_*.sh scripts: install the checkout and put it on PYTHONPATH. ecornn maps
# kernels/ and layouts/ as ecornn.kernels / ecornn.layouts itself when run from a checkout.
export PYTHONUNBUFFERED=1
pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
REPO=$PWD
export PYTHONPATH=$REPO${PYTHONPATH:+:$PYTHONPATH}
