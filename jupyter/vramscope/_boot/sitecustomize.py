"""vramscope's bootstrap: `vramscope run` puts this directory first on PYTHONPATH,
so every Python process of the program (torchrun's workers too) runs it at start-up.

1. It first runs the sitecustomize that would have run without it (a distribution's
   or a virtualenv's), so nothing changes for the program.
2. With VRAMSCOPE_AUTO=1 it installs one import hook and nothing else: a process
   that never imports torch gets no thread and no socket. When torch has imported,
   the agent annotates backward and waits for CUDA initialisation (torch's own
   _lazy_call) to start recording and register with the daemon; a process that
   never initialises CUDA (torchrun's launcher) never registers.

It never raises into the program and prints nothing unless something is wrong.
"""


def _vramscope_boot():
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))

    def ours(p):
        try:
            return os.path.abspath(p or os.curdir) == here
        except Exception:
            return False

    # 1. Chain to the sitecustomize this one shadows.
    me = sys.modules.get("sitecustomize")
    positions = [i for i, p in enumerate(sys.path) if ours(p)]
    sys.path[:] = [p for p in sys.path if not ours(p)]
    sys.modules.pop("sitecustomize", None)
    try:
        import sitecustomize  # noqa: F401  (the other one, if any)
    except ImportError as e:
        if getattr(e, "name", None) != "sitecustomize":
            sys.stderr.write("Error in sitecustomize; set PYTHONVERBOSE for traceback:\n%s: %s\n"
                             % (type(e).__name__, e))
    except Exception as e:  # as site.py reports it
        if sys.flags.verbose:
            sys.excepthook(*sys.exc_info())
        else:
            sys.stderr.write("Error in sitecustomize; set PYTHONVERBOSE for traceback:\n%s: %s\n"
                             % (type(e).__name__, e))
    finally:
        for i in positions:
            sys.path.insert(min(i, len(sys.path)), here)
        if me is not None:
            sys.modules["sitecustomize"] = me

    # 2. Auto mode.
    if os.environ.get("VRAMSCOPE_AUTO") != "1":
        return
    try:
        pkg = sys.modules.get("vramscope")
        if pkg is None:
            # Load the package this bootstrap belongs to, by its location: the
            # program's interpreter need not have it installed.
            import importlib.util

            pkgdir = os.path.dirname(here)
            spec = importlib.util.spec_from_file_location(
                "vramscope", os.path.join(pkgdir, "__init__.py"), submodule_search_locations=[pkgdir])
            pkg = importlib.util.module_from_spec(spec)
            sys.modules["vramscope"] = pkg
            try:
                spec.loader.exec_module(pkg)
            except BaseException:
                sys.modules.pop("vramscope", None)
                raise
        pkg._auto_install()
    except Exception as e:
        try:
            sys.stderr.write("vramscope: bootstrap failed, the program runs without the agent: %s: %s\n"
                             % (type(e).__name__, e))
        except Exception:
            pass


try:
    _vramscope_boot()
except Exception:
    pass
del _vramscope_boot
