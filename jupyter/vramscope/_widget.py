"""The notebook widgets (anywidget): the flame-graph report and the live counters.

State lives in traitlets: the flame tree JSON, the weight, the selected frame,
the top lines, the findings. Custom messages are only requests and their
answers: the front end asks for another weight (or the other side of a diff),
the kernel runs the Go engine, sets `tree` and answers {"type": "view", "id",
"ok", "error"}.

The front end (static/widget.js) runs the very same flame.js as the CLI's page
and the VS Code webview: the ESM is flame.js wrapped as a module followed by
widget.js (see esm()). Displaying a report gives one output that holds both
the widget view and a text/html fallback (_html.page) for places where
widgets cannot render.

Needs anywidget (pip install 'vramscope[notebook]'); without it report()
returns a Static object that displays the HTML fallback only.
"""
import linecache
import threading

from . import _engine, _html

_lock = threading.Lock()
_last = []  # the last report displayed (for notebook.last())


def esm(name):
    """A front-end module: flame.js (a classic UMD script, kept byte-identical to
    profiler/flame/web/flame.js) wrapped so that its exports land in a local
    `VramscopeFlame`, then static/dom.js (helpers both modules use), then
    static/NAME, which uses them and exports the anywidget entry points."""
    return ("const VramscopeFlame = (function () {\n  const module = { exports: {} };\n"
            + _html.asset("flame.js")
            + "\n  return module.exports;\n})();\n"
            + _html.asset("dom.js")
            + _html.asset(name))


def _bundle(out):
    """An anywidget _repr_mimebundle_ result as (data, metadata), data a fresh
    dict the caller may add its own mime types to."""
    meta = {}
    if isinstance(out, tuple):
        out, meta = out
    return dict(out or {}), meta


def anywidget_available():
    try:
        import anywidget  # noqa: F401
    except Exception:
        return False
    return True


class Static:
    """A report without the widget: text/html and text/plain only."""

    def __init__(self, view):
        self.view = view
        self.timings = None  # %%vramscope: what the report cost (see _magic)

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"text/plain": _html.plain(self.view), "text/html": _html.page(self.view)}


_FlameWidget = None
_LiveWidget = None


