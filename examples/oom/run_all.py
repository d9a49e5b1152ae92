"""Runs the OOM programs of this folder under the agent's default mode and
measures how much of the memory at each failure is named. On the GPU machine:

    python3 examples/oom/run_all.py --bin bin/vramscope --out OUT [--only NAME,...]

For each program: `vramscope serve`, `vramscope run -- python3 PROGRAM`, the
OOM snapshot the agent handed to the daemon (copied to OUT/snapshots/), its
`vramscope analyze --json` (OUT/NAME.analyze.json), and one summary row in
OUT/oom-naming.json: the share of the bytes allocated at the failure that is
named (by a tensor name or a user line), the top names, the categories, and
the time the agent's tensor walk took inside the OOM observer. Then a
snapshot asked for while a training job is paused between windows (`snap`),
named the same way.
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "examples", "e2e"))
import gpu_e2e  # noqa: E402  (Env, Client, paused_run)

PROGRAMS = ["late_long_batch", "too_big", "kept_growth", "lora", "global_cache", "class_cache", "nested_cache", "lora_gpt2"]


def newest_pickle(data, since):
    files = [f for f in glob.glob(os.path.join(data, "**", "*.pickle"), recursive=True) if os.path.getmtime(f) >= since]
    return max(files, key=os.path.getmtime) if files else None


def analyze(bin_, path, out_json):
    p = subprocess.run([bin_, "analyze", "--json", path], capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        return {"error": p.stderr[-2000:]}
    with open(out_json, "w") as f:
        f.write(p.stdout)
    return json.loads(p.stdout)


def row(r):
    """The figures the issue asks for, from one analysis."""
    t = r.get("named_tensors") or {}
    dev = (r.get("devices") or [{}])[0]
    ooms = r.get("ooms") or []
    return {
        "live_bytes": t.get("live_bytes"), "named_bytes": t.get("named_bytes"), "line_bytes": t.get("line_bytes"),
        "named_share": t.get("named_share"), "walk_ms": t.get("walk_ms"), "walk_entries": t.get("entries"),
        "walk_objects": t.get("objects"), "walk_truncated": t.get("truncated"), "walk_error": t.get("error"),
        "top_names": [{k: g.get(k) for k in ("bytes", "kind", "name", "tensors", "file", "line", "growing")} for g in (t.get("groups") or [])[:10]],
        "categories": {c["name"]: c["bytes"] for c in (r.get("categories") or []) if c.get("bytes")},
        "attribution": r.get("attribution"),
        "trace_events": dev.get("events"),
        "oom": ooms[0] if ooms else None,
        "oom_finding": next(({k: f.get(k) for k in ("cause", "title", "fix")} for f in r.get("findings") or []
                             if f.get("kind") == "oom"), None),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    os.makedirs(os.path.join(a.out, "snapshots"), exist_ok=True)
    e = gpu_e2e.Env(a)
    e.env["PYTHONPATH"] = os.path.join(ROOT, "jupyter") + os.pathsep + HERE + os.pathsep + os.path.join(ROOT, "examples", "e2e")
    c = e.serve()
    results = {"host": os.uname().nodename, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "runs": {}}
    try:
        import torch
        results["torch"] = torch.__version__
        results["gpu"] = torch.cuda.get_device_name(0)
    except Exception as ex:
        results["torch"] = str(ex)
    only = [x for x in a.only.split(",") if x]
    for name in PROGRAMS:
        if only and name not in only:
            continue
        t0 = time.time()
        cmd = [e.bin, "run", "--socket", e.sock, "--", sys.executable, os.path.join(HERE, name + ".py")]
        p = subprocess.run(cmd, capture_output=True, text=True, env=e.env, cwd=HERE, timeout=420)
        res = {"rc": p.returncode, "wall_s": round(time.time() - t0, 1), "program": gpu_e2e.last_json(p.stdout),
               "stderr_tail": p.stderr[-1500:]}
        snap = newest_pickle(e.data, t0)
        if snap:
            dst = os.path.join(a.out, "snapshots", name + ".pickle")
            shutil.copy(snap, dst)
            meta = snap[:-len(".pickle")] + ".json"
            if os.path.exists(meta):
                shutil.copy(meta, dst[:-len(".pickle")] + ".meta.json")
            res.update(row(analyze(e.bin, dst, os.path.join(a.out, name + ".analyze.json"))))
        results["runs"][name] = res
        print(name, json.dumps({k: res.get(k) for k in ("rc", "wall_s", "program", "named_share", "walk_ms", "trace_events")}), flush=True)
    if not only or "snap" in only:
        t0 = time.time()
        pr = gpu_e2e.paused_run(e, c, 100000, 12, 30)
        snap = newest_pickle(e.data, t0)
        res = {"rc": pr["rc"], "capture_s": round(pr["capture_s"], 3)}
        if snap:
            dst = os.path.join(a.out, "snapshots", "snap_between_windows.pickle")
            shutil.copy(snap, dst)
            res.update(row(analyze(e.bin, dst, os.path.join(a.out, "snap_between_windows.analyze.json"))))
        results["runs"]["snap_between_windows"] = res
        print("snap", json.dumps({k: res.get(k) for k in ("rc", "capture_s", "named_share", "walk_ms", "trace_events")}), flush=True)
    e.daemon.terminate()
    with open(os.path.join(a.out, "oom-naming.json"), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
