#!/usr/bin/env bash
# Device check of ecornn.LSTM (issue 3) on the GPU machine: Python 3.12, numpy 2.x, no mxnet, no
# network. Installs the carried mxnet 1.9.1 wheel, then (1) ecornn.LSTM forward/backward on a CPU
# context vs the reference and vs gluon.rnn.LSTM, (2) when a GPU strategy runs, the offload path
# (offload='gpu') vs the reference, (3) the Gluon test files if pytest is there. Prints rel errors;
# exits non-zero on any failure.
#
# Wheels (on a machine with network; .whl/ is git-ignored, so carry it: run(carry=[".whl"])):
#   python3 -m pip download -d .whl --no-deps --only-binary=:all: --python-version 3.12 \
#       --platform manylinux2014_x86_64 mxnet==1.9.1 graphviz==0.8.4 \
#       requests urllib3 idna certifi charset_normalizer
# Only mxnet is always needed; the others are installed only when the device lacks them
# (mxnet imports requests at import time; graphviz only for mx.viz).
#
# Run from the repository root:  bash tools/device_mxnet.sh
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
SITE=/tmp/ecornn-mxnet-site
STAGE=/tmp/ecornn-stage

wheel() {  # path of the carried wheel for a distribution, or nothing (never fails: set -e)
    ls "$REPO"/.whl/"$1"-*.whl 2>/dev/null | head -n 1 || true
}

mxnet_wheel=$(wheel mxnet)
if [ -z "$mxnet_wheel" ]; then
    echo "FAIL: no .whl/mxnet-1.9.1-*.whl; fetch it (see this script's comments) and carry .whl" >&2
    exit 2
fi
rm -rf "$SITE" && mkdir -p "$SITE"
python3 -m pip install -q --no-index --no-deps --target "$SITE" "$mxnet_wheel"
for dep in requests:requests urllib3:urllib3 idna:idna certifi:certifi \
           charset_normalizer:charset_normalizer graphviz:graphviz; do
    module=${dep%%:*}; dist=${dep##*:}
    if ! python3 -c "import $module" 2>/dev/null; then
        found=$(wheel "$dist")
        if [ -n "$found" ]; then
            python3 -m pip install -q --no-index --no-deps --target "$SITE" "$found"
        else
            echo "note: $module is missing and no .whl/$dist-*.whl is carried"
        fi
    fi
done

# ecornn as setup.py installs it (layouts/ and kernels/ become ecornn.layouts, ecornn.kernels),
# without needing setuptools or pip's build step on the device.
rm -rf "$STAGE" && mkdir -p "$STAGE"
cp -r "$REPO/ecornn" "$STAGE/ecornn"
cp -r "$REPO/layouts" "$STAGE/ecornn/layouts"
cp -r "$REPO/kernels" "$STAGE/ecornn/kernels"
export PYTHONPATH="$STAGE:$SITE${PYTHONPATH:+:$PYTHONPATH}"

cd /tmp  # so that the repository's ecornn/ (without layouts) does not shadow the staged one
python3 - <<'EOF'
import sys
import numpy as np

import ecornn
from ecornn import LSTMConfig, NotSupported, init_weights, lstm_backward, lstm_forward
from ecornn.arrays import gpu_available
from ecornn.mxnet_compat import import_mxnet

mx = import_mxnet()
from mxnet import autograd, gluon
from ecornn.weights import mxnet_names

print(f"python {sys.version.split()[0]}, numpy {np.__version__}, mxnet {mx.__version__}, "
      f"GPU for ecornn: {gpu_available()}")
failures = []


def rel_err(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-300))


def report(what, errors, tol):
    worst = max(errors.values())
    status = "ok" if worst <= tol else "FAIL"
    if status == "FAIL":
        failures.append(what)
    detail = ", ".join(f"{k} {v:.1e}" for k, v in errors.items())
    print(f"[{status}] {what}: max rel err {worst:.2e} (tol {tol:g}); {detail}")


config = LSTMConfig(input_size=24, hidden_size=64, num_layers=2, bidirectional=True,
                    batch=4, seq_len=9, layout="NTC")
