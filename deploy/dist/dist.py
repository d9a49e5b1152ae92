#!/usr/bin/env python3
"""make dist: what users install, each carrying the Go engine.

    dist/engines/vramscope-GOOS-GOARCH     the engine per platform
    dist/vramscope-V-py3-none-PLAT.whl     a platform wheel: the Python package, the engine in
                                           vramscope/bin/, a `vramscope` console script that runs it
    dist/vramscope-V.tar.gz                the sdist: package and Go sources; builds the engine when
                                           Go is present, else says what to do
    dist/vramscope-TARGET-V.vsix           the VS Code extension per target, each with its engine

linux/amd64 is built with cgo when this machine is linux/amd64 with a C compiler (NVML counters
work); the other targets are cross-compiled with CGO_ENABLED=0, which compiles NVML out
(daemon/counters/nvml_nocgo.go: the sampler says "built without cgo"). linux/amd64 is also built
static, for a manylinux2014 wheel where the cgo one's glibc is too new. Stdlib only.

    python3 deploy/dist/dist.py [--out dist] [--only linux-amd64] [--no-vsix] [--no-sdist] [--check]

On a fresh clone it first sets up what it needs (npm ci for the extension's build tools, the engine in
bin/ that the extension's build copies), and stops with one line saying what to install when a tool
is missing (Go; Node.js and npm for the .vsix); --check only says which.
"""
import argparse
import base64
import csv
import hashlib
import io
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PKG = os.path.join(REPO, "jupyter")
MODULE = "github.com/vramscope/vramscope"

# name -> GOOS, GOARCH, cgo, wheel platform tag (None: from the glibc the engine needs), vsce target.
# linux/amd64 twice: with cgo (NVML counters; needs the build machine's glibc, so a newer manylinux
# tag, which pip prefers where it fits) and static (manylinux2014, for older systems; NVML compiled out).
TARGETS = {
    "linux-amd64": ("linux", "amd64", True, None, "linux-x64"),
    "linux-amd64-static": ("linux", "amd64", False, "manylinux_2_17_x86_64.manylinux2014_x86_64", None),
    "linux-arm64": ("linux", "arm64", False, "manylinux_2_17_aarch64.manylinux2014_aarch64", "linux-arm64"),
    "darwin-arm64": ("darwin", "arm64", False, "macosx_11_0_arm64", "darwin-arm64"),
    "darwin-amd64": ("darwin", "amd64", False, "macosx_10_15_x86_64", "darwin-x64"),
}


def log(msg):
    print("dist: " + msg, file=sys.stderr, flush=True)


def project():
    import tomllib  # Python 3.11+: preflight says so first

    with open(os.path.join(PKG, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]


def build_engine(target, out, version):
    goos, goarch, cgo = TARGETS[target][:3]
    exe = os.path.join(out, "engines", "vramscope-" + target)
    env = dict(os.environ, GOOS=goos, GOARCH=goarch, CGO_ENABLED="0")
    native = platform.system().lower() == goos and {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine()) == goarch
    if cgo and native and shutil.which(os.environ.get("CC", "gcc")):
        # go-nvml's header marks calls it wraps deprecated; gcc's warnings about that are noise here.
        env.update(CGO_ENABLED="1", CGO_CFLAGS=os.environ.get("CGO_CFLAGS", "-O2 -g") + " -Wno-deprecated-declarations")
    elif cgo:
        log("%s: no native C compiler for cgo; NVML compiled out" % target)
    t = time.monotonic()
    # No -trimpath: the native build then reuses what `make build` and `go test` compiled.
    subprocess.run(["go", "build", "-ldflags", "-s -w -X %s/cmd/vramscope/cli.Version=%s" % (MODULE, version),
                    "-o", exe, "./cmd/vramscope"], cwd=REPO, env=env, check=True)
    log("engine %s (cgo %s): %.1f MiB in %.1f s" % (target, env["CGO_ENABLED"], os.path.getsize(exe) / 2**20,
                                                   time.monotonic() - t))
    return exe


def glibc_needed(exe):
    """The highest GLIBC_x.y symbol version a dynamically linked ELF needs, or None (static)."""
    with open(exe, "rb") as f:
        data = f.read()
    versions = {tuple(int(p) for p in m.group(1).split(b".")) for m in re.finditer(rb"GLIBC_(2\.[0-9]+)\x00", data)}
    return max(versions) if versions else None


def linux_amd64_tag(exe):
    g = glibc_needed(exe)
    if g is None or g <= (2, 17):
        return "manylinux_2_17_x86_64.manylinux2014_x86_64"
    return "manylinux_%d_%d_x86_64" % g


def package_files():
    """(path in the wheel, bytes) of the Python package; symlinks (static/flame.*) are followed."""
    root = os.path.join(PKG, "vramscope")
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in ("__pycache__", "bin"))
        for name in sorted(filenames):
            if name.endswith((".pyc", ".pyo")):
                continue
            full = os.path.join(dirpath, name)
            with open(full, "rb") as f:
                out.append((os.path.relpath(full, PKG).replace(os.sep, "/"), f.read()))
    return out


