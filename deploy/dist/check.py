#!/usr/bin/env python3
"""make test-dist: checks what `make dist` built, the way a user meets it.

  * every wheel: its WHEEL file (tags, not purelib), RECORD's hashes, the console script, and its
    engine's header (ELF machine or Mach-O CPU) against the platform tag; for a manylinux tag the
    GLIBC symbol versions the engine needs; `auditwheel show` when auditwheel is installed;
  * the x86_64 wheel installed with `pip install --no-index` into a fresh venv, with Go and the
    checkout's bin/ off PATH: `vramscope --version` and `vramscope analyze` on the bundled example
    snapshot through the console script, then `%load_ext vramscope` / `%vramscope open` in a real
    ipykernel run by nbclient (the kernel's notebook packages come from the checkout's .venv,
    appended after the fresh site-packages; vramscope itself comes from the wheel);
  * every .vsix: its file list, its target in extension.vsixmanifest, bin/target, and its engine's
    header against the target;
  * the sdist: its files, and that without Go its setup says what to do.

Writes what it measured (sizes, install time) to DIST/check.json. Stdlib only.

    python3 deploy/dist/check.py [--dist dist]
"""
import argparse
import base64
import csv
import hashlib
import io
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(REPO, "examples", "snapshots", "example_train.pickle")
ELF_MACHINE = {62: "x86_64", 183: "aarch64"}
MACHO_CPU = {0x01000007: "x86_64", 0x0100000C: "arm64"}
VSIX_ARCH = {"linux-x64": ("ELF", "x86_64"), "linux-arm64": ("ELF", "aarch64"),
             "darwin-x64": ("Mach-O", "x86_64"), "darwin-arm64": ("Mach-O", "arm64")}


def fail(msg):
    raise SystemExit("test-dist: FAIL: " + msg)


def say(msg):
    print("test-dist: " + msg, flush=True)


def header(data):
    """("ELF"|"Mach-O", arch) of an executable's first bytes."""
    if data[:4] == b"\x7fELF":
        if data[4] != 2 or data[5] != 1:
            fail("not a 64-bit little-endian ELF")
        return "ELF", ELF_MACHINE.get(struct.unpack_from("<H", data, 18)[0], "unknown")
    if data[:4] == b"\xcf\xfa\xed\xfe":
        return "Mach-O", MACHO_CPU.get(struct.unpack_from("<I", data, 4)[0], "unknown")
    fail("neither ELF nor 64-bit Mach-O: %r" % data[:4])


def glibc_needed(data):
    v = {tuple(int(p) for p in m.group(1).split(b".")) for m in re.finditer(rb"GLIBC_(2\.[0-9]+)\x00", data)}
    return max(v) if v else None


def core_files(widget):
    """profiler/flame/web/files.json and the files it lists: what a .vsix's media/
    carries, and the wheel's static/ but for the page around the graph (page.css)."""
    with open(os.path.join(REPO, "profiler", "flame", "web", "files.json"), encoding="utf-8") as f:
        core = json.load(f)
    return ["files.json"] + [e["file"] for e in core["scripts"] + core["styles"] if not widget or e["part"] != "page"]


def check_shared(name, z, prefix, files):
    """The front-end core inside a package, byte for byte profiler/flame/web's."""
    for f in files:
        with open(os.path.join(REPO, "profiler", "flame", "web", f), "rb") as src:
            if prefix + f not in z.namelist() or z.read(prefix + f) != src.read():
                fail("%s: %s%s is missing or is not profiler/flame/web/%s" % (name, prefix, f, f))


