"""Where the daemon's socket and the agent's spool live (the daemon uses the same rules)."""
import os

BOOT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_boot")


def cache_dir():
    """$XDG_CACHE_HOME/vramscope, or ~/.cache/vramscope."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "vramscope")


def socket_path():
    """The daemon's Unix socket: $VRAMSCOPE_SOCKET if set; else
    $XDG_RUNTIME_DIR/vramscope/daemon.sock if XDG_RUNTIME_DIR is set; else
    the cache dir's daemon.sock ($XDG_CACHE_HOME or ~/.cache)."""
    env = os.environ.get("VRAMSCOPE_SOCKET")
    if env:
        return env
    run = os.environ.get("XDG_RUNTIME_DIR")
    if run:
        return os.path.join(run, "vramscope", "daemon.sock")
    return os.path.join(cache_dir(), "daemon.sock")


def spool_dir():
    """Where out-of-memory snapshots wait while no daemon is connected."""
    return os.path.join(cache_dir(), "spool")
