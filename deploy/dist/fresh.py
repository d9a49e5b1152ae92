#!/usr/bin/env python3
"""make test-dist's first check: make dist on a fresh clone sets up what it needs or stops with one
line saying what to run (it used to write the wheels, then die with a traceback: `tsc: not found`).

A fresh `git clone` of this checkout into a temporary folder (no node_modules, no bin/): dist.py
--check there must say it will run npm ci and build bin/vramscope first, and with npm off PATH it
must stop with exit 2 and one line naming what to install. Cheap: nothing is built. Stdlib only.

    python3 deploy/dist/fresh.py
"""
import os
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def check(cond, what):
    if not cond:
        print("fresh.py: FAIL: " + what, file=sys.stderr)
        sys.exit(1)


def dist_check(clone, path):
    env = dict(os.environ, PATH=path)
    return subprocess.run([sys.executable, os.path.join(clone, "deploy", "dist", "dist.py"), "--check"],
                          cwd=clone, env=env, capture_output=True, text=True)


def main():
    with tempfile.TemporaryDirectory(prefix="vramscope-fresh-") as tmp:
        clone = os.path.join(tmp, "vramscope")
        subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", REPO, clone], check=True)
        check(not os.path.exists(os.path.join(clone, "node_modules")) and not os.path.exists(os.path.join(clone, "bin")),
              "the clone is not fresh")
        r = dist_check(clone, os.environ["PATH"])
        if shutil.which("npm") and shutil.which("go"):
            check(r.returncode == 0, "dist.py --check on a fresh clone: exit %d\n%s%s" % (r.returncode, r.stdout, r.stderr))
            check("npm ci" in r.stdout and "bin/vramscope" in r.stdout, "it does not say it sets up npm ci and bin/vramscope: %r" % r.stdout)
        # Without npm (a PATH holding only go and the tools git needs): one line saying what to install.
        only = os.path.join(tmp, "path")
        os.mkdir(only)
        for tool in ("go", "git"):
            if shutil.which(tool):
                os.symlink(shutil.which(tool), os.path.join(only, tool))
        r = dist_check(clone, only)
        lines = r.stderr.strip().splitlines()
        check(r.returncode == 2 and len(lines) == 1 and "npm not found: install Node.js" in lines[0],
              "without npm: exit %d, %r" % (r.returncode, r.stderr))
        print("fresh.py: a fresh clone's make dist: %s; without npm: %s" % (dist_check(clone, os.environ["PATH"]).stdout.strip(), lines[0]))


if __name__ == "__main__":
    main()