def metadata(proj):
    lines = ["Metadata-Version: 2.1", "Name: " + proj["name"], "Version: " + proj["version"],
             "Summary: " + proj["description"], "Requires-Python: " + proj["requires-python"]]
    for dep in proj.get("dependencies", []):
        lines.append("Requires-Dist: " + dep)
    for extra, deps in proj.get("optional-dependencies", {}).items():
        lines.append("Provides-Extra: " + extra)
        lines += ['Requires-Dist: %s; extra == "%s"' % (d, extra) for d in deps]
    with open(os.path.join(PKG, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    return "\n".join(lines + ["Description-Content-Type: text/markdown", "", readme])


def write_wheel(proj, exe, tag, out):
    name, version = proj["name"], proj["version"]
    info = "%s-%s.dist-info" % (name, version)
    path = os.path.join(out, "%s-%s-py3-none-%s.whl" % (name, version, tag))
    with open(exe, "rb") as f:
        engine = f.read()
    files = package_files() + [("vramscope/bin/vramscope", engine)]
    files += [(info + "/METADATA", metadata(proj).encode()),
              (info + "/WHEEL", ("Wheel-Version: 1.0\nGenerator: vramscope deploy/dist/dist.py\n"
                                 "Root-Is-Purelib: false\n" + "".join("Tag: py3-none-%s\n" % t for t in tag.split("."))).encode()),
              (info + "/entry_points.txt", b"[console_scripts]\nvramscope = vramscope.notebook._engine:main\n")]
    record = io.StringIO()
    w = csv.writer(record, lineterminator="\n")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in files:
            zi = zipfile.ZipInfo(arc, date_time=(2026, 1, 1, 0, 0, 0))
            zi.compress_type = zipfile.ZIP_DEFLATED
            zi.external_attr = (0o100755 if arc == "vramscope/bin/vramscope" else 0o100644) << 16
            z.writestr(zi, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            w.writerow([arc, "sha256=" + digest, len(data)])
        w.writerow([info + "/RECORD", "", ""])
        z.writestr(zipfile.ZipInfo(info + "/RECORD", date_time=(2026, 1, 1, 0, 0, 0)), record.getvalue())
    log("wheel %s: %.1f MiB" % (os.path.basename(path), os.path.getsize(path) / 2**20))
    return path


def go_sources():
    """The tracked files `go build ./cmd/vramscope` needs, tests and test data left out."""
    files = subprocess.run(["git", "ls-files", "-z", "go.mod", "go.sum", "cmd", "internal", "profiler", "daemon", "lsp"],
                           cwd=REPO, check=True, capture_output=True).stdout.decode().split("\0")
    return [f for f in files if f and not f.endswith("_test.go") and "/testdata/" not in f and not f.startswith("cmd/vramscope-")]


def write_sdist(proj, out):
    name, version = proj["name"], proj["version"]
    top = "%s-%s" % (name, version)
    path = os.path.join(out, top + ".tar.gz")
    here = os.path.dirname(os.path.abspath(__file__))
    members = [(top + "/PKG-INFO", metadata(proj).encode())]
    with open(os.path.join(PKG, "pyproject.toml"), "rb") as f:  # + the console script the wheels have
        members.append((top + "/pyproject.toml", f.read() + b'\n[project.scripts]\nvramscope = "vramscope.notebook._engine:main"\n'))
    with open(os.path.join(here, "sdist_setup.py"), "rb") as f:
        members.append((top + "/setup.py", f.read()))
    with open(os.path.join(PKG, "README.md"), "rb") as f:
        members.append((top + "/README.md", f.read()))
    members += [(top + "/" + arc, data) for arc, data in package_files()]
    for rel in go_sources():
        with open(os.path.join(REPO, rel), "rb") as f:
            members.append((top + "/engine/" + rel, f.read()))
    with tarfile.open(path, "w:gz") as t:
        for arc, data in members:
            ti = tarfile.TarInfo(arc)
            ti.size, ti.mode, ti.mtime = len(data), 0o644, 1767225600
            t.addfile(ti, io.BytesIO(data))
    log("sdist %s: %.1f MiB" % (os.path.basename(path), os.path.getsize(path) / 2**20))
    return path


def write_vsixes(engines, out):
    """One .vsix per target: the extension is built once (npm run build), then each target is
    packaged from a copy of it holding that target's engine, so that the checkout's vscode-ext/bin
    (which the e2e test checks) is never changed."""
    ext = os.path.join(REPO, "vscode-ext")
    subprocess.run(["npm", "run", "build", "--silent"], cwd=ext, check=True)
    with open(os.path.join(ext, "package.json"), encoding="utf-8") as f:
        ext_version = json.load(f)["version"]
    vsce = os.path.join(REPO, "node_modules", ".bin", "vsce")
    paths = []
    for target, exe in engines.items():
        vsce_target = TARGETS[target][4]
        if not vsce_target:
            continue
        with tempfile.TemporaryDirectory(prefix="vramscope-vsix-") as stage:
            for name in os.listdir(ext):
                if name in ("out", "media") or name in (".vscodeignore", "package.json") or name.lower().startswith(("readme", "changelog", "license")):
                    src = os.path.join(ext, name)
                    (shutil.copytree if os.path.isdir(src) else shutil.copyfile)(src, os.path.join(stage, name))
            os.makedirs(os.path.join(stage, "bin"))
            shutil.copyfile(exe, os.path.join(stage, "bin", "vramscope"))
            os.chmod(os.path.join(stage, "bin", "vramscope"), 0o755)
            with open(os.path.join(stage, "bin", "target"), "w") as f:
                f.write(vsce_target + "\n")
            path = os.path.abspath(os.path.join(out, "vramscope-%s-%s.vsix" % (vsce_target, ext_version)))
            subprocess.run([vsce, "package", "--no-dependencies", "--allow-missing-repository", "--skip-license",
                            "--target", vsce_target, "-o", path], cwd=stage, check=True, stdout=subprocess.DEVNULL)
        log("vsix %s: %.1f MiB" % (os.path.basename(path), os.path.getsize(path) / 2**20))
        paths.append(path)
    return paths


class Missing(Exception):
    """A tool make dist needs and cannot set up itself; the message says what to install."""


def preflight(vsix):
    """What make dist must set up before it builds (commands to run in the checkout, in order);
    raises Missing, with one line saying what to install, for what it cannot set up."""
    if sys.version_info < (3, 11):
        raise Missing("Python %d.%d is too old: run make dist with Python 3.11 or newer (tomllib)" % sys.version_info[:2])
    if not shutil.which("go"):
        raise Missing("go not found: install Go (https://go.dev/dl, the version in go.mod), then run make dist again")
    steps = []
    if vsix:
        if not shutil.which("npm") or not shutil.which("node"):
            raise Missing("npm not found: install Node.js 20+ with npm for the VS Code extension, "
                          "or run python3 deploy/dist/dist.py --no-vsix for the wheels and sdist alone")
        bins = os.path.join(REPO, "node_modules", ".bin")
        if not all(os.path.exists(os.path.join(bins, t)) for t in ("tsc", "vsce", "esbuild")):
            steps.append(["npm", "ci", "--no-audit", "--no-fund"])
        if not os.path.exists(os.path.join(REPO, "bin", "vramscope")):
            steps.append(["go", "build", "-o", os.path.join("bin", "vramscope"), "./cmd/vramscope"])
    return steps


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(REPO, "dist"))
    ap.add_argument("--only", action="append", choices=sorted(TARGETS), help="build only these targets (repeatable)")
    ap.add_argument("--no-vsix", action="store_true")
    ap.add_argument("--no-sdist", action="store_true")
    ap.add_argument("--check", action="store_true", help="only say what would be set up, or what is missing")
    args = ap.parse_args()
    try:
        steps = preflight(not args.no_vsix)
    except Missing as e:
        print("dist: " + str(e), file=sys.stderr)
        return 2
    if args.check:
        print("dist: ready" if not steps else "dist: will run first: " + "; ".join(" ".join(c) for c in steps))
        return 0
    for cmd in steps:
        log("setting up: " + " ".join(cmd))
        subprocess.run(cmd, cwd=REPO, check=True)
    proj = project()
    os.makedirs(os.path.join(args.out, "engines"), exist_ok=True)
    engines, tags = {}, {}
    for target in args.only or list(TARGETS):
        exe = build_engine(target, args.out, proj["version"])
        engines[target] = exe
        tag = TARGETS[target][3] or linux_amd64_tag(exe)
        if tag in tags:  # linux/amd64 built without cgo (no C compiler): the static wheel is the same
            log("%s: a wheel tagged %s is already written (%s)" % (target, tag, tags[tag]))
            continue
        tags[tag] = target
        write_wheel(proj, exe, tag, args.out)
    if not args.no_sdist:
        write_sdist(proj, args.out)
    if not args.no_vsix:
        write_vsixes(engines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
