"""Runs the idle programs under `vramscope run` with a daemon this script
starts, and asks the daemon why each one's GPU idled.

    python3 examples/idle/drive.py --bin bin/vramscope --out OUT [NAME...]

NAME: healthy, item_sync, slow_loader, checkpoint (default: all, in that
order). For each it writes OUT/NAME.json (the program's own measure: idle by
CUDA events, the sampler's cost in alternating blocks; harness.py),
OUT/NAME.idle.json (`vramscope idle PID --json --raw` over the measured
phase: the report and the join's input, utilisation and samples) and
OUT/NAME.log; then OUT/summary.json, one row per program. --fake runs
fake.py (no torch, no GPU) in their place, to check the plumbing anywhere.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PROGRAMS = ["healthy", "item_sync", "slow_loader", "checkpoint"]


def wait_for(fn, timeout):
    end = time.time() + timeout
    while time.time() < end:
        v = fn()
        if v:
            return v
        time.sleep(0.1)
    return None


def start_daemon(bin_, tmp):
    sock = os.path.join(tmp, "d.sock")
    log = open(os.path.join(tmp, "daemon.log"), "w")
    p = subprocess.Popen([bin_, "serve", "--socket", sock, "--data-dir", os.path.join(tmp, "data")], stdout=log, stderr=log)
    if not wait_for(lambda: os.path.exists(sock), 20):
        raise SystemExit("the daemon did not start: see %s" % log.name)
    return p, sock


def run_one(bin_, sock, out, tmp, name, fake):
    ready, go = os.path.join(tmp, name + ".ready"), os.path.join(tmp, name + ".go")
    prog = os.path.join(HERE, "fake.py" if fake else name + ".py")
    env = dict(os.environ, PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join(filter(None, [os.path.join(ROOT, "jupyter"), HERE, os.environ.get("PYTHONPATH")])))
    cmd = [bin_, "run", "--socket", sock, "--", sys.executable, prog, "--out", out, "--ready", ready, "--go", go]
    if fake:
        cmd += ["--name", name]
    with open(os.path.join(out, name + ".log"), "w") as log:
        p = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
        ok = wait_for(lambda: os.path.exists(ready) or p.poll() is not None, 200) and os.path.exists(ready)
        row = {"name": name, "ok": bool(ok)}
        if ok:
            row.update(ask(bin_, sock, out, name))
        open(go, "w").close()
        try:
            row["rc"] = p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            row["rc"] = "killed"
    return row


def ask(bin_, sock, out, name):
    """vramscope idle over the program's measured phase, next to its own measure."""
    time.sleep(1.5)  # the sampler's last batch reaches the daemon
    facts = json.load(open(os.path.join(out, name + ".json")))
    window = int(facts["measure"]["wall_ms"])
    path = os.path.join(out, name + ".idle.json")
    with open(path, "w") as f:
        subprocess.run([bin_, "idle", str(facts["pid"]), "--socket", sock, "--json", "--raw", "--window", "%dms" % window],
                       stdout=f, timeout=60)
    text = subprocess.run([bin_, "idle", path], capture_output=True, text=True, timeout=60).stdout
    print("== %s\n%s" % (name, text), flush=True)
    r = json.load(open(path))
    top = (r.get("causes") or [{}])[0]
    return {"idle_measured": facts["measure"]["idle_share_measured"], "idle_reported": r.get("idle_share"),
            "headline": r.get("headline", ""), "top_cause": top.get("kind"), "top_site": top.get("site"),
            "cost": facts.get("cost"), "sampler_cpu_ms": facts.get("sampler_cpu_ms"), "samples": r.get("samples")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "bin", "vramscope"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--fake", action="store_true")
    ap.add_argument("names", nargs="*")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="idle-drive-")
    daemon, sock = start_daemon(os.path.abspath(a.bin), tmp)
    rows = []
    try:
        for name in a.names or PROGRAMS:
            rows.append(run_one(os.path.abspath(a.bin), sock, a.out, tmp, name, a.fake))
            print(json.dumps(rows[-1]), flush=True)
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump({"utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
