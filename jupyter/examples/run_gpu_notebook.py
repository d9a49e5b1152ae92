#!/usr/bin/env python3
"""Executes jupyter/examples/gpu_cell.ipynb through nbclient in a real ipykernel
on a machine with an NVIDIA GPU and PyTorch, keeps the outputs in the notebook
and writes what it checked and measured to gpu_cell.json beside it.

    python3 jupyter/examples/run_gpu_notebook.py [--bin bin/vramscope] [--out DIR]

--bin: the vramscope engine (the device machine has no Go: build it here with
`make build` and carry bin/); it also runs a daemon (`vramscope serve`, NVML)
for %vramscope live. --out: copy the executed notebook and the JSON there too.
Needs nbclient, ipykernel and anywidget importable (on the device machine: the
wheels from fetch_wheels.sh, installed into /tmp/site and on PYTHONPATH).
The notebook is written without widget state, so GitHub and nbconvert show
each report's static copy. Exits 1 if a check fails.
"""
import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
JUPYTER = os.path.dirname(HERE)
ROOT = os.path.dirname(JUPYTER)
NOTEBOOK = os.path.join(HERE, "gpu_cell.ipynb")
WIDGET = "application/vnd.jupyter.widget-view+json"


def seconds(cell):
    ex = cell.get("metadata", {}).get("execution", {})
    a, b = ex.get("iopub.status.busy"), ex.get("iopub.status.idle")
    if not a or not b:
        return None
    p = lambda s: datetime.datetime.fromisoformat(s.replace("Z", "+00:00"))  # noqa: E731
    return round((p(b) - p(a)).total_seconds(), 3)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "bin", "vramscope"))
    ap.add_argument("--notebook", default=NOTEBOOK)
    ap.add_argument("--out", default=None)
    ap.add_argument("--timeout", type=int, default=900)
    args = ap.parse_args()

    import nbclient
    import nbformat

    engine = os.path.abspath(args.bin)
    work = tempfile.mkdtemp(prefix="vs-gpu-nb-")
    sock = os.path.join(work, "daemon.sock")
    env = dict(os.environ)
    env.update(VRAMSCOPE_BIN=engine, VRAMSCOPE_SOCKET=sock, PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join([JUPYTER] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]))
    daemon = subprocess.Popen([engine, "serve", "--socket", sock, "--data-dir", os.path.join(work, "data")],
                              stdout=open(os.path.join(work, "daemon.log"), "w"), stderr=subprocess.STDOUT)
    for _ in range(100):
        if os.path.exists(sock):
            break
        time.sleep(0.1)

    nb = nbformat.read(args.notebook, as_version=4)
    for c in nb.cells:
        if c.cell_type == "code":
            c.outputs, c.execution_count = [], None
    t0 = time.time()
    client = nbclient.NotebookClient(nb, timeout=args.timeout, kernel_name="python3", store_widget_state=False,
                                     resources={"metadata": {"path": ROOT}})
    error = None
    try:
        client.execute(env=env)
    except Exception as e:  # keep what ran
        error = "%s: %s" % (type(e).__name__, str(e)[-2000:])
    finally:
        daemon.terminate()
        daemon.wait(10)
    wall = time.time() - t0

    checks = []

    def check(name, ok, detail=""):
        checks.append({"check": name, "ok": bool(ok), "detail": str(detail)[:500]})

    code = [c for c in nb.cells if c.cell_type == "code"]
    results = {}
    for c in code:
        for o in c.outputs:
            if o.output_type == "stream" and "VRAMSCOPE_RESULTS " in o.text:
                results = json.loads(o.text.split("VRAMSCOPE_RESULTS ", 1)[1].splitlines()[0])
    check("the notebook ran to the end", error is None and results, error)
    reports = [c for c in code if c.source.startswith("%%vramscope")]
    for c in reports:
        # A report is two outputs: its static copy (what exporters and GitHub show), then the widget.
        disp = [o for o in c.outputs if o.output_type == "display_data"]
        copy = [o for o in disp if "vramscope-static" in o.data.get("text/html", "")]
        first = c.source.splitlines()[1] if len(c.source.splitlines()) > 1 else c.source
        check("report with its static copy, then the widget: " + first,
              len(disp) == 2 and copy == disp[:1] and WIDGET in disp[1].data, [list(o.data) for o in disp])
        if copy:
            check("cell-relative top line: " + first, "cell [" in copy[0].data["text/plain"],
                  copy[0].data["text/plain"][:600])
    oom = [c for c in reports if "200 * 2**30" in c.source]
    if oom:
        kinds = [o.output_type for o in oom[0].outputs]
        errs = [o for o in oom[0].outputs if o.output_type == "error"]
        check("out of memory: the report, then the error as without the magic",
              kinds[-2:] == ["display_data", "error"] and errs and "OutOfMemoryError" in errs[0].ename, kinds)
    train = results.get("train") or {}
    check("the magic adds <= 1 s to the training cell (snapshot + engine + display)",
          train and train.get("total_s", 99) <= 1.0, train)
    live = results.get("live") or {}
    check("live samples GPU counters", live.get("samples", 0) >= 3 and "daemon" in live.get("source", ""), live)

    nbformat.write(nb, args.notebook)
    summary = {"when": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "wall_s": round(wall, 1), "results": results, "checks": checks,
               "cells": [{"source": c.source.splitlines()[0] if c.source else "", "seconds": seconds(c)}
                         for c in code]}
    out_json = os.path.splitext(args.notebook)[0] + ".json"
    with open(out_json, "w") as f:
        json.dump(summary, f, indent=1)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        for p in (args.notebook, out_json, os.path.join(work, "daemon.log")):
            shutil.copy(p, args.out)
    for ch in checks:
        print("%s  %s  %s" % ("PASS" if ch["ok"] else "FAIL", ch["check"], "" if ch["ok"] else ch["detail"]))
    print(json.dumps(results, indent=1)[:3000])
    return 0 if all(ch["ok"] for ch in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