def _classes():
    """The widget classes, defined on first use (importing anywidget pulls in
    ipywidgets; `import vramscope` must stay cheap)."""
    global _FlameWidget, _LiveWidget
    with _lock:
        if _FlameWidget is not None:
            return _FlameWidget, _LiveWidget
        import anywidget
        import traitlets as t

        class FlameWidget(anywidget.AnyWidget):
            """An interactive flame graph with its report (see module doc)."""

            _esm = esm("widget.js")
            _css = _html.asset("flame.css") + _html.asset("widget.css")

            tree = t.Dict().tag(sync=True)
            weight = t.Unicode("peak").tag(sync=True)
            weights = t.List(t.Unicode()).tag(sync=True)
            side = t.Unicode("").tag(sync=True)
            sides = t.List(t.Unicode()).tag(sync=True)
            title = t.Unicode("").tag(sync=True)
            facts = t.List(t.Unicode()).tag(sync=True)
            peak_line = t.Unicode("").tag(sync=True)
            note = t.Unicode("").tag(sync=True)
            top_lines = t.List().tag(sync=True)
            findings = t.List(allow_none=True, default_value=None).tag(sync=True)
            diff = t.List(allow_none=True, default_value=None).tag(sync=True)
            selected = t.Dict().tag(sync=True)
            selected_info = t.Dict().tag(sync=True)
            height = t.Int(0).tag(sync=True)  # px; 0: as tall as the graph (120 to 560 px)

            def __init__(self, view=None, files=None, labeler=None, **kw):
                view = dict(view or {})
                for k in ("tree", "title", "facts", "peak_line", "note", "top_lines", "findings", "diff",
                          "weight", "side"):
                    if view.get(k) is not None:
                        kw.setdefault(k, view[k])
                self.timings = None  # %%vramscope: what the report cost (see _magic)
                self._files = dict(files or {})  # side ("" for a single snapshot) -> snapshot file
                self._labeler = labeler
                if self._files:
                    kw.setdefault("weights", list(_engine.WEIGHTS))
                if len(self._files) > 1:
                    kw.setdefault("sides", sorted(self._files, key=lambda s: s != "after"))
                super().__init__(**kw)
                self.on_msg(self._on_msg)

            @classmethod
            def from_tree(cls, tree, title=None, **kw):
                """A widget for a flame tree (flame.Tree JSON) without a snapshot file."""
                return cls({"tree": tree, "title": title or tree.get("title") or "flame graph"}, **kw)

            def view(self):
                return {"title": self.title, "facts": list(self.facts), "peak_line": self.peak_line,
                        "note": self.note, "top_lines": list(self.top_lines), "findings": self.findings,
                        "diff": self.diff, "tree": self.tree}

            def _repr_mimebundle_(self, **kwargs):
                data, meta = _bundle(super()._repr_mimebundle_(**kwargs))
                v = self.view()
                data["text/plain"] = _html.plain(v)
                data["text/html"] = _html.page(v)
                return data, meta

            def set_view(self, weight=None, side=None):
                """Recompute the tree for another weight / side of a diff (runs the engine)."""
                weight = weight or self.weight
                side = self.side if side is None else side
                path = self._files.get(side)
                if path is None:
                    raise ValueError("no snapshot for %r" % (side,))
                tree = _engine.flame(path, weight)
                if self._labeler is not None:
                    self._labeler.tree(tree)
                with self.hold_sync():
                    self.tree = tree
                    self.weight = weight
                    self.side = side

            def _on_msg(self, _w, content, _buffers):
                if not isinstance(content, dict) or content.get("type") != "view":
                    return
                reply = {"type": "view", "id": content.get("id"), "ok": True}
                try:
                    self.set_view(content.get("weight"), content.get("side"))
                except Exception as e:
                    reply.update(ok=False, error=str(e))
                self.send(reply)

            @t.observe("selected")
            def _on_selected(self, change):
                sel = change["new"] or {}
                f, line = sel.get("file") or "", int(sel.get("line") or 0)
                lab = self._labeler
                real = lab.real.get(f, f) if lab is not None else f
                where = (lab.label(real, line) if lab is not None else "%s:%d" % (f, line)) if f else ""
                src = ""
                if real and line:
                    try:
                        src = linecache.getline(real, line).strip()
                    except Exception:
                        src = ""
                self.selected_info = {"name": sel.get("name") or "", "where": where, "source": src,
                                      "path": list(sel.get("path") or [])}

        class LiveWidget(anywidget.AnyWidget):
            """GPU memory, utilisation and torch allocated/reserved over time (see _live)."""

            _esm = esm("live.js")
            _css = _html.asset("flame.css") + _html.asset("widget.css")

            samples = t.List().tag(sync=True)
            running = t.Bool(False).tag(sync=True)
            source = t.Unicode("").tag(sync=True)
            note = t.Unicode("").tag(sync=True)
            device = t.Int(0).tag(sync=True)
            total = t.Int(0).tag(sync=True)
            interval = t.Float(1.0).tag(sync=True)

            def __init__(self, sampler=None, **kw):
                self._sampler = sampler
                self._thread = None
                self._stop = threading.Event()
                super().__init__(**kw)

            def _repr_mimebundle_(self, **kwargs):
                data, meta = _bundle(super()._repr_mimebundle_(**kwargs))
                data["text/plain"] = "vramscope live: %s (%s)" % (self.source, self.note or "stopped")
                return data, meta

            def start(self):
                if self._thread is not None and self._thread.is_alive():
                    return
                self._stop.clear()
                self._thread = threading.Thread(target=self._loop, name="vramscope-live", daemon=True)
                self._thread.start()
                self.running = True  # the observer sees the thread alive: no second one

            def stop(self):
                """Stop sampling (the Stop button does the same)."""
                self._stop.set()
                if self.running:
                    self.running = False

            @t.observe("running")
            def _on_running(self, change):
                if change["new"]:
                    if self._sampler is not None:
                        self.start()
                else:
                    self._stop.set()

            def _loop(self):
                s = self._sampler
                try:
                    hist = s.history()
                    if hist:
                        self.samples = hist[-s.keep:]
                    while not self._stop.is_set():
                        point = s.sample()
                        if point is not None:
                            self.total = int(point.get("total") or self.total or 0)
                            self.samples = (list(self.samples) + [point])[-s.keep:]
                        self._stop.wait(s.interval)
                except Exception as e:  # never into the kernel
                    self.note = "stopped: %s" % e
                finally:
                    s.close()
                    if self.running:
                        self.running = False

        _FlameWidget, _LiveWidget = FlameWidget, LiveWidget
        return _FlameWidget, _LiveWidget


def flame_widget_class():
    return _classes()[0]


def live_widget_class():
    return _classes()[1]


def report(view, files=None, labeler=None):
    """The object to display for a report: a FlameWidget, or Static without anywidget."""
    if anywidget_available():
        w = _classes()[0](view, files=files, labeler=labeler)
    else:
        w = Static(view)
    with _lock:
        _last[:] = [w]
    return w


def last():
    """The last report the magics displayed (a FlameWidget or Static), or None."""
    with _lock:
        return _last[0] if _last else None
