"""The notebook widgets (anywidget): the flame-graph report and the live counters.

State lives in traitlets: the flame tree JSON, the weight, the selected frame,
the top lines, the findings. Custom messages are only requests and their
answers: the front end asks for another weight (or the other side of a diff),
the kernel runs the Go engine, sets `tree` and answers {"type": "view", "id",
"ok", "error"}.

The front end (static/widget.js) runs the very same flame.js as the CLI's page
and the VS Code webview: the ESM is flame.js wrapped as a module followed by
widget.js (see esm()).

Displaying a widget in IPython gives two outputs (_ipython_display_): first
its static copy (_html.page / _livestatic.page: text/html without script, the
flame graph as an SVG image, and text/plain), then the widget view. Exporters
(nbconvert, "Export as HTML", static viewers) pick the widget view over
text/html whenever the notebook holds widget state, so a copy inside the
widget's own output would never be shown there; as an output of its own it
always is. In a live notebook the widget's front end hides its copy while a
view is rendered (static/dom.js), keyed by `static_key`. The copy's
display_id is that key, so a new weight, side or live sample updates every
copy of the widget in place (what an export shows is the last state).

Needs anywidget (pip install 'vramscope[notebook]'); without it report()
returns a Static object that displays the static copy only.
"""
import json
import linecache
import logging
import threading
import time
import uuid

from . import _deepjson, _engine, _html

log = logging.getLogger("vramscope")
_lock = threading.Lock()
_last = []  # the last report displayed (for notebook.last())


def _core():
    """static/files.json: the shared front-end core's scripts and styles in load
    order (a symlink to profiler/flame/web/files.json, the list every host reads;
    the files it names are symlinks there too, which the wheel resolves)."""
    return json.loads(_html.asset("files.json"))


def _wrapped(asset, const):
    return ("const %s = (function () {\n  const module = { exports: {} };\n" % const
            + _html.asset(asset)
            + "\n  return module.exports;\n})();\n")


def esm(name):
    """A front-end module: the shared scripts (classic UMD scripts, kept
    byte-identical to profiler/flame/web, in files.json's order) each wrapped so
    that its exports land in a local constant (its global's name:
    `VramscopeFlame`, ...), then static/dom.js (helpers both modules use), then
    static/NAME, which uses them and exports the anywidget entry points."""
    shared = [_wrapped(s["file"], s["global"]) for s in _core()["scripts"]]
    return "".join(shared) + _html.asset("dom.js") + _html.asset(name)


def css():
    """The widget's styles: the core's (files.json's, but for the page around
    the graph: the widget has none) and its own."""
    names = [s["file"] for s in _core()["styles"] if s["part"] != "page"] + ["widget.css"]
    return "".join(_html.asset(n) for n in names)


def _bundle(out):
    """An anywidget _repr_mimebundle_ result as (data, metadata), data a fresh
    dict the caller may add its own mime types to."""
    meta = {}
    if isinstance(out, tuple):
        out, meta = out
    return dict(out or {}), meta


def static_bundle(make_html, make_plain):
    """{text/html, text/plain} of a static copy; a failure to build it is
    said in the copy (the widget beside it must still be displayed)."""
    try:
        return {"text/html": make_html(), "text/plain": make_plain()}
    except Exception as e:
        msg = "vramscope: the static copy could not be built (%s: %s)" % (type(e).__name__, e)
        return {"text/html": '<div class="%s">%s</div>' % (_html.STATIC_CLASS, _html._e(msg)), "text/plain": msg}


