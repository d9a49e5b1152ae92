"""Where the cost of recording comes from: GPT-2 124M median step with the
allocator history off, recorded in-process with several settings, and under
the agent. Alternating rounds; prints one JSON line per run and a summary.

python3 examples/e2e/overhead_variants.py --bin bin/vramscope --rounds 2
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "bin", "vramscope"))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="vsov", dir="/tmp")
    sock = os.path.join(tmp, "d.sock")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "jupyter") + os.pathsep + HERE)
    d = subprocess.Popen([a.bin, "serve", "--socket", sock, "--data-dir", os.path.join(tmp, "data"), "--quiet"], env=env)
    while not os.path.exists(sock):
        time.sleep(0.05)
    train = [sys.executable, os.path.join(HERE, "train.py"), "--steps", str(a.steps)]
    agent = [a.bin, "run", "--socket", sock, "--"]
    variants = {
        "off": (train, {}),
        "torch all+ann": (train + ["--record", "all"], {}),
        "torch alloc+ann": (train + ["--record", "alloc"], {}),
        "torch alloc": (train + ["--record", "alloc,noann"], {}),
        "agent (all+ann)": (agent + train, {}),
        "agent alloc+ann": (agent + train, {"VRAMSCOPE_CONTEXT": "alloc"}),
        "agent alloc": (agent + train, {"VRAMSCOPE_CONTEXT": "alloc", "VRAMSCOPE_ANNOTATIONS": "0"}),
    }
    res = {k: [] for k in variants}
    for _ in range(a.rounds):
        for name, (cmd, extra) in variants.items():
            p = subprocess.run(cmd, capture_output=True, text=True, env=dict(env, **extra))
            line = [l for l in p.stdout.splitlines() if l.startswith("{")]
            if not line:
                print(name, "failed", p.stderr[-1500:], flush=True)
                continue
            r = json.loads(line[-1])
            res[name].append(r["median_step_ms"])
            print(json.dumps({"variant": name, "median_step_ms": r["median_step_ms"]}), flush=True)
    d.terminate()
    off = statistics.median(res["off"])
    summary = {k: {"runs": v, "median": statistics.median(v), "vs_off": round(statistics.median(v) / off - 1, 4)} for k, v in res.items() if v}
    print(json.dumps(summary, indent=1), flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"when_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "steps": a.steps, "summary": summary}, f, indent=1)


if __name__ == "__main__":
    main()
