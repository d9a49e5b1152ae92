"""The agent's cost across processes, call by call (issue #27): plain python
against `vramscope run` with the true defaults, the two processes taking turns.

Run one after the other, the same plain program's median moved 2.6x within
four minutes on the H200's host (docs/inference.md), and run at once, the two
processes share the GPU by time slices. Here both hold the model, and the
driver asks one call of each in turn (cost.py --on-command), the same call
(request shape) for both, the order swapped every round (plain first, then
the agent first), so that each pair of calls is a fraction of a second
apart. The first --warm-s seconds of rounds are not counted: they hold the
agent's warm-up window (recording until 20,000 allocations) and its root
discovery, once per process; they are reported apart.

With --control a second plain process (plain2) takes its turn too, the
three in each of their six orders in turn: plain2 against plain is what
two processes of the same program differ by, with no agent (on the H200 an
evaluation loop's agent process was 0.9% faster than its plain one at 20:15
UTC on 2026-12-03, and two plain processes then differed by -1.0% and
+3.9%: docs/inference.md), and the agent is also set against the mean of both.

    python3 examples/inference/lockstep.py --workload serve --seconds 120 --vramscope bin/vramscope

Prints one JSON line: the pairs, the agent's call less the plain one over the
mean plain call (mean and median, 95% intervals), the same for the warm-up
rounds, and the processes' own last lines (the agent's status).
"""
import argparse
import itertools
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from stats import describe, shifts  # noqa: E402


class Child:
    def __init__(self, argv, env):
        self.argv = argv
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)

    def ready(self):
        line = self.p.stdout.readline()
        if line.strip() != "ready":
            raise SystemExit("%s did not start: %r" % (self.argv, line))

    def call(self, i):
        self.p.stdin.write("call %d\n" % i)
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError("%s ended at call %d (exit status %s)" % (self.argv, i, self.p.poll()))
        t, cpu = line.split()
        return float(t), float(cpu)

    def quit(self):
        """The child's own last line, or None when it ended otherwise."""
        try:
            self.p.stdin.write("quit\n")
            self.p.stdin.flush()
            last = self.p.stdout.read().strip().splitlines()
            self.p.wait(timeout=60)
            return json.loads(last[-1]) if last else None
        except (OSError, ValueError, subprocess.TimeoutExpired):
            self.p.kill()
            return None


def summary(pairs):
    """pairs: (agent, plain) seconds of the same call, a fraction of a second apart."""
    return describe(shifts(pairs)) if len(pairs) > 1 else None


def orders(names):
    """The rounds' orders, in turn: plain then agent and back for two; each of
    the six orders of three."""
    if len(names) == 2:
        return [list(names), list(reversed(names))]
    return [list(p) for p in itertools.permutations(names)]


def ahead(row):
    """Which of plain and agent a round called first (rows before --control
    have only "first")."""
    return next(n for n in row.get("order") or [row["first"]] if n in ("plain", "agent"))


def summaries(rows):
    """The counted rounds' comparisons (the warm-up rounds' agent against plain apart)."""
    counted = [r for r in rows if not r["warm"]]
    out = {"agent_vs_plain": summary([(r["agent"], r["plain"]) for r in counted]),
           "warm_rounds": summary([(r["agent"], r["plain"]) for r in rows if r["warm"]])}
    out["by_order"] = {f: summary([(r["agent"], r["plain"]) for r in counted if ahead(r) == f])
                       for f in ("plain", "agent")}
    if counted and "plain2" in counted[0]:
        out["plain2_vs_plain"] = summary([(r["plain2"], r["plain"]) for r in counted])
        out["agent_vs_plains"] = summary([(r["agent"], (r["plain"] + r["plain2"]) / 2) for r in counted])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", required=True)
    ap.add_argument("--seconds", type=float, default=120.0, help="counted rounds, after --warm-s")
    ap.add_argument("--warm-s", type=float, default=20.0)
    ap.add_argument("--vramscope", default="vramscope", help="the vramscope binary (`vramscope run`)")
    ap.add_argument("--socket", default=os.environ.get("VRAMSCOPE_SOCKET"))
    ap.add_argument("--script", default=os.path.join(HERE, "cost.py"),
                    help="the child's script (cost.py, or a wrapper of it)")
    ap.add_argument("--control", action="store_true",
                    help="a second plain process in the rounds: what two plain processes differ by")
    a = ap.parse_args()
    child = [sys.executable, a.script, "--workload", a.workload, "--on-command"]
    run = [a.vramscope, "run"] + (["--socket", a.socket] if a.socket else []) + ["--"]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    t0 = time.perf_counter()
    kids = {"plain": Child(child, env), "agent": Child(run + child, env)}  # all build and warm at once
    if a.control:
        kids["plain2"] = Child(child, env)
    for c in kids.values():
        c.ready()
    print("all ready in %.1f s" % (time.perf_counter() - t0), file=sys.stderr, flush=True)
    turns = orders(list(kids))
    rows, i, failed = [], 0, None
    start = time.perf_counter()
    warm_end, end = start + a.warm_s, start + a.warm_s + a.seconds
    try:
        while time.perf_counter() < end:
            order = turns[i % len(turns)]
            row = {"call": i, "first": order[0], "order": order, "warm": time.perf_counter() < warm_end}
            for name in order:
                row[name], row[name + "_cpu"] = kids[name].call(i)
            rows.append(row)
            i += 1
    except (RuntimeError, OSError) as e:  # a child ended: the rounds so far are still printed
        failed = str(e)
        print("lockstep: %s" % e, file=sys.stderr, flush=True)
    own = {name: c.quit() for name, c in kids.items()}
    out = {"rows": rows, "own": own, "failed": failed, "workload": a.workload, "warm_s": a.warm_s,
           "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "argv": sys.argv[1:]}
    out.update(summaries(rows))
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