def check_wheel(path):
    name = os.path.basename(path)
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/WHEEL"))
        wheel = z.read(info + "/WHEEL").decode()
        tags = re.findall(r"^Tag: (\S+)$", wheel, re.M)
        if "Root-Is-Purelib: false" not in wheel:
            fail("%s: WHEEL says it is pure" % name)
        file_tags = name[:-4].split("-", 2)[2]  # py3-none-PLAT[.PLAT]
        want = ["py3-none-" + p for p in file_tags.split("-")[2].split(".")]
        if sorted(tags) != sorted(want):
            fail("%s: WHEEL tags %s, the file name says %s" % (name, tags, want))
        for row in csv.reader(io.StringIO(z.read(info + "/RECORD").decode())):
            if row[1]:
                digest = base64.urlsafe_b64encode(hashlib.sha256(z.read(row[0])).digest()).rstrip(b"=").decode()
                if row[1] != "sha256=" + digest:
                    fail("%s: RECORD's hash of %s is wrong" % (name, row[0]))
        if "vramscope = vramscope.notebook._engine:main" not in z.read(info + "/entry_points.txt").decode():
            fail("%s: no vramscope console script" % name)
        zi = z.getinfo("vramscope/bin/vramscope")
        if not (zi.external_attr >> 16) & 0o100:
            fail("%s: the engine is not executable" % name)
        engine = z.read(zi)
        check_shared(name, z, "vramscope/notebook/static/", core_files(widget=True))
    kind, arch = header(engine)
    plat = want[0].split("-")[2]
    expect = ("ELF", plat.split("_", 3)[-1]) if plat.startswith("manylinux") else ("Mach-O", plat.split("_", 3)[-1])
    if (kind, arch) != expect:
        fail("%s: the engine is %s %s, the tag says %s %s" % (name, kind, arch, *expect))
    g = glibc_needed(engine)
    if plat.startswith("manylinux"):
        tag_glibc = tuple(int(x) for x in plat.split("_")[1:3])
        if g and g > tag_glibc:
            fail("%s: the engine needs GLIBC_%d.%d, the tag promises %d.%d" % (name, *g, *tag_glibc))
    say("%s: tags %s; engine %s %s (%s), %.1f MiB; wheel %.1f MiB" % (
        name, ",".join(tags), kind, arch, "GLIBC_%d.%d" % g if g else "static" if kind == "ELF" else "no NVML",
        len(engine) / 2**20, os.path.getsize(path) / 2**20))
    if plat.startswith("manylinux") and shutil.which("auditwheel"):
        out = subprocess.run(["auditwheel", "show", path], capture_output=True, text=True)
        say("auditwheel show %s:\n  %s" % (name, out.stdout.strip().replace("\n", "\n  ") or out.stderr.strip()))
    return {"file": name, "bytes": os.path.getsize(path), "engine_bytes": len(engine), "tags": tags}


def check_vsix(path):
    name = os.path.basename(path)
    target = re.match(r"vramscope-(\w+-\w+)-", name).group(1)
    with zipfile.ZipFile(path) as z:
        names = sorted(z.namelist())
        say("%s (%.1f MiB): %s" % (name, os.path.getsize(path) / 2**20, " ".join(names)))
        manifest = z.read("extension.vsixmanifest").decode()
        if 'TargetPlatform="%s"' % target not in manifest:
            fail("%s: extension.vsixmanifest names no TargetPlatform %s" % (name, target))
        if z.read("extension/bin/target").decode().strip() != target:
            fail("%s: bin/target is not %s" % (name, target))
        zi = z.getinfo("extension/bin/vramscope")
        if not (zi.external_attr >> 16) & 0o100:
            fail("%s: bin/vramscope is not executable" % name)
        got = header(z.read(zi))
        check_shared(name, z, "extension/media/", core_files(widget=False))
    if got != VSIX_ARCH[target]:
        fail("%s: bin/vramscope is %s %s, not %s %s" % (name, *got, *VSIX_ARCH[target]))
    for must in ("extension/package.json", "extension/out/extension.js", "extension/media/flamegraph.js"):
        if must not in names:
            fail("%s lacks %s" % (name, must))
    return {"file": name, "bytes": os.path.getsize(path), "target": target}


def clean_path():
    """PATH without Go, the checkout's bin/ and its .venv."""
    go = shutil.which("go")
    drop = {os.path.realpath(p) for p in (os.path.join(REPO, "bin"), os.path.join(REPO, ".venv", "bin"),
                                          os.path.dirname(go) if go else "")} - {""}
    keep = [d for d in os.environ.get("PATH", "").split(os.pathsep)
            if d and os.path.realpath(d) not in drop and not os.path.exists(os.path.join(d, "go"))]
    return os.pathsep.join(keep)


def user_env(venv):
    env = {k: v for k, v in os.environ.items() if not k.startswith("VRAMSCOPE_") and k not in ("PYTHONPATH", "GOROOT")}
    env["PATH"] = os.path.join(venv, "bin") + os.pathsep + clean_path()
    return env


def check_install(wheel, work):
    venv = os.path.join(work, "venv")
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    py = os.path.join(venv, "bin", "python")
    t = time.monotonic()
    subprocess.run([py, "-m", "pip", "install", "-q", "--no-index", "--disable-pip-version-check", wheel], check=True)
    install_s = time.monotonic() - t
    env = user_env(venv)
    if shutil.which("go", path=env["PATH"]) or shutil.which("vramscope", path=env["PATH"]) != os.path.join(venv, "bin", "vramscope"):
        fail("PATH still has go, or vramscope is not the venv's: %s" % env["PATH"])
    say("pip install --no-index %s: %.2f s" % (os.path.basename(wheel), install_s))
    v = subprocess.run(["vramscope", "--version"], env=env, capture_output=True, text=True, check=True).stdout
    t = time.monotonic()
    out = subprocess.run(["vramscope", "analyze", EXAMPLE], env=env, cwd=work, capture_output=True, text=True)
    analyze_s = time.monotonic() - t
    if out.returncode != 0 or "device 0: peak 1.54 GiB" not in out.stdout:
        fail("vramscope analyze from the wheel: exit %d\n%s%s" % (out.returncode, out.stdout, out.stderr))
    say("%s; vramscope analyze example_train.pickle: %.2f s, %s" % (v.strip(), analyze_s, out.stdout.splitlines()[1]))
    return venv, env, {"install_s": round(install_s, 2), "analyze_s": round(analyze_s, 2), "version": v.strip()}


