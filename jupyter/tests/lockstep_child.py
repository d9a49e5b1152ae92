"""A stand-in for cost.py --on-command in test_cost_stats.py: the same
protocol, with call times known in advance, 2% longer when the agent is
loaded (`vramscope run`'s boot imports vramscope)."""
import json
import sys

under = "vramscope" in sys.modules
print("ready", flush=True)
n = 0
for line in sys.stdin:
    cmd = line.split()
    if not cmd or cmd[0] == "quit":
        break
    base = 0.010 * (1 + int(cmd[1]) % 3)  # three request shapes
    t = base * (1.02 if under else 1.0)
    print("%.9f %.9f" % (t, t), flush=True)
    n += 1
print(json.dumps({"calls": n, "under_agent": under}), flush=True)
