"""The GPU end-to-end check and the GPU benchmarks of the daemon and agent.

Run on a machine with an NVIDIA GPU and PyTorch (make gpu-e2e):
    python3 examples/e2e/gpu_e2e.py --bin bin/vramscope --out OUTDIR [--skip-bench]

It starts the daemon, runs a real GPT-2 training script under the agent
(`vramscope run`), takes a snapshot through the API, provokes an OOM under a
memory cap, and checks: both snapshots stored and analysable, the OOM snapshot
holds the oom event, NVML reports the training pid's memory, the training
script's line is the top user site, backward() calls are annotated. Then the
benchmarks: agent on vs off (median step), one-click capture vs torch's own
_snapshot() at 100k and 1M entries, and the idle daemon's CPU with NVML at
10 Hz. Results: OUTDIR/gpu-e2e.json and OUTDIR/gpu-e2e.md; exit 1 when a check
fails.
"""
import argparse
import json
import math
import os
import pickle
import shutil
import platform
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = "."


class Client:
    """A minimal line-delimited JSON-RPC client of the daemon."""

    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.connect(path)
        self.f = self.s.makefile("rb")
        self.n = 0

    def call(self, method, params=None, timeout=600):
        self.n += 1
        msg = {"jsonrpc": "2.0", "id": self.n, "method": method}
        if params is not None:
            msg["params"] = params
        self.s.settimeout(timeout)
        self.s.sendall(json.dumps(msg).encode() + b"\n")
        while True:
            line = self.f.readline()
            if not line:
                raise RuntimeError("daemon closed the connection")
            m = json.loads(line)
            if m.get("id") == self.n:
                if "error" in m and m["error"]:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result")


checks = []


def check(name, ok, detail=""):
    checks.append({"check": name, "ok": bool(ok), "detail": detail})
    print(("PASS " if ok else "FAIL ") + name + (f" — {detail}" if detail else ""), flush=True)


def wait_for(fn, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        v = fn()
        if v:
            return v
        time.sleep(0.1)
    raise TimeoutError(what)


class Env:
    def __init__(self, a):
        self.bin = os.path.abspath(a.bin)
        self.tmp = tempfile.mkdtemp(prefix="vse2e", dir="/tmp")
        self.sock = os.path.join(self.tmp, "d.sock")
        self.data = os.path.join(self.tmp, "data")
        self.env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "jupyter") + os.pathsep + HERE)
        self.log = open(os.path.join(a.out, "daemon.log"), "w")
        self.runs = 0

    def serve(self):
        self.daemon = subprocess.Popen([self.bin, "serve", "--socket", self.sock, "--data-dir", self.data],
                                       stdout=self.log, stderr=self.log, env=self.env)
        wait_for(lambda: os.path.exists(self.sock), 10, "daemon socket")
        return Client(self.sock)

    def run(self, script, *args, max_entries=100000, under_agent=True, sample=None):
        cmd = [sys.executable, os.path.join(HERE, script), *map(str, args)]
        if under_agent:
            cmd = [self.bin, "run", "--socket", self.sock, "--max-entries", str(max_entries), "--"] + cmd
        env = dict(self.env)
        if sample is not None:
            env["VRAMSCOPE_SAMPLE"] = sample
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=HERE)


def last_json(text):
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return None