class StaticCopy:
    """Shared by the widgets: the static copy as a display output of its own
    (display_id = static_key), then the widget view. Subclasses give
    _static_html() and _static_plain()."""

    def _ipython_display_(self, **kwargs):
        from IPython.display import display

        display(self._static(), raw=True, display_id=self.static_key)
        self._static_shown = True
        data, meta = self._repr_mimebundle_()
        display(data, raw=True, metadata=meta)

    def _static(self):
        return static_bundle(self._static_html, self._static_plain)

    def update_static(self):
        """Rewrites every displayed static copy of this widget with its state
        now. Never raises: it runs in trait observers and the sampling thread."""
        if not getattr(self, "_static_shown", False):
            return
        try:
            from IPython.display import update_display

            update_display(self._static(), raw=True, display_id=self.static_key)
        except Exception as e:
            log.debug("vramscope: could not update the static copy: %s", e)

    def _repr_mimebundle_(self, **kwargs):
        # The widget view only: its text/plain stays empty, because exporters
        # show it (under the static copy) when the notebook has no widget state.
        data, meta = _bundle(super()._repr_mimebundle_(**kwargs))
        data["text/plain"] = ""
        return data, meta


def new_key():
    return uuid.uuid4().hex[:16]


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
        return static_bundle(lambda: _html.page(self.view), lambda: _html.plain(self.view))


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
        import traitlets

        _FlameWidget = _flame_widget(anywidget, traitlets)
        _LiveWidget = _live_widget(anywidget, traitlets)
        return _FlameWidget, _LiveWidget


def selection_info(sel, labeler):
    """What the widget shows for a clicked frame: its name, its place (cell
    relative with a labeler) and the source line, read in the kernel."""
    f, line = sel.get("file") or "", int(sel.get("line") or 0)
    real = labeler.real.get(f, f) if labeler is not None else f
    where = (labeler.label(real, line) if labeler is not None else "%s:%d" % (f, line)) if f else ""
    src = ""
    if real and line:
        try:
            src = linecache.getline(real, line).strip()
        except Exception:
            src = ""
    return {"name": sel.get("name") or "", "where": where, "source": src, "path": list(sel.get("path") or [])}


def _flame_widget(anywidget, t):
    """FlameWidget: the report of a snapshot or a diff (flame graph, timeline, tables)."""

    class FlameWidget(StaticCopy, anywidget.AnyWidget):
        """An interactive flame graph with its report (see module doc)."""

        _esm = esm("widget.js")
        _css = css()

        tree = t.Dict().tag(sync=True, to_json=_deepjson.tree_to_json)  # a deep tree travels as JSON text
        # analyze --report: the timeline, moments, top lines and findings (report.js)
        report = t.Dict(allow_none=True, default_value=None).tag(sync=True)
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
        static_key = t.Unicode().tag(sync=True)  # marks this widget's static copies (see module doc)

        @t.default("static_key")
        def _new_key(self):
            return new_key()

        def __init__(self, view=None, files=None, labeler=None, **kw):
            view = dict(view or {})
            for k in ("tree", "title", "facts", "peak_line", "note", "top_lines", "findings", "diff",
                      "weight", "side", "report"):
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

        def _static_html(self):
            return _html.page(dict(self.view(), weight=self.weight, side=self.side), self.static_key)

        def _static_plain(self):
            return _html.plain(self.view())

        @t.observe("tree")
        def _on_tree(self, _change):
            self.update_static()  # another weight or side: exports show what was shown last

        def set_view(self, weight=None, side=None):
            """Recompute the tree for another weight / side of a diff (runs the engine)."""
            weight = weight or self.weight
            side = self.side if side is None else side
            path = self._files.get(side)
            if path is None:
                raise ValueError("no snapshot for %r" % (side,))
            names = self._labeler.engine_names() if self._labeler is not None else None
            tree = _engine.flame(path, weight, names)
            if self._labeler is not None:
                self._labeler.tree(tree)
            report = self.report
            if report is not None and side != self.side:
                report = _engine.report(path, names)  # the other snapshot's timeline
                if self._labeler is not None:
                    self._labeler.report(report)
            with self.hold_sync():
                self.report = report
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
            self.selected_info = selection_info(change["new"] or {}, self._labeler)

    return FlameWidget