rng = np.random.default_rng(0)
weights = init_weights(config, seed=1)
x = rng.standard_normal(config.input_shape).astype(np.float32)
h0, c0, gh, gc = (rng.standard_normal(config.state_shape).astype(np.float32) for _ in range(4))
gy = rng.standard_normal(config.output_shape).astype(np.float32)


def make(cls, **extra):
    block = cls(64, 2, "NTC", bidirectional=True, input_size=24, **extra)
    block.initialize()
    for s, w in enumerate(weights):
        for field, name in mxnet_names(*divmod(s, 2)).items():
            getattr(block, name).set_data(mx.nd.array(getattr(w, field)))
    return block


def run(block, hybridize=False):
    if hybridize:
        block.hybridize()
    xs, states = mx.nd.array(x), [mx.nd.array(h0), mx.nd.array(c0)]
    for a in [xs] + states:
        a.attach_grad()
    with autograd.record():
        y, (h, c) = block(xs, states)
    autograd.backward([y, h, c], [mx.nd.array(a) for a in (gy, gh, gc)])
    out = {"y": y, "h": h, "c": c, "dx": xs.grad, "dh0": states[0].grad, "dc0": states[1].grad}
    out = {k: v.asnumpy() for k, v in out.items()}
    for s in range(len(weights)):
        for field, name in mxnet_names(*divmod(s, 2)).items():
            out[name] = getattr(block, name).grad().asnumpy()
    return out


def reference():
    fwd = lstm_forward(x, weights, h0, c0, bidirectional=True, layout="NTC", strategy="reference",
                       training=True)
    grads = lstm_backward(fwd.reserve, gy, gh, gc)
    out = {"y": fwd.y, "h": fwd.h, "c": fwd.c, "dx": grads.dx, "dh0": grads.dh0, "dc0": grads.dc0}
    for s, g in enumerate(grads.dweights):
        for field, name in mxnet_names(*divmod(s, 2)).items():
            out[name] = getattr(g, field)
    return out


def compare(got, want):
    """Rel errors of outputs, states and input/state gradients; the worst over parameter grads."""
    errors = {k: rel_err(got[k], want[k]) for k in ("y", "h", "c", "dx", "dh0", "dc0")}
    errors["dW (worst)"] = max(rel_err(got[k], want[k]) for k in want if k not in errors)
    return errors


want = reference()
for hybridize in (False, True):
    mode = "hybridized" if hybridize else "imperative"
    report(f"ecornn.LSTM cpu ({mode}) vs reference", compare(run(make(ecornn.LSTM), hybridize), want), 1e-6)
report("gluon.rnn.LSTM cpu vs reference", compare(run(make(gluon.rnn.LSTM)), want), 1e-5)

if gpu_available():
    for strategy in ("auto", "persistent", "fused"):
        block = make(ecornn.LSTM, strategy=strategy, offload="gpu")
        try:
            chosen = block.plan(x, training=True)
        except (NotSupported, ecornn.ConfigError) as exc:
            print(f"[skip] offload strategy={strategy}: {exc}")
            continue
        print(f"offload strategy={strategy}: plan -> {chosen}")
        if chosen.strategy == "reference":
            print(f"[skip] offload strategy={strategy}: no GPU strategy runs this config yet")
            continue
        try:
            report(f"ecornn.LSTM offload={strategy} ({chosen.strategy}) vs reference",
                   compare(run(block), want), 1e-5)
        except Exception as exc:  # a GPU engine under construction: show it, count it
            failures.append(f"offload {strategy}")
            print(f"[FAIL] offload strategy={strategy}: {type(exc).__name__}: {exc}")
else:
    print("[skip] offload: ecornn sees no GPU (CuPy + CUDA device)")

print("RESULT:", "FAIL " + ", ".join(failures) if failures else "all checks passed")
sys.exit(1 if failures else 0)
EOF

cd "$REPO"
if python3 -c "import pytest" 2>/dev/null; then
    # --import-mode=append keeps the staged ecornn ahead of the repository's directory.
    python3 -m pytest -q -p no:cacheprovider --import-mode=append \
        tests/test_gluon.py tests/test_mxnet_compat.py tests/test_reference_vs_mxnet.py
else
    echo "note: pytest not installed on the device; skipped the Gluon test files"
fi
