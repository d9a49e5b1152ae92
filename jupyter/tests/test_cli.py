"""python -m vramscope run / boot-path / attach."""
import os
import subprocess
import sys
import time

from conftest import CHILD, PKG_PARENT, VRAMSCOPE, Child

BOOT = os.path.join(PKG_PARENT, "vramscope", "_boot")

OTHER_SITE = """import builtins, os, sys
builtins.OTHER_SITE_RAN = True
builtins.OTHER_SITE_SAW_BOOT = any(os.path.abspath(p) == %r for p in sys.path)
sys.path.append("/other-site-added")
"""


def vramscope(*args, env=None, **kw):
    return subprocess.run(VRAMSCOPE + list(args), env=env, capture_output=True,
                          text=True, timeout=20, **kw)


def test_boot_path(env):
    p = subprocess.run([sys.executable, "-m", "vramscope", "boot-path"], env=env, capture_output=True, text=True)
    assert p.returncode == 0
    assert p.stdout.strip() == BOOT
    assert os.path.isfile(os.path.join(p.stdout.strip(), "sitecustomize.py"))


def test_run_sets_env_and_chains_sitecustomize_and_stays_out_without_torch(daemon, env, tmp):
    other = os.path.join(tmp, "othersite")
    os.makedirs(other)
    with open(os.path.join(other, "sitecustomize.py"), "w") as f:
        f.write(OTHER_SITE % BOOT)
    e = dict(env, PYTHONPATH=other)
    del e["VRAMSCOPE_SOCKET"]
    cmd = VRAMSCOPE + ["run", "--socket", daemon.socket, "--max-entries", "4242", "--",
           "python3", CHILD, "--epochs", "2"]
    c = Child(e, cmd=cmd, cwd=tmp)
    try:
        got = c("{k: os.environ.get(k) for k in ('VRAMSCOPE_AUTO', 'VRAMSCOPE_SOCKET', 'VRAMSCOPE_MAX_ENTRIES', "
                "'PYTHONPATH')}")
        assert got == {"VRAMSCOPE_AUTO": "1", "VRAMSCOPE_SOCKET": daemon.socket, "VRAMSCOPE_MAX_ENTRIES": "4242",
                       "PYTHONPATH": BOOT + os.pathsep + other}
        assert c("sys.argv") == [CHILD, "--epochs", "2"]
        # the other sitecustomize ran, with our directory out of the way, and its sys.path change stays
        assert c("__import__('builtins').OTHER_SITE_RAN") is True
        assert c("__import__('builtins').OTHER_SITE_SAW_BOOT") is False
        assert c("'/other-site-added' in sys.path and %r in sys.path" % BOOT) is True
        # auto mode, no torch: only the import hook; no agent module, no thread, no socket
        assert c("type(sys.meta_path[0]).__name__") == "TorchImportHook"
        assert c("'vramscope.agent._agent' in sys.modules") is False
        assert c("[t.name for t in __import__('threading').enumerate()]") == ["MainThread"]
        time.sleep(0.5)
        rc, out, err = c.quit()
        assert rc == 0 and err == ""
        assert daemon.connections == 0
    finally:
        c.kill()


def test_run_without_other_sitecustomize(env, tmp):
    p = vramscope("run", "--no-record", "--", "python3", "-c",
                  "import os, sys; print(os.environ['VRAMSCOPE_RECORD'], type(sys.modules['sitecustomize']).__name__,"
                  " sys.modules['sitecustomize'].__file__)", env=env, cwd=tmp)
    assert p.returncode == 0, p.stderr
    rec, kind, path = p.stdout.split()
    assert rec == "0" and path == os.path.join(BOOT, "sitecustomize.py")
    assert p.stderr == ""


def test_run_failing_sitecustomize_is_reported_like_site_does(env, tmp):
    other = os.path.join(tmp, "bad")
    os.makedirs(other)
    with open(os.path.join(other, "sitecustomize.py"), "w") as f:
        f.write("raise ValueError('broken site')\n")
    p = vramscope("run", "--", "python3", "-c", "print('ran')", env=dict(env, PYTHONPATH=other), cwd=tmp)
    assert p.returncode == 0 and p.stdout == "ran\n"
    assert "Error in sitecustomize" in p.stderr and "ValueError: broken site" in p.stderr


def test_run_errors(env):
    p = vramscope("run", "--", "no-such-command-vramscope", env=env)
    assert p.returncode == 127 and "command not found" in p.stderr
    p = vramscope("run", env=env)
    assert p.returncode == 2 and "no command" in p.stderr


def test_run_default_socket_is_discovered(env, tmp):
    e = dict(env, XDG_RUNTIME_DIR=os.path.join(tmp, "run"))
    del e["VRAMSCOPE_SOCKET"]
    p = vramscope("run", "--", "python3", "-c", "import os; print(os.environ['VRAMSCOPE_SOCKET'])", env=e)
    assert p.stdout.strip() == os.path.join(tmp, "run", "vramscope", "daemon.sock")


def test_socket_discovery(env, tmp):
    code = "from vramscope import _paths; print(_paths.socket_path())"
    base = {k: v for k, v in env.items() if k not in ("VRAMSCOPE_SOCKET", "XDG_CACHE_HOME", "XDG_RUNTIME_DIR")}

    def disc(**kw):
        return subprocess.run([sys.executable, "-c", code], env=dict(base, **kw), capture_output=True,
                              text=True).stdout.strip()

    assert disc(VRAMSCOPE_SOCKET="/x/y.sock", XDG_RUNTIME_DIR="/run/u") == "/x/y.sock"
    assert disc(XDG_RUNTIME_DIR="/run/u", XDG_CACHE_HOME="/c") == "/run/u/vramscope/daemon.sock"
    assert disc(XDG_CACHE_HOME="/c") == "/c/vramscope/daemon.sock"
    assert disc(HOME="/home/h") == "/home/h/.cache/vramscope/daemon.sock"


def test_attach_pid_needs_python_314(env, tmp):
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], env=env)
    try:
        p = vramscope("attach", str(target.pid), env=env)
    finally:
        target.kill()
        target.wait()
    if sys.version_info >= (3, 14):
        import pytest

        pytest.skip("this interpreter has sys.remote_exec")
    assert p.returncode == 2
    assert p.stdout == ""
    err = p.stderr
    assert "cannot attach to pid %d" % target.pid in err
    assert "Python 3.14" in err and "this is Python %d.%d" % sys.version_info[:2] in err
    assert "runs Python %d.%d" % sys.version_info[:2] in err  # the target's version, from /proc
    assert "vramscope run -- <command>" in err and "import vramscope; vramscope.attach()" in err


def test_attach_no_such_pid(env):
    p = vramscope("attach", "999999999", env=env)
    assert p.returncode == 2 and "no process with pid 999999999" in p.stderr


def test_target_python_version():
    from vramscope import _remote

    assert _remote.target_python(os.getpid()) == tuple(sys.version_info[:2])
    assert _remote.target_python(999999999) is None
