"""``python -m ecornn.run plan``: what the planner would run for a configuration, and why, on the
current GPU or on a named one (h100, h200, a100, small), without running anything: the strategy, the
predicted µs per timestep of each strategy that can run, why the others cannot, and the persistent
engine's kernels (threads, register and shared-memory tiles, exchange and first-poll delay).
Works on a machine without a GPU when --device names one.
"""
from __future__ import annotations

import json
import sys

from .config import LSTMConfig
from .devices import KNOWN, DeviceSpec, current
from .errors import EcornnError, NotSupported
from .planner import persistent_fit, plan
from .run import GPU_DEFAULT, build_parser, config_from_args


def build_plan_parser():
    p = build_parser()
    p.prog, p.description = "python -m ecornn.run plan", __doc__.splitlines()[0]
    p.add_argument("--device", choices=sorted(KNOWN),
                   help="plan for this GPU (default: the current one; required without a GPU)")
    return p


def _device(name) -> DeviceSpec:
    if name is not None:
        return KNOWN[name]
    device = current()
    if device is None:
        raise EcornnError(f"no CUDA GPU here: name the GPU to plan for (--device {', '.join(sorted(KNOWN))})")
    return device


def _persistent_passes(chosen, config, device, training) -> dict:
    """pass -> describe() of what the persistent engine would run, or {"error": why it cannot}: the
    planner's own kernel configuration where it chose persistent, else the capacity model's plans."""
    if chosen.strategy == "persistent":
        return dict(chosen.kernel_config["passes"])
    try:
        return dict(persistent_fit(config, device, training)["passes"])
    except NotSupported as exc:
        return {"error": exc.reason}


def describe_plan(config: LSTMConfig, device: DeviceSpec, strategy: str = "auto", training: bool = False) -> dict:
    """The record ``plan`` prints (and writes with --json)."""
    live = device is current()   # named devices: the capacity and cost models only
    chosen = plan(config, strategy, training, None if live else device)
    return {"config": config.__dict__, "training": training, "device": device.name,
            "strategy": chosen.strategy, "predicted_us_per_step": chosen.predicted_us_per_step,
            "reason": chosen.reason, "predictions": dict(chosen.predictions), "rejected": dict(chosen.rejected),
            "persistent_passes": _persistent_passes(chosen, config, device, training)}


def _print(record: dict) -> None:
    c = record["config"]
    mode = "forward+backward" if record["training"] else "forward"
    print(f"{c['dtype']} H={c['hidden_size']} I={c['input_size']} B={c['batch']} T={c['seq_len']} "
          f"layers={c['num_layers']} dirs={2 if c['bidirectional'] else 1} {mode}, planned for {record['device']}")
    us = record["predicted_us_per_step"]
    print(f"strategy: {record['strategy']}" + (f" (cost model: {us:.2f} us/step)" if us is not None else ""))
    print(f"why: {record['reason']}")
    for name, why in record["rejected"].items():
        if why not in record["reason"]:
            print(f"cannot run {name}: {why}")
    if "error" not in record["persistent_passes"]:   # else said above
        for name, text in record["persistent_passes"].items():
            print(f"persistent {name}: {text}")


def main(argv) -> int:
    args = build_plan_parser().parse_args(argv)
    try:
        record = describe_plan(config_from_args(args, GPU_DEFAULT), _device(args.device), args.strategy,
                               args.training)
    except EcornnError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    _print(record)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(record, fh, indent=2)
        print(f"wrote {args.json}")
    return 0
