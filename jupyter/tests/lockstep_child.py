"""A stand-in for cost.py --on-command in test_cost_stats.py: the same
protocol, with call times known in advance, 2% longer when the agent is
loaded (`vramscope run`'s boot imports vramscope); under it, with
LOCKSTEP_DIE_AT=N, it exits at call N."""
import json
import os
import sys

under = "vramscope" in sys.modules
die_at = int(os.environ.get("LOCKSTEP_DIE_AT", "-1")) if under else -1  # the agent's child ends there
print("ready", flush=True)
n = 0
for line in sys.stdin:
    cmd = line.split()
    if not cmd or cmd[0] == "quit":
        break
    if int(cmd[1]) == die_at:
        sys.exit(3)
    base = 0.010 * (1 + int(cmd[1]) % 3)  # three request shapes
    t = base * (1.02 if under else 1.0)
    print("%.9f %.9f" % (t, t), flush=True)
    n += 1
print(json.dumps({"calls": n, "under_agent": under}), flush=True)
