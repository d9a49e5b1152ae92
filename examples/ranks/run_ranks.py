"""The rank view on one GPU (issue #17): two torchrun ranks share the H200,
rank 1 heavier on purpose; then rank 1 runs out of memory under a cap. Run
on the GPU machine from the repository root (no network needed; torch and
transformers installed; bin/vramscope built):

    python3 examples/ranks/run_ranks.py --bin bin/vramscope --out examples/ranks/out

What it does, and what to check in OUT/summary.json (each check is also
printed PASS/FAIL):

1. `vramscope serve`; `vramscope run -- torchrun --standalone --nproc_per_node 2
   rank_train.py`; once both ranks trained --warm steps: `vramscope snap PID
   --job --json` (OUT/group.json) — check: one group, 2 members, ranks 0 and 1,
   its skew (skew_ms, printed); `vramscope ranks GROUP` (OUT/ranks.txt) and
   `--json` (OUT/ranks.json) — check: rank 1 is the max rank and an outlier,
   imbalance > 1.5, its first differing line is rank_train.py's train step /
   common.py's forward (the batch's activations).
2. The same launch with --oom: rank 1 caps itself and grows its batch until
   torch raises OutOfMemoryError — check: a group with reason "oom" holds both
   ranks (OUT/oom_group.json), `vramscope ranks` of it (OUT/oom_ranks.txt).
The snapshots are copied to OUT/snapshots/ (rank<N>.pickle, rank<N>_oom.pickle)
so `vramscope ranks OUT/snapshots/rank*.pickle` works without the daemon.
Bounded: each launch at most 4 minutes, the whole run well under 8.

Two GPUs (issue #21; a machine with two GPUs): --dist ddp or --dist fsdp runs
rank_dist.py instead (GPT-2 12 layers wrapped in DDP over NCCL, or sharded with
FSDP2's fully_shard; one rank per GPU, rank 1 with 3x the batch), with the
same checks; in the OOM part the other rank waits in its all-reduce when the
daemon captures it, and the driver then stops the launch:

    python3 examples/ranks/run_ranks.py --bin bin/vramscope --out examples/ranks/out-ddp --dist ddp
    python3 examples/ranks/run_ranks.py --bin bin/vramscope --out examples/ranks/out-fsdp --dist fsdp

What to check there beyond the one-GPU run: the GPU column of `vramscope ranks`
shows 0 and 1 (NVML's indexes, found from each rank's device UUID), NON-TORCH
holds NCCL's buffers and the CUDA context (a few hundred MiB to ~1 GiB per
rank), and with FSDP the parameter category is about half of DDP's per rank.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "examples", "e2e"))
import gpu_e2e  # noqa: E402  (Env, Client, check, wait_for)
from gpu_e2e import check, wait_for  # noqa: E402


DIST = None  # "ddp" or "fsdp": two GPUs, rank_dist.py


def launch(e, out, *extra):
    """vramscope run -- torchrun … rank_train.py (or rank_dist.py); returns the Popen."""
    torchrun = shutil.which("torchrun") or "torchrun"
    program = ["rank_train.py"] if DIST is None else ["rank_dist.py", "--wrap", DIST]
    cmd = [e.bin, "run", "--socket", e.sock, "--", torchrun, "--standalone", "--nproc_per_node", "2",
           os.path.join(HERE, program[0]), *program[1:], "--out", out, *extra]
    log = open(os.path.join(out, "launch.log"), "w")
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True, env=e.env, cwd=HERE)


def cli(e, *args):
    p = subprocess.run([e.bin, *args, "--socket", e.sock], capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise RuntimeError(f"vramscope {' '.join(args)}: {p.stderr}")
    return p.stdout


def keep(out, group, suffix):
    """Copy a group's snapshots to OUT/snapshots/rank<N><suffix>.pickle."""
    os.makedirs(os.path.join(out, "snapshots"), exist_ok=True)
    for s in group["snapshots"]:
        shutil.copy(s["path"], os.path.join(out, "snapshots", f"rank{s['rank']}{suffix}.pickle"))