def _live_widget(anywidget, t):
    """LiveWidget: GPU memory and utilisation sampled while it runs."""

    class LiveWidget(StaticCopy, anywidget.AnyWidget):
        """GPU memory, utilisation and torch allocated/reserved over time (see _live)."""

        STATIC_EVERY_S = 5.0  # how often a running view rewrites its static copy

        _esm = esm("live.js")
        _css = _html.asset("flame.css") + _html.asset("widget.css")

        samples = t.List().tag(sync=True)
        running = t.Bool(False).tag(sync=True)
        source = t.Unicode("").tag(sync=True)
        note = t.Unicode("").tag(sync=True)
        idle = t.Unicode("").tag(sync=True)  # why the GPU idled over the last minute, by line (vramscope idle)
        warning = t.Unicode("").tag(sync=True)  # the daemon's OOM forecast for this kernel (_live.warning_text)
        device = t.Int(0).tag(sync=True)
        total = t.Int(0).tag(sync=True)
        interval = t.Float(1.0).tag(sync=True)
        static_key = t.Unicode().tag(sync=True)

        @t.default("static_key")
        def _new_key(self):
            return new_key()

        def __init__(self, sampler=None, **kw):
            self._sampler = sampler
            self._thread = None
            self._stop = threading.Event()
            self._static_at = 0.0
            super().__init__(**kw)

        def state(self):
            return {"samples": list(self.samples), "running": self.running, "source": self.source,
                    "note": self.note, "idle": self.idle, "warning": self.warning, "device": self.device,
                    "total": self.total, "interval": self.interval}

        def _static_html(self):
            from . import _livestatic

            return _livestatic.page(self.state(), self.static_key)

        def _static_plain(self):
            from . import _livestatic

            return _livestatic.plain(self.state())

        def _maybe_update_static(self, force=False):
            now = time.monotonic()
            if force or now - self._static_at >= self.STATIC_EVERY_S:
                self._static_at = now
                self.update_static()

        def start(self):
            if self._thread is not None and self._thread.is_alive():
                return
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="vramscope-live", daemon=True)
            self._thread.start()
            self.running = True  # the observer sees the thread alive: no second one

        def stop(self, wait=3.0):
            """Stop sampling (the Stop button does the same). Waits up to
            `wait` s for the sampling thread, so that the samples, and the
            static copy rewritten here, are the last ones."""
            self._stop.set()
            th = self._thread
            if wait and th is not None and th is not threading.current_thread():
                th.join(wait)
            if self.running:
                self.running = False  # the observer rewrites the static copy
            else:
                self._maybe_update_static(force=True)

        @t.observe("running")
        def _on_running(self, change):
            if change["new"]:
                if self._sampler is not None:
                    self.start()
            else:
                self._stop.set()
                # Here, in the thread that stopped it (a cell, the Stop
                # button's message), not only in the sampling thread:
                # nbclient takes a display update only while the cell it
                # belongs to runs.
                self._maybe_update_static(force=True)

        def _loop(self):
            s = self._sampler
            try:
                hist = s.history()
                if hist:
                    self.samples = hist[-s.keep:]
                n = 0
                while not self._stop.is_set():
                    if n % s.IDLE_EVERY == 0:
                        self.idle = s.idle()
                        warning = s.warning()
                        if warning != self.warning:
                            self.warning = warning
                            self._maybe_update_static(force=True)
                    n += 1
                    point = s.sample()
                    if point is not None:
                        self.total = int(point.get("total") or self.total or 0)
                        self.samples = (list(self.samples) + [point])[-s.keep:]
                        self._maybe_update_static()
                    self._stop.wait(s.interval)
            except Exception as e:  # never into the kernel
                self.note = "stopped: %s" % e
            finally:
                s.close()
                if self.running:
                    self.running = False
                else:
                    self._maybe_update_static(force=True)

    return LiveWidget


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
