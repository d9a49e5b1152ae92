"""A sys.meta_path hook that calls back once, right after `torch` finishes importing.

Stdlib only and tiny: the bootstrap installs it in every Python process started
under `vramscope run`; a process that never imports torch pays one string
comparison per import and nothing else.
"""
import logging
import sys


class TorchImportHook:
    """Finds nothing itself: for "torch" it asks the finders after it, and wraps the
    loader's exec_module so that the callback runs after torch/__init__.py has run."""

    def __init__(self, callback, name="torch"):
        self.callback = callback
        self.name = name
        self.fired = False
        self._busy = False

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name or self._busy or self.fired:
            return None
        self._busy = True
        try:
            spec = None
            for finder in list(sys.meta_path):
                if finder is self:
                    continue
                find = getattr(finder, "find_spec", None)
                if find is None:
                    continue
                spec = find(fullname, path, target)
                if spec is not None:
                    break
        finally:
            self._busy = False
        if spec is None:
            return None
        try:
            self._wrap(spec.loader)
        except Exception:  # never break the import itself
            logging.getLogger("vramscope").debug("could not hook the import of %s", fullname, exc_info=True)
        return spec

    def _wrap(self, loader):
        orig = getattr(loader, "exec_module", None)
        if orig is None:
            return
        hook = self

        def exec_module(module):
            try:
                del loader.exec_module  # back to the class's method
            except Exception:
                pass
            orig(module)  # an ImportError here is the program's, not ours: it propagates
            hook._fire(module)

        loader.exec_module = exec_module

    def _fire(self, module):
        if self.fired:
            return
        self.fired = True
        uninstall(self)
        try:
            self.callback(module)
        except Exception:
            logging.getLogger("vramscope").warning("vramscope: torch import hook failed", exc_info=True)


def install(callback, name="torch"):
    hook = TorchImportHook(callback, name)
    sys.meta_path.insert(0, hook)
    return hook


def uninstall(hook):
    try:
        sys.meta_path.remove(hook)
    except ValueError:
        pass
