"""A private JupyterLab 4 or Notebook 7 server on loopback for the browser
tests (test_lab.py, test_export.py): a free port, a random token, private
config, runtime, workspace and settings directories, no news feed or update
check (nothing leaves the machine), and the checkout's vramscope on the
kernel's PYTHONPATH."""
import contextlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
CHROMIUM = os.environ.get("VRAMSCOPE_CHROMIUM", "/usr/bin/chromium")

UIS = {
    # name: (module, app class for expose_app_in_browser, page path)
    "lab": ("jupyterlab", "LabApp", "lab/tree/"),
    "notebook7": ("notebook", "JupyterNotebookApp", "notebooks/"),
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def need_browser(tools=("node",)):
    """Fails (not skips) when a piece of the browser tests is missing."""
    hints = {"node": "install Node.js", "go": "install Go"}
    for tool in tools:
        assert shutil.which(tool), "%s not found: %s, or set VRAMSCOPE_SKIP_BROWSER=1" % (tool, hints.get(tool, ""))
    assert os.path.exists(CHROMIUM), "chromium not found at %s: apt-get install chromium, or set " \
                                     "VRAMSCOPE_SKIP_BROWSER=1" % CHROMIUM


def write_settings(tmp_path, settings=None):
    """The user settings: no "fetch news?" toast over the notebook in the
    screenshots, plus settings {"@jupyterlab/PLUGIN-DIR/NAME": {...}}."""
    settings = dict(settings or {})
    settings["@jupyterlab/apputils-extension/notification"] = {"fetchNews": "false", "checkForUpdates": False}
    for name, value in settings.items():
        path = tmp_path / "settings" / (name + ".jupyterlab-settings")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))


@contextlib.contextmanager
def serve(tmp_path, ui="lab", settings=None):
    """Yields (url, token, root): the server runs in root (tmp_path/lab; put the
    notebooks there) until the block ends; its log is tmp_path/lab.log."""
    root, cfg = tmp_path / "lab", tmp_path / "config"
    root.mkdir(exist_ok=True)
    cfg.mkdir(exist_ok=True)
    (cfg / "jupyter_server_config.json").write_text(json.dumps({"LabApp": {
        "news_url": None, "check_for_updates_class": "jupyterlab.NeverCheckForUpdate"}}))
    write_settings(tmp_path, settings)
    port, token = free_port(), secrets.token_hex(16)
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(cfg), JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
               JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"),
               JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "settings"), PYTHONPATH=os.path.dirname(HERE))
    env.pop("VRAMSCOPE_SOCKET", None)
    module, app, _ = UIS[ui]
    args = [sys.executable, "-m", module, "--no-browser", "--ServerApp.ip=127.0.0.1",
            "--ServerApp.port=%d" % port, "--ServerApp.port_retries=0", "--IdentityProvider.token=%s" % token,
            "--ServerApp.root_dir=%s" % root, "--%s.expose_app_in_browser=True" % app]
    if os.geteuid() == 0:
        args.append("--allow-root")
    log = open(tmp_path / "lab.log", "w")
    p = subprocess.Popen(args, cwd=str(root), env=env, stdout=log, stderr=subprocess.STDOUT)
    url = "http://127.0.0.1:%d/" % port
    try:
        deadline = time.time() + 60
        while True:
            assert p.poll() is None, "JupyterLab exited: %s" % (tmp_path / "lab.log").read_text()[-2000:]
            try:
                urllib.request.urlopen(url + "api/status?token=" + token, timeout=2).read()
                break
            except OSError:
                assert time.time() < deadline, "JupyterLab did not start in 60 s"
                time.sleep(0.3)
        yield url, token, root
    finally:
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        log.close()
