"""Re-reads the H200's raw cost files with the harness's statistics (stats.py).

Token by token: the files of the protocol that toggled the root hooks
per token (cost.py --tokens at commit ce5a84b: docs/gpu/inference/run-20261203d/
and run-20261203e/tok_*.json, each call's tokens as [on, seconds]) and prints
the hooks' on - off per four tokens, for all calls and, with --by-start, apart
for the calls that began with the hooks off and those that began on (run e:
the first passed through the generate step, the second were held).

    python3 examples/inference/reread.py docs/gpu/inference/run-20261203e/tok_generate32.json --by-start

Token by token, the stack sampler's ticks against the tokens beside them
(cost.py --tokens since run-20261203f: files with "tick"): the figures the
file holds, or, where it keeps the ticks' times (cost.py since commit
89dd574), the ticks' delays worked out again.

Across processes (lockstep.py files, run-20261203g/h/i/lock_*.json): the
agent against plain, the control's two plain processes, and by order,
worked out again from the rounds.

Call by call (cost.py --alternate files: rows of off, on and record times),
leaving out the first N triples (serve's first 40 met each request shape's
first call: docs/inference.md):

    python3 examples/inference/reread.py docs/gpu/inference/run-20261203c/alt_serve.json --skip 40
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lockstep import summaries  # noqa: E402
from stats import alternate_summary, describe, shifts, tick_delays  # noqa: E402

PATTERNS = ((0, 1, 1, 0), (1, 0, 0, 1))


def groups(calls):
    """Each whole four of a call's tokens after its first: the on tokens'
    time less the off tokens', over the fours' mean off time."""
    pairs = []
    for toks in calls:
        for j in range(1, len(toks) - 3, 4):
            four = toks[j:j + 4]
            if tuple(m for m, _ in four) in PATTERNS:
                pairs.append((sum(t for m, t in four if m), sum(t for m, t in four if not m)))
    return shifts(pairs) if pairs else []


def line(name, calls):
    g = groups(calls)
    if len(g) < 2:
        return "%s: %d fours" % (name, len(g))
    return "%s: %d fours, %s" % (name, len(g), pct(describe(g)))


def pct(d):
    def band(ci):  # too few values for an interval: none
        return "(%+.2f…%+.2f)" % (ci[0] * 100, ci[1] * 100) if ci else "(no interval)"

    return "mean %+.2f%% %s, median %+.2f%% %s" % (d["mean"] * 100, band(d["ci95"]), d["median"] * 100,
                                                   band(d["median_ci95"]))


def main():
    r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
    if "agent_vs_plain" in r:
        out = summaries(r["rows"])
        print("%d rounds (%d warm-up)" % (len(r["rows"]), sum(1 for x in r["rows"] if x["warm"])))
        for k in ("agent_vs_plain", "plain2_vs_plain", "agent_vs_plains", "warm_rounds"):
            if out.get(k):
                print("%s: %s" % (k, pct(out[k])))
        for f, d in out["by_order"].items():
            if d:
                print("agent vs plain, %s first: %s" % (f, pct(d)))
        return
    if "tick" in r:
        if "tick_times" in r:
            calls = [[(b, b + d) for b, d in c] for c in r["tokens"]]
            delays, ref = tick_delays(calls, r["tick_times"])
            if len(delays) < 2:
                print("%d ticked tokens" % len(delays))
            else:
                print("%d ticked tokens; a tick's delay: %s of a %.2f ms token" % (
                    len(delays), pct(describe(delays)), ref * 1e3))
        else:
            t = r["tick"]
            print("%d ticked tokens; a tick's delay: mean %+.2f%% (%+.2f…%+.2f) of a %.2f ms token" % (
                r["ticked_tokens"], t["delay_mean"] * 100, t["ci95"][0] * 100, t["ci95"][1] * 100, t["token_s"] * 1e3))
        e = r.get("default_estimate")
        if e:
            print("default by its parts: %+.2f%% (%+.2f…%+.2f)" % (e["mean"] * 100, e["ci95"][0] * 100, e["ci95"][1] * 100))
        return
    if "rows" in r:
        skip = int(sys.argv[sys.argv.index("--skip") + 1]) if "--skip" in sys.argv else 0
        out = alternate_summary(r["rows"][skip:], r["steady_threads_share"])
        print("%d triples; on - off: %s" % (len(r["rows"]) - skip, pct(out["on"])))
        print("record - off: %s" % pct(out["record"]))
        print("default: %s" % pct(out["default_estimate"]))
        return
    calls = r["tokens"]
    print(line("all %d calls" % len(calls), calls))
    if "--by-start" in sys.argv:
        print(line("calls beginning off", [c for c in calls if c and c[0][0] == 0]))
        print(line("calls beginning on", [c for c in calls if c and c[0][0] == 1]))


if __name__ == "__main__":
    main()
