"""What a run of examples/road/agent_all.sh came to (docs/oom-warning.md): for
each program, how it ended, when the daemon warned (the memory_warning event:
the step, the projected step, the growing line) and how many steps and
seconds before its OOM; and in how many of ps.jsonl.gz's seconds each showed
a forecast (the `vramscope ps` column).

    python3 examples/road/summary.py OUT
"""
import collections
import datetime
import gzip
import json
import os
import sys

# levels.py's file of each program as agent_all.sh runs it
RECORDS = {"leak.py": "leak", "leak.py --varlen --cap 6 --leak-mib 4": "leak_varlen"}


def clock(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%H:%M:%S.%f")[:-4]


def events(out):
    """The programs by pid, their warnings (time, forecast, growing line) and OOMs (time)."""
    names, warned, ooms = {}, {}, {}
    with open(os.path.join(out, "events.jsonl")) as f:
        for line in f:
            t, msg = line.split(" ", 1)
            msg, t = json.loads(msg), float(t)
            p = msg["params"]
            if msg["method"] == "event.agent_connected":
                names[p["process"]["pid"]] = " ".join(p["process"]["argv"])
            elif msg["method"] == "event.memory_warning":
                warned[p["pid"]] = (t, p["forecast"], p.get("growing", {}).get("line"))
            elif msg["method"] == "event.oom_captured":
                ooms[p["snapshot"]["pid"]] = t
    return names, warned, ooms


def main(out):
    names, warned, ooms = events(out)
    for pid, name in names.items():
        with open(os.path.join(out, RECORDS.get(name, name.removesuffix(".py")) + ".json")) as f:
            rec = json.load(f)
        s = f"{name:40s} {rec['outcome']:9s} oom_step={rec.get('oom_step')} steps={len(rec['steps'])}"
        if pid in warned:
            t, fc, line = warned[pid]
            s += f" | warned at step {fc['step']} ({clock(t)}), full projected at step {fc['projected_step']}, line {line}"
            if pid in ooms:
                s += f" | OOM at {clock(ooms[pid])}: {rec['oom_step'] - fc['step']} steps, {ooms[pid] - t:.1f} s after the warning"
        elif pid in ooms:
            s += f" | no warning, OOM at {clock(ooms[pid])}"
        print(s)
    shown = collections.Counter()
    with gzip.open(os.path.join(out, "ps.jsonl.gz")) as f:
        for line in f:
            for p in json.loads(line)["processes"]["processes"]:
                if p.get("agent") and p.get("forecast"):
                    shown[" ".join(p["argv"])] += 1
    print("seconds of ps with a forecast:", dict(shown) or "none")


if __name__ == "__main__":
    main(sys.argv[1])
