"""Checks `vramscope whatif --generate` against measured peaks (issue #27).

After examples/inference/record.py ran whatif_base and whatif_measure on the GPU
machine (OUT holds whatif_base.{pickle,vsm} and whatif_measure.json), run here:

    python3 examples/inference/whatif_check.py OUT [--bin bin/vramscope]

For every measured size (batch x prompt + new) the prediction from the one
recorded run, the measured torch.cuda.max_memory_allocated() (weights
included, as the recording's peak includes them) and the error; the goal is
within 10% at 2-8x the recorded size. Writes OUT/whatif_check.json.
"""
import argparse
import json
import os
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--bin", default="bin/vramscope")
    a = ap.parse_args()
    measured = json.load(open(os.path.join(a.out, "whatif_measure.json")))
    b, p, n = measured["base"]
    snap = next(os.path.join(a.out, "whatif_base" + x) for x in (".pickle", ".vsm")
                if os.path.exists(os.path.join(a.out, "whatif_base" + x)))
    rows = [r for r in measured["sizes"] if r["new"] > 1]
    sizes = ",".join("%dx%d+%d" % (r["batch"], r["prompt"], r["new"]) for r in rows)
    res = subprocess.run([a.bin, "whatif", "--json", "--generate", sizes, "--recorded", "%dx%d+%d" % (b, p, n), snap],
                         capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(res.stderr)
    pred = json.loads(res.stdout)
    base = b * (p + n)
    out = []
    for r, q in zip(rows, pred["predictions"]):
        got = r["peak_allocated"]
        out.append({"size": "%dx%d+%d" % (r["batch"], r["prompt"], r["new"]), "x_recorded": r["batch"] * (r["prompt"] + r["new"]) / base,
                    "measured": got, "predicted": q["peak_allocated"], "error": q["peak_allocated"] / got - 1})
        print("%-14s %5.1fx  measured %8.1f MiB  predicted %8.1f MiB  %+6.1f%%" % (
            out[-1]["size"], out[-1]["x_recorded"], got / 2**20, q["peak_allocated"] / 2**20, 100 * out[-1]["error"]))
    with open(os.path.join(a.out, "whatif_check.json"), "w") as f:
        json.dump({"model": pred["model"], "rows": out}, f, indent=1)


if __name__ == "__main__":
    main()