def paused_run(e, c, max_entries, pause_at, steps, sample=None, takes=1):
    """Runs train.py under the agent, pauses it, takes `takes` snapshots
    through the API and, when more than one, has the script time torch's own
    _snapshot() after each (interleaved, in the same paused state)."""
    e.runs += 1
    ready, go = os.path.join(e.tmp, f"ready{e.runs}"), os.path.join(e.tmp, f"go{e.runs}")
    p = e.run("train.py", "--steps", steps, "--pause-at", pause_at, "--ready", ready, "--go", go, "--time-snapshot",
              max_entries=max_entries, sample=sample)
    pid = int(wait_for(lambda: os.path.exists(ready) and open(ready).read(), 600, "training reached the pause"))

    def agent():
        for proc in c.call("process.list")["processes"]:
            if proc["pid"] == pid and proc["agent"]:
                return proc
    proc = wait_for(agent, 30, "the agent registered")
    time.sleep(1.5)  # let NVML and the agent's torch counters tick while paused
    proc = agent()
    runs = []
    for k in range(takes):
        if k:
            time.sleep(1.0)  # one click at a time: the agent frees the last snapshot after it answers
        t = time.perf_counter()
        snap = c.call("snapshot.take", {"pid": pid, "analyze": True})
        runs.append((time.perf_counter() - t, snap))
        if takes > 1:  # then the script times torch's own _snapshot() in the same state
            time.sleep(1.0)
            open(f"{go}.{k}", "w").close()
            wait_for(lambda k=k: os.path.exists(f"{go}.{k}.done"), 120, "torch's own _snapshot() timed")
    capture_s, snap = sorted(runs, key=lambda r: r[0])[len(runs) // 2]  # the median take
    series = c.call("counters.series", {"device": 0, "pid": pid})
    open(go, "w").close()
    out, err = p.communicate(timeout=600)
    res = last_json(out) or {}
    if p.returncode != 0:
        print(err[-4000:], file=sys.stderr)
    return {"pid": pid, "process": proc, "snapshot": snap, "capture_s": capture_s, "train": res,
            "capture_runs_s": [round(r[0], 4) for r in runs],
            "rc": p.returncode, "stderr_tail": err[-2000:], "pid_series_points": len(series.get("samples") or [])}


def e2e(e, c, results):
    st = c.call("daemon.status")
    results["daemon_status"] = st
    check("NVML available in the daemon", st["counters"]["available"], st["counters"].get("reason", ""))
    dev = c.call("counters.devices")
    results["devices"] = dev

    # Paused in the agent's warm-up window (its first 3 steps are recorded).
    r = paused_run(e, c, 100000, pause_at=1, steps=6)
    results["training"] = {k: v for k, v in r.items() if k != "train"} | {"median_step_ms": r["train"].get("median_step_ms")}
    check("training under the agent exits 0", r["rc"] == 0, r["stderr_tail"][-300:] if r["rc"] else "")
    proc = r["process"]
    check("agent registered with torch and CUDA versions", proc.get("torch") and proc.get("cuda") and proc.get("recording"),
          json.dumps({k: proc.get(k) for k in ("torch", "cuda", "recording", "max_entries", "device", "note")}))
    check("NVML reports the training pid's GPU memory", proc.get("gpu_bytes", 0) > 0, f"gpu_bytes={proc.get('gpu_bytes')}")
    snap = r["snapshot"]
    summary = c.call("analysis.summary", {"id": snap["id"]})
    user = [s for s in summary["sites"] if s["kind"] == "user"]
    top = user[0] if user else {}
    results["training_summary"] = {"peak": summary["peak"], "top_user_sites": user[:5], "attribution": summary["attribution"],
                                   "events": summary["events"]}
    check("snapshot taken through the API is stored and analysed", summary["peak"]["bytes"] > 0,
          f"{snap['id']}: {snap['bytes']} bytes, {snap.get('entries')} entries, peak {summary['peak']['bytes']}")
    check("the training script's line is the top user site", top.get("file", "").endswith("train.py"),
          f"{top.get('file')}:{top.get('line')} ({top.get('function')}) {top.get('peak_bytes')} bytes")
    check("the snapshot was streamed to the daemon as VSM1", snap.get("format") == "vsm1", snap.get("format"))
    shutil.copy(snap["path"], os.path.join(OUT, "agent_gpt2.vsm" if snap.get("format") == "vsm1" else "agent_gpt2.pickle"))
    raw = load_snapshot(snap["path"])
    names = [a.get("name", "") for a in raw.get("external_annotations", [])]
    bw = sorted({n for n in names if n.startswith("vramscope.backward@")})
    results["backward_annotations"] = bw
    check("backward() calls are annotated with their line", any(n.endswith("train.py:" + str(line_of("train.py", "loss.backward()")))
                                                                 for n in bw), ", ".join(bw))

    live_snapshot(e, c, results)

    # The batch grows each step: the OOM comes after the warm-up window, while
    # the agent does not record (the capture keeps the request and its stack).
    p = e.run("oom.py")
    out, err = p.communicate(timeout=600)
    results["oom_run"] = {"rc": p.returncode, "out": last_json(out), "stderr_tail": err[-1500:]}
    snaps = c.call("snapshot.list", {"pid": p.pid})["snapshots"]
    oom = [s for s in snaps if s["reason"] == "oom"]
    check("the OOM was captured by the agent and stored", bool(oom), f"{len(snaps)} snapshots for pid {p.pid}")
    if oom:
        shutil.copy(oom[0]["path"], os.path.join(OUT, "agent_oom.pickle"))
        s = c.call("analysis.summary", {"id": oom[0]["id"]})
        kinds = [f["kind"] for f in s.get("findings") or []]
        results["oom_summary"] = {"ooms": s.get("ooms"), "findings": s.get("findings"), "peak": s["peak"]}
        check("the OOM snapshot holds the oom event", bool(s.get("ooms")) and "oom" in kinds, json.dumps(s.get("ooms"))[:300])
    check("every stored snapshot is analysable", all(c.call("analysis.summary", {"id": x["id"]})["peak"]["bytes"] > 0
                                                     for x in c.call("snapshot.list")["snapshots"]))
    return r


def live_snapshot(e, c, results):
    """Take snapshot while training runs under the agent's default sampling,
    past its warm-up: the agent opens the next window at once and snapshots it."""
    p = e.run("train.py", "--steps", 400)
    pid = p.pid

    def agent():
        for proc in c.call("process.list")["processes"]:
            if proc["agent"] and proc.get("device", -1) >= 0 and proc["pid"] == pid:  # vramscope run execs: same pid
                return proc
    proc = wait_for(agent, 120, "the agent registered")
    time.sleep(4)  # well past the 3 warm-up steps: recording is off between windows
    t = time.perf_counter()
    snap = c.call("snapshot.take", {"pid": proc["pid"], "analyze": True})
    took = time.perf_counter() - t
    s = c.call("analysis.summary", {"id": snap["id"]})
    user = [x for x in s["sites"] if x["kind"] == "user"]
    alive = p.poll() is None
    out, err = p.communicate(timeout=600)
    r = last_json(out) or {}
    results["live_snapshot"] = {"seconds": round(took, 3), "entries": snap.get("entries"), "events": s["events"],
                                "peak": s["peak"], "top_user_site": user[0] if user else None,
                                "median_step_ms": r.get("median_step_ms"), "training_still_running": alive}
    check("snapshot while training runs (sampled recording): a window opens and is captured with its history",
          alive and s["events"] > 100 and user and user[0]["file"].endswith("train.py") and took < 30,
          f"{took:.2f} s, {s['events']} events, top {user[0]['file'] if user else None}:{user[0]['line'] if user else ''}")


def load_snapshot(path):
    """Our own file, just written: trusted. VSM1 (streamed) or a pickle."""
    with open(path, "rb") as f:
        if f.read(4) == b"VSM1":
            f.seek(0)
            sys.path.insert(0, os.path.join(ROOT, "jupyter"))
            from vramscope.agent._vsm import read_vsm
            return read_vsm(f)
        f.seek(0)
        return pickle.load(f)


def line_of(script, text):
    with open(os.path.join(HERE, script)) as f:
        for i, line in enumerate(f, 1):
            if text in line:
                return i
    return -1


def bench_capture(e, c, results, per_step):
    out = []
    for n in (100_000, 1_000_000):
        pause = min(2000, math.ceil(n / max(per_step, 1)) + 3)
        r = paused_run(e, c, n, pause_at=pause, steps=pause + 2, sample="off", takes=5)
        t = r["train"]
        row = {"ring": n, "entries": t.get("entries"), "capture_s": round(r["capture_s"], 3),
               "capture_runs_s": r["capture_runs_s"], "agent_dump_ms": r["snapshot"].get("took_ms"),
               "phases_ms": r["snapshot"].get("phases_ms"), "torch_snapshot_s": round(t.get("torch_snapshot_s", 0), 3),
               "torch_snapshot_runs_s": t.get("torch_snapshot_runs_s"), "vsm_devnull_s": t.get("vsm_devnull_s"),
               "snapshot_bytes": r["snapshot"]["bytes"], "format": r["snapshot"].get("format") or "pickle"}
        row["ratio"] = round(row["capture_s"] / row["torch_snapshot_s"], 3) if row["torch_snapshot_s"] else None
        out.append(row)
        print("capture", json.dumps(row), flush=True)
    results["capture"] = out


def bench_overhead(e, results, seqs=(512, 1024), steps=1800, block=100, settle=10):
    """Same-run A/B: one training process under the agent detaches and
    re-attaches it every `block` steps (vramscope.detach()/attach()), so "off"
    and "on" steps share the process, the GPU clocks and the data. "sampled"
    is the agent's default; "continuous" records every step. The first block
    and the first `settle` steps of every block are not counted: attaching
    (threads, connection, registration, the first recorded steps) happens
    once in a real run, not every few seconds."""
    out = {}
    for seq in seqs:
        p = e.run("train.py", "--seq", seq, "--steps", steps, "--cycle", "off,sampled,norecord,off,sampled,continuous",
                  "--block", block, "--settle", settle, "--warmup", block)
        o, err = p.communicate(timeout=600)
        r = last_json(o) or {}
        cyc = r.get("cycle") or {}
        if "off" in cyc and "sampled" in cyc:
            off = cyc["off"]
            row = {"off": off["median_step_ms"], "off_mean": off["mean_step_ms"], "steps_each": off["steps"]}
            for m in ("sampled", "norecord", "continuous"):
                if m in cyc:
                    row[m] = cyc[m]["median_step_ms"]
                    row[m + "_mean"] = cyc[m]["mean_step_ms"]
                    row[m + "_slowdown"] = round(cyc[m]["median_step_ms"] / off["median_step_ms"] - 1, 4)
                    row[m + "_mean_slowdown"] = round(cyc[m]["mean_step_ms"] / off["mean_step_ms"] - 1, 4)
            out[str(seq)] = row
        else:
            print(err[-2000:], file=sys.stderr)
    results["overhead"] = {"config": f"GPT-2 124M, bs 8, bf16 autocast, AdamW, {steps} steps, agent off / sampled / "
                                     f"attached without recording / continuous, switched every {block} steps in one process, "
                                     f"the first block and the first {settle} steps of each not counted", "by_seq": out}
    print("overhead", json.dumps(results["overhead"]), flush=True)


def phases_text(ph):
    """A capture's phases_ms as text: where the time went."""
    if not ph:
        return "no phases"
    return ", ".join(f"{k} {v:.1f} ms" for k, v in ph.items() if v >= 0.05)


def bench_idle(e, results, seconds=30):
    pid = e.daemon.pid
    tick = os.sysconf("SC_CLK_TCK")

    def cpu():
        f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / tick
    time.sleep(2)
    c0, t0 = cpu(), time.time()
    time.sleep(seconds)
    c1, t1 = cpu(), time.time()
    results["idle"] = {"seconds": round(t1 - t0, 2), "cpu_seconds": c1 - c0, "share_of_one_core": round((c1 - c0) / (t1 - t0), 5)}
    print("idle", json.dumps(results["idle"]), flush=True)


def fmt_bytes(n):
    n = float(n or 0)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.2f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024


def markdown(r):
    """docs/gpu-e2e.md from the results."""
    out = ["# GPU end-to-end run", "",
           f"`make gpu-e2e` (examples/e2e/gpu_e2e.py) on {r.get('gpu')} ({r.get('host')}), {r.get('when_utc')}, "
           f"PyTorch {r.get('torch')} (CUDA {r.get('cuda')}), Python {r.get('python')}. Raw results: "
           "`docs/gpu-e2e.json`; daemon log and counters beside it.", "", "## Checks", ""]
    for c in r.get("checks", []):
        out.append(f"- {'PASS' if c['ok'] else 'FAIL'} — {c['check']}" + (f": {c['detail']}" if c.get("detail") else ""))
    ts = r.get("training_summary")
    if ts:
        out += ["", "## Snapshot taken through the API (GPT-2 124M under `vramscope run`)", "",
                f"Peak {fmt_bytes(ts['peak']['bytes'])}; {ts['events']} trace events; "
                f"{100 * ts['attribution']['attributed_share']:.1f}% of the bytes live at the peak land on a user line or a named phase.",
                "", "| line | function | peak | share |", "|---|---|---|---|"]
        for s in ts["top_user_sites"]:
            out.append(f"| {os.path.basename(s['file'])}:{s['line']} | {s['function']} | {fmt_bytes(s['peak_bytes'])} | {100 * s['peak_share']:.1f}% |")
    om = r.get("oom_summary")
    if om and om.get("ooms"):
        o = om["ooms"][0]
        out += ["", "## OOM captured by the agent", "", "```", json.dumps(o, indent=1)[:1500], "```"]
    if "idle" in r:
        i = r["idle"]
        out += ["", "## Benchmarks", "", f"- Daemon idle with NVML at 10 Hz: {i['cpu_seconds']:.2f} CPU-seconds over {i['seconds']} s = "
                f"**{100 * i['share_of_one_core']:.3f}% of one core** (goal ≤ 0.5%)."]
    for c in r.get("capture", []):
        out.append(f"- One-click capture at a {c['ring']:,}-entry ring ({c['entries']:,} entries, {fmt_bytes(c['snapshot_bytes'])} "
                   f"{c.get('format', 'pickle')}): "
                   f"API call → stored → analysed {c['capture_s']:.3f} s (median of {c.get('capture_runs_s')} s; agent dump "
                   f"{c['agent_dump_ms'] / 1000:.3f} s: {phases_text(c.get('phases_ms'))}) vs torch's own "
                   f"`_snapshot()` {c['torch_snapshot_s']:.3f} s (median of {c.get('torch_snapshot_runs_s')} s): "
                   f"**{c['ratio']:.2f}×** (goal ≤ 1.5×).")
    if "overhead" in r:
        o = r["overhead"]
        for seq, x in o.get("by_seq", {}).items():
            out.append(f"- Agent attached vs not, same run ({o['config']}, seq {seq}): default (sampled) median step "
                       f"{x['sampled']:.2f} ms vs {x['off']:.2f} ms = **{100 * x['sampled_slowdown']:+.2f}%** (goal ≤ 1%); "
                       f"mean {100 * x['sampled_mean_slowdown']:+.2f}%. Attached, not recording: median "
                       f"{100 * x.get('norecord_slowdown', 0):+.2f}%. Recording every step: median "
                       f"{100 * x.get('continuous_slowdown', 0):+.2f}%, mean {100 * x.get('continuous_mean_slowdown', 0):+.2f}%.")
    ls = r.get("live_snapshot")
    if ls:
        out.append(f"- Snapshot while training runs past the warm-up (sampled recording): {ls['seconds']:.2f} s from the API call "
                   f"to stored and analysed, {ls['events']} events (median step {ls.get('median_step_ms') or 0:.1f} ms).")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "bin", "vramscope"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--skip-bench", action="store_true")
    ap.add_argument("--only-capture", action="store_true", help="only the capture benchmark (to capture.json)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    global OUT
    OUT = a.out
    import torch
    results = {"when_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "host": platform.node(),
               "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
               "python": platform.python_version()}
    e = Env(a)
    c = e.serve()
    if a.only_capture:
        try:
            bench_capture(e, c, results, 4500)
        finally:
            with open(os.path.join(a.out, "capture.json"), "w") as f:
                json.dump(results, f, indent=1, default=str)
            e.daemon.terminate()
            e.daemon.wait(timeout=10)
        return
    try:
        r = e2e(e, c, results)
        if not a.skip_bench:
            bench_idle(e, results)
            per_step = (r["train"].get("entries") or 0) / 5
            bench_capture(e, c, results, per_step if per_step > 100 else 4000)
            bench_overhead(e, results)
    finally:
        results["checks"] = checks
        with open(os.path.join(a.out, "gpu-e2e.json"), "w") as f:
            json.dump(results, f, indent=1, default=str)
        with open(os.path.join(a.out, "gpu-e2e.md"), "w") as f:
            f.write(markdown(results))
        with open(os.path.join(a.out, "counters.txt"), "w") as f:
            subprocess.run([e.bin, "counters", "--duration", "2s"], stdout=f, stderr=subprocess.STDOUT, timeout=30)
        e.daemon.terminate()
        e.daemon.wait(timeout=10)
        e.log.close()
    failed = [x for x in checks if not x["ok"]]
    print(f"{len(checks) - len(failed)}/{len(checks)} checks passed", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
