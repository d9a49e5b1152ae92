"""Checks the recordings of record_piles.py against their labels, on any machine (no GPU, no torch).

    python3 examples/record/piles_check.py [--dir examples/snapshots/findings] [--bin bin/vramscope]
                                           [--out docs/gpu/piles/recheck.json] [CASE...]

record_piles.py runs the same check once it has recorded, on the GPU machine (it needs torch to
import); this one re-checks the committed recordings after the engine changes. For each case it
runs `vramscope analyze --json` on NAME.pickle or NAME.vsm and compares with its entry in
examples/snapshots/expected_findings.json: the finding kinds, the labelled line of each, and the
iteration count (within one, as TestExpectedFindings). It prints PASS/FAIL per case and writes the
rows, with the titles and where and when it ran, to --out. Exit status 1 when a case fails.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PILES = ["accum_eval_logits", "accum_gen_scores", "accum_train_preds", "healthy_eval_host", "healthy_kv_generate",
         "healthy_grad_accum", "ucache_bias_train", "ucache_mask_infer", "ucache_workspace", "healthy_cuda_graphs",
         "healthy_lru_cache"]


def labels():
    with open(os.path.join(ROOT, "examples", "snapshots", "expected_findings.json")) as f:
        return {e["name"]: e for e in json.load(f)["recordings"]}


def recording(folder, name):
    for ext in (".pickle", ".vsm"):
        p = os.path.join(folder, name + ext)
        if os.path.exists(p):
            return p
    return None


def check_one(bin_, path, label):
    """One case: the row for the report (ok, why, kinds, steps, titles)."""
    name = label["name"]
    if path is None:
        return {"name": name, "ok": False, "why": "not recorded"}
    p = subprocess.run([bin_, "analyze", "--json", path], capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        return {"name": name, "ok": False, "why": "%s: %s" % (path, p.stderr.strip()[-500:])}
    r = json.loads(p.stdout)
    kinds = sorted({f["kind"] for f in r["findings"]})
    lines = {"%s:%d" % (os.path.basename(f["file"]), f["line"]) for f in r["findings"] if f["kind"] in label.get("lines", {})}
    steps = len(r["devices"][0]["steps"]) if r["devices"] else 0
    why = []
    if kinds != sorted(label["kinds"]):
        why.append("kinds %s, want %s" % (kinds, label["kinds"]))
    for kind, place in label.get("lines", {}).items():
        if place not in lines:
            why.append("no %s at %s" % (kind, place))
    if label.get("iterations") is not None and abs(steps - label["iterations"]) > 1:
        why.append("%d steps, want %d" % (steps, label["iterations"]))
    return {"name": name, "ok": not why, "why": "; ".join(why), "kinds": kinds, "steps": steps,
            "step_source": r.get("step_source", ""), "titles": [f["title"] for f in r["findings"]]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=os.path.join(ROOT, "examples", "snapshots", "findings"))
    ap.add_argument("--bin", default=os.path.join(ROOT, "bin", "vramscope"))
    ap.add_argument("--out", help="write the rows as JSON here")
    ap.add_argument("cases", nargs="*")
    a = ap.parse_args()
    known = labels()
    names = a.cases or PILES
    unknown = [n for n in names if n not in known]
    if unknown:
        sys.exit("piles_check: no label in expected_findings.json for %s" % ", ".join(unknown))
    if not os.access(a.bin, os.X_OK):
        sys.exit("piles_check: %s is not an executable (make build)" % a.bin)
    rows = []
    for name in names:
        row = check_one(a.bin, recording(a.dir, name), known[name])
        rows.append(row)
        print(("PASS " if row["ok"] else "FAIL ") + name + ("" if row["ok"] else ": " + row["why"]), flush=True)
    passed = sum(r["ok"] for r in rows)
    print("%d of %d pass" % (passed, len(rows)))
    if a.out:
        ran = {"when_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "host": platform.node(),
               "machine": "%s, %d cores" % (platform.machine(), os.cpu_count() or 0), "bin": os.path.relpath(a.bin, ROOT),
               "version": subprocess.run([a.bin, "version"], capture_output=True, text=True).stdout.strip(),
               "passed": passed, "cases": len(rows)}
        with open(a.out, "w") as f:
            json.dump({"ran": ran, "rows": rows}, f, indent=1)
            f.write("\n")
    sys.exit(0 if passed == len(rows) else 1)


if __name__ == "__main__":
    main()
