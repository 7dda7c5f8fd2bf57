source benchmarks/device_setup.sh >/dev/null
for blocks in 132 1024 33; do
python3 - "$OUT/b$blocks" $blocks <<'PY'
import sys
sys.path.insert(0, "benchmarks")
from ecornn.engines import persistent_replay_ring as r
r.FETCH_MAX_BLOCKS = int(sys.argv[2])
import profile_replay as p
p.ROWS = [p.ROWS[1], p.ROWS[4], p.ROWS[0]]
import json
p.main([sys.argv[1], "--repeats", "20"])
PY
done 2>&1 | grep "^|" 