def check_notebook(venv, env, work):
    """%vramscope open in a real kernel running the venv's Python."""
    dev = subprocess.run([os.path.join(REPO, ".venv", "bin", "python"), "-c",
                          "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True).stdout.strip()
    site = subprocess.run([os.path.join(venv, "bin", "python"), "-c",
                           "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    with open(os.path.join(site, "zz_notebook_packages.pth"), "w") as f:
        f.write(dev + "\n")
    spec = os.path.join(work, "kernels", "kernels", "wheel")
    os.makedirs(spec)
    with open(os.path.join(spec, "kernel.json"), "w") as f:
        json.dump({"argv": [os.path.join(venv, "bin", "python"), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                   "display_name": "vramscope wheel", "language": "python"}, f)
    env = dict(env, JUPYTER_PATH=os.path.join(work, "kernels"))
    t = time.monotonic()
    out = subprocess.run([os.path.join(venv, "bin", "python"), os.path.abspath(__file__), "--notebook-in", venv],
                         env=env, cwd=work, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        fail("%%vramscope open through nbclient:\n%s%s" % (out.stdout, out.stderr))
    say(out.stdout.strip() + " (%.1f s with the kernel's start)" % (time.monotonic() - t))
    return round(time.monotonic() - t, 1)


def notebook_in(venv):
    import nbclient
    import nbformat
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in (
        "import vramscope, vramscope.notebook._engine as e; print(vramscope.__file__); print(e.find_binary())",
        "%load_ext vramscope",
        "%vramscope open " + EXAMPLE)]
    nbclient.NotebookClient(nb, timeout=180, kernel_name="wheel").execute()
    where = nb.cells[0].outputs[0].text.split()
    real = os.path.realpath(venv)
    if not all(os.path.realpath(p).startswith(real + os.sep) for p in where):
        fail("the kernel's vramscope or engine is not the wheel's: %s" % where)
    shown = json.dumps([o.get("data", {}) for o in nb.cells[2].outputs])
    errors = [o for c in nb.cells for o in c.outputs if o.output_type == "error"]
    if errors or "1.54 GiB" not in shown:
        fail("%%vramscope open showed no 1.54 GiB peak: %s %s" % (errors, shown[:2000]))
    print("%%vramscope open in a kernel of the fresh venv: the engine %s, peak 1.54 GiB shown" % where[1])


def check_sdist(path, work):
    with tarfile.open(path) as t:
        names = t.getnames()
        kw = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}  # Python >= 3.11.4
        t.extractall(os.path.join(work, "sdist"), **kw)
    top = os.path.join(work, "sdist", names[0].split("/")[0])
    for must in ("setup.py", "pyproject.toml", "PKG-INFO", "vramscope/notebook/_engine.py", "engine/go.mod", "engine/cmd/vramscope/main.go"):
        if not os.path.exists(os.path.join(top, must)):
            fail("%s lacks %s" % (os.path.basename(path), must))
    say("%s: %d files, %.1f MiB" % (os.path.basename(path), len(names), os.path.getsize(path) / 2**20))
    return {"file": os.path.basename(path), "bytes": os.path.getsize(path), "files": len(names)}


def glibc_of_tag(wheel):
    return tuple(int(x) for x in re.search(r"manylinux_(\d+)_(\d+)_", wheel).groups())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dist", default=os.path.join(REPO, "dist"))
    ap.add_argument("--notebook-in", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.notebook_in:
        return notebook_in(args.notebook_in)
    files = sorted(os.listdir(args.dist))
    report = {"wheels": [check_wheel(os.path.join(args.dist, f)) for f in files if f.endswith(".whl")],
              "vsix": [check_vsix(os.path.join(args.dist, f)) for f in files if f.endswith(".vsix")]}
    sdists = [f for f in files if f.endswith(".tar.gz")]
    # The x86_64 wheels, the cgo one (newest manylinux tag: what pip picks where it fits) first.
    x86 = sorted((f for f in files if f.endswith("x86_64.whl") and "manylinux" in f), key=glibc_of_tag, reverse=True)
    if not x86:
        fail("no manylinux x86_64 wheel in %s" % args.dist)
    report["install"] = []
    for i, wheel in enumerate(x86):
        with tempfile.TemporaryDirectory(prefix="vramscope-dist-") as work:
            if i == 0 and sdists:
                report["sdist"] = check_sdist(os.path.join(args.dist, sdists[0]), work)
            venv, env, measured = check_install(os.path.join(args.dist, wheel), work)
            if i == 0:
                measured["notebook_s"] = check_notebook(venv, env, work)
            report["install"].append(dict(measured, wheel=wheel))
    report["when"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    with open(os.path.join(args.dist, "check.json"), "w") as f:
        json.dump(report, f, indent=1)
    say("ok")


if __name__ == "__main__":
    sys.exit(main())
