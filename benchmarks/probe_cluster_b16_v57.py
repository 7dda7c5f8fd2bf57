"""v57 probe (call 14): which forward fp32 H=1024 B=16 builds, clustered or not, and why (NotSupported), with and
without H0_WIDE_LOADS: v44's GPU test found the grouped split on clusters replaced by the unclustered one."""
from ecornn import LSTMConfig
from ecornn.engines import persistent
for wide in (True, False):
    persistent.H0_WIDE_LOADS = wide
    for training in (False, True):
        config = LSTMConfig(1024, 1024, 1, False, "float32", 16, 20)
        asked = persistent.plans_for(config, training)["forward"]
        print("wide", wide, "training", training, "asked:", asked.describe())
        try:
            final, kern = persistent._kernel(asked, 0)
            print("  built:", final.describe(), "regs", kern.num_regs, "local", kern.local_size_bytes)
        except Exception as exc:
            print("  NotSupported:", type(exc).__name__, str(exc)[:400])
        built = persistent._built_plans(persistent.run_config(config, training), training, "auto")["forward"]
        print("  _built_plans:", built.describe())
