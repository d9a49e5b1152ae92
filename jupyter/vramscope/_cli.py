"""The agent's command line:

    python -m vramscope run [--socket S] [--max-entries N] [--no-record] -- CMD ARGS...
    python -m vramscope boot-path
    python -m vramscope attach PID [--socket S] [--max-entries N]
"""
import argparse
import os
import sys

from . import _paths

ALTERNATIVES = ("Instead, either restart the program under the agent:\n"
                "    vramscope run -- <command>      (or: python -m vramscope run -- <command>)\n"
                "or add to the script, before training starts:\n"
                "    import vramscope; vramscope.attach()")


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m vramscope", description="vramscope's in-process agent")
    sub = p.add_subparsers(dest="command")

    r = sub.add_parser("run", help="run CMD with the agent in each of its Python processes that uses CUDA")
    r.add_argument("--socket", help="the daemon's socket (default: $VRAMSCOPE_SOCKET, $XDG_RUNTIME_DIR/vramscope/"
                                    "daemon.sock or ~/.cache/vramscope/daemon.sock)")
    r.add_argument("--max-entries", type=int, default=None, help="allocator history entries kept (default 100000)")
    r.add_argument("--no-record", action="store_true", help="do not record the allocator's history (counters only)")
    r.add_argument("cmd", nargs=argparse.REMAINDER, help="-- CMD ARGS...")

    sub.add_parser("boot-path", help="print the bootstrap directory to put first on PYTHONPATH")

    a = sub.add_parser("attach", help="attach the agent to a running Python process (Python 3.14+)")
    a.add_argument("pid", type=int)
    a.add_argument("--socket")
    a.add_argument("--max-entries", type=int, default=100_000)

    args = p.parse_args(argv)
    if args.command == "run":
        return run(args)
    if args.command == "boot-path":
        print(_paths.BOOT_DIR)
        return 0
    if args.command == "attach":
        from . import _remote

        return _remote.attach(args.pid, socket=args.socket, max_entries=args.max_entries)
    p.print_help(sys.stderr)
    return 2


def run_env(env, socket=None, max_entries=None, record=True):
    """The environment `run` gives CMD (env is modified and returned)."""
    env["VRAMSCOPE_AUTO"] = "1"
    env["VRAMSCOPE_SOCKET"] = os.path.abspath(socket) if socket else _paths.socket_path()
    if max_entries is not None:
        env["VRAMSCOPE_MAX_ENTRIES"] = str(max_entries)
    else:
        env.setdefault("VRAMSCOPE_MAX_ENTRIES", "100000")
    if not record:
        env["VRAMSCOPE_RECORD"] = "0"
    old = [x for x in env.get("PYTHONPATH", "").split(os.pathsep) if x and x != _paths.BOOT_DIR]
    env["PYTHONPATH"] = os.pathsep.join([_paths.BOOT_DIR] + old)
    return env


def run(args):
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        sys.stderr.write("vramscope run: no command given (usage: python -m vramscope run [options] -- CMD ARGS...)\n")
        return 2
    if args.max_entries is not None and args.max_entries <= 0:
        sys.stderr.write("vramscope run: --max-entries must be positive\n")
        return 2
    run_env(os.environ, socket=args.socket, max_entries=args.max_entries, record=not args.no_record)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvp(cmd[0], cmd)
    except FileNotFoundError:
        sys.stderr.write("vramscope run: command not found: %s\n" % cmd[0])
        return 127
    except PermissionError:
        sys.stderr.write("vramscope run: cannot execute %s: permission denied\n" % cmd[0])
        return 126
    except OSError as e:
        sys.stderr.write("vramscope run: cannot execute %s: %s\n" % (cmd[0], e))
        return 126
    return 0  # not reached
