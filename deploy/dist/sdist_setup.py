"""setup.py of vramscope's sdist (deploy/dist/dist.py writes it beside the package and the Go
sources in engine/): builds the engine with Go into vramscope/bin/ when Go is present; without
Go it stops and says what to do instead."""
import os
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
HELP = """
vramscope: building from the source distribution needs Go 1.26 or later, and `go` is not on PATH.
Do one of these:
  * install a platform wheel instead (Linux x86_64/aarch64, macOS arm64/x86_64), from `make dist`
    in a checkout of vramscope (no release is on PyPI yet):
        pip install dist/vramscope-*-manylinux_2_17_x86_64*.whl
  * install Go (https://go.dev/dl/), put `go` on PATH, and run pip again;
  * install the engine alone and this package without it:
        go install ./cmd/vramscope          (in a checkout of vramscope)
        VRAMSCOPE_SDIST_NO_ENGINE=1 pip install vramscope-*.tar.gz
    (the package finds the engine on PATH, or where VRAMSCOPE_BIN points).
"""


class BuildWithEngine(build_py):
    def run(self):
        super().run()
        if os.environ.get("VRAMSCOPE_SDIST_NO_ENGINE"):
            return
        go = shutil.which("go")
        if not go:
            sys.stderr.write(HELP)
            raise SystemExit("vramscope: Go not found; see above")
        out = os.path.join(os.path.abspath(self.build_lib), "vramscope", "bin", "vramscope")
        os.makedirs(os.path.dirname(out), exist_ok=True)
        ldflags = "-s -w -X github.com/vramscope/vramscope/cmd/vramscope/cli.Version=" + self.distribution.get_version()
        subprocess.check_call([go, "build", "-trimpath", "-ldflags", ldflags, "-o", out, "./cmd/vramscope"],
                              cwd=os.path.join(HERE, "engine"))


setup(cmdclass={"build_py": BuildWithEngine})