def steady(e, c, out, summary):
    run = os.path.join(out, "steady")
    os.makedirs(run, exist_ok=True)
    p = launch(e, run)
    try:
        pid = int(wait_for(lambda: os.path.exists(os.path.join(run, "ready1")) and open(os.path.join(run, "ready1")).read(), 240, "rank 1 warm"))
        wait_for(lambda: os.path.exists(os.path.join(run, "ready0")), 120, "rank 0 warm")
        g = json.loads(cli(e, "snap", str(pid), "--job", "--json"))
        json.dump(g, open(os.path.join(out, "group.json"), "w"), indent=1)
        check("group of both ranks", sorted(m["rank"] for m in g["members"]) == [0, 1], f"{g['job']}, skew {g['skew_ms']:.1f} ms")
        summary["group"] = {"job": g["job"], "skew_ms": g["skew_ms"], "failed": g.get("failed")}
        text = cli(e, "ranks", g["id"])
        open(os.path.join(out, "ranks.txt"), "w").write(text)
        rv = json.loads(cli(e, "ranks", g["id"], "--json"))
        json.dump(rv, open(os.path.join(out, "ranks.json"), "w"), indent=1)
        outl = [o for o in rv["outliers"] if o["rank"] == 1]
        first = outl[0]["lines"][0] if outl and outl[0]["lines"] else {}
        check("rank 1 is the outlier", rv["max_rank"] == 1 and bool(outl), f"imbalance {rv['imbalance']:.2f}")
        check("imbalance > 1.5", rv["imbalance"] > 1.5, f"{rv['imbalance']:.2f}")
        check("its first line is the heavier batch's (in common.py or rank_train.py, grown)",
              first.get("file", "").endswith(("common.py", "rank_train.py", "rank_dist.py")) and first.get("peak_delta", 0) > 0,
              json.dumps(first)[:300])
        summary["steady"] = {"imbalance": rv["imbalance"], "first_line": first,
                             "peaks": {r["rank"]: r["peak_bytes"] for r in rv["ranks"]}}
        keep(out, g, "")
        print(text, flush=True)
    finally:
        open(os.path.join(run, "stop"), "w").close()
        p.wait(timeout=120)


def oom(e, c, out, summary):
    run = os.path.join(out, "oom")
    os.makedirs(run, exist_ok=True)
    since = time.time()
    p = launch(e, run, "--oom")
    try:
        wait_for(lambda: os.path.exists(os.path.join(run, "ready1")) and os.path.exists(os.path.join(run, "ready0")), 240, "both ranks warm")
        open(os.path.join(run, "go"), "w").close()

        def oom_group():
            for g in c.call("group.list")["groups"]:
                if g["reason"] == "oom" and g["created"] and len(g["members"]) + len(g.get("failed") or []) >= 2:
                    return g
            return None
        g = wait_for(oom_group, 180, "the group of rank 1's OOM")
        json.dump(g, open(os.path.join(out, "oom_group.json"), "w"), indent=1)
        check("OOM captured both ranks", sorted(m["rank"] for m in g["members"]) == [0, 1], f"skew {g['skew_ms']:.1f} ms, failed {g.get('failed')}")
        text = cli(e, "ranks", g["id"])
        open(os.path.join(out, "oom_ranks.txt"), "w").write(text)
        summary["oom"] = {"skew_ms": g["skew_ms"], "members": g["members"], "seconds": round(time.time() - since, 1)}
        keep(out, g, "_oom")
        print(text, flush=True)
    finally:
        open(os.path.join(run, "stop"), "w").close()
        try:
            p.wait(timeout=30 if DIST is None else 5)
        except subprocess.TimeoutExpired:  # the other rank waits in a collective for the one that died
            p.terminate()
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--dist", choices=["ddp", "fsdp"], default=None, help="two GPUs: rank_dist.py with DDP or FSDP2")
    a = ap.parse_args()
    global DIST
    DIST = a.dist
    os.makedirs(a.out, exist_ok=True)
    e = gpu_e2e.Env(a)
    e.env["PYTHONPATH"] = os.path.join(ROOT, "jupyter") + os.pathsep + os.path.join(ROOT, "examples", "oom")
    c = e.serve()
    summary = {"host": os.uname().nodename, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "program": "rank_train.py (one GPU)" if DIST is None else "rank_dist.py --wrap " + DIST}
    try:
        import torch
        summary["torch"], summary["gpu"] = torch.__version__, torch.cuda.get_device_name(0)
    except Exception as ex:
        summary["torch"] = str(ex)
    try:
        steady(e, c, a.out, summary)
        oom(e, c, a.out, summary)
    finally:
        summary["checks"] = gpu_e2e.checks
        json.dump(summary, open(os.path.join(a.out, "summary.json"), "w"), indent=1)
        e.daemon.terminate()
    sys.exit(0 if all(x["ok"] for x in gpu_e2e.checks) else 1)


if __name__ == "__main__":
    main()
