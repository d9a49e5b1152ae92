"""The static views of a report: `text/html` (a self-contained fragment: the
facts, top lines and findings as plain HTML, then the flame graph drawn by the
very same flame.js, inlined with flame.css and the tree's JSON; no external
URL) and `text/plain`. They go into the same output as the widget, for the
places where widgets cannot render (nbconvert, GitHub, a terminal)."""
import html
import json
import os
import uuid

from ._report import fmt_bytes, fmt_count, fmt_delta, fmt_share

STATIC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")
_cache = {}


def asset(name):
    """A file of vramscope/static (flame.js and flame.css are byte copies of profiler/flame/web)."""
    s = _cache.get(name)
    if s is None:
        with open(os.path.join(STATIC, name), encoding="utf-8") as f:
            s = _cache[name] = f.read()
    return s


def script_json(obj):
    """JSON safe inside a <script> element: no "</script", no "<!--", no U+2028."""
    s = json.dumps(obj, separators=(",", ":"), ensure_ascii=True)
    return s.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def prune(tree, min_share=1e-5):
    """A copy of a flame tree without the frames narrower than min_share of the
    root (they would draw under a pixel wide at any zoom a page shows)."""
    root = tree.get("root") if isinstance(tree, dict) else None
    if not root:
        return tree
    limit = float(root.get("v") or 0) * min_share
    out = dict(tree)
    new_root = {k: v for k, v in root.items() if k != "c"}
    out["root"] = new_root
    stack = [(root, new_root)]
    while stack:
        src, dst = stack.pop()
        kids = [c for c in (src.get("c") or ()) if float(c.get("v") or 0) >= limit]
        if kids:
            dst["c"] = []
            for c in kids:
                d = {k: v for k, v in c.items() if k != "c"}
                dst["c"].append(d)
                stack.append((c, d))
    return out


def _e(s):
    return html.escape(str(s), quote=True)


def _table(head, rows, classes=None):
    h = "".join("<th>%s</th>" % _e(c) for c in head)
    body = []
    for r in rows:
        cells = []
        for i, c in enumerate(r):
            cls = (classes or {}).get(i)
            cells.append("<td%s>%s</td>" % (' class="%s"' % cls if cls else "", _e(c)))
        body.append("<tr>%s</tr>" % "".join(cells))
    return '<table class="vs-table"><thead><tr>%s</tr></thead><tbody>%s</tbody></table>' % (h, "".join(body))


def top_rows(view):
    return [(fmt_bytes(r["peak_bytes"]), fmt_share(r["peak_share"]), fmt_bytes(r["alloc_bytes"]),
             fmt_count(r["allocs"]), r["label"]) for r in view.get("top_lines") or []]


TOP_HEAD = ("at peak", "share", "allocated", "allocs", "line")
DIFF_HEAD = ("peak \u0394", "before", "after", "status", "line")


def diff_rows(view):
    return [(fmt_delta(r["peak_delta"]), fmt_bytes(r["peak_before"]), fmt_bytes(r["peak_after"]), r["status"],
             r["label"]) for r in view.get("diff") or []]


_CSS = """
.vramscope-static { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; font-size: 13px; color: var(--vf-fg); }
.vramscope-static .vs-title { font-weight: 600; font-size: 1.1em; margin: 2px 0 4px; }
.vramscope-static .vs-facts, .vramscope-static .vs-note { color: var(--vf-muted); margin: 2px 0; }
.vramscope-static .vs-peak { margin: 4px 0; font-weight: 600; }
.vramscope-static .vs-table { border-collapse: collapse; margin: 6px 0; font-variant-numeric: tabular-nums; }
.vramscope-static .vs-table th, .vramscope-static .vs-table td { padding: 1px 10px 1px 0; text-align: right; }
.vramscope-static .vs-table th:last-child, .vramscope-static .vs-table td:last-child { text-align: left; font-family: var(--vf-font-family); }
.vramscope-static .vs-findings { margin: 4px 0; padding-left: 18px; }
.vramscope-static .vs-sev-error { color: var(--vf-error); font-weight: 600; }
.vramscope-static .vs-flame { border: 1px solid var(--vf-border); margin-top: 6px; }
"""


def page(view, min_share=1e-4):
    """The text/html fallback of a report view (the dict _magic builds). Frames
    narrower than min_share of the total are left out of its flame graph (they
    are under a pixel wide unless zoomed in; the widget keeps them)."""
    vid = "vs-" + uuid.uuid4().hex[:12]
    parts = ['<div class="vramscope-static" id="%s">' % vid,
             "<style>%s%s</style>" % (asset("flame.css"), _CSS),
             '<div class="vs-title">vramscope \u00b7 %s</div>' % _e(view.get("title") or "GPU memory")]
    if view.get("facts"):
        parts.append('<div class="vs-facts">%s</div>' % " \u00b7 ".join(_e(f) for f in view["facts"]))
    if view.get("peak_line"):
        parts.append('<div class="vs-peak">%s</div>' % _e(view["peak_line"]))
    if view.get("note"):
        parts.append('<div class="vs-note">%s</div>' % _e(view["note"]))
    if view.get("diff") is not None:
        parts.append(_table(DIFF_HEAD, diff_rows(view)))
    if view.get("top_lines"):
        parts.append(_table(TOP_HEAD, top_rows(view)))
    fs = view.get("findings")
    if fs is not None:
        if fs:
            items = []
            for f in fs:
                where = (" \u2014 " + _e(f["where"])) if f.get("where") else ""
                fix = ("<br>fix: " + _e(f["fix"])) if f.get("fix") else ""
                items.append('<li><span class="vs-sev-%s">%s</span> %s%s%s</li>' % (
                    _e(f["severity"]), _e(f["severity"]), _e(f["title"]), where, fix))
            parts.append('<div>Findings:</div><ul class="vs-findings">%s</ul>' % "".join(items))
        else:
            parts.append('<div class="vs-note">Findings: none</div>')
    tree = view.get("tree")
    if tree and tree.get("root"):
        parts.append('<div class="vs-flame" id="%s-flame"></div>' % vid)
        parts.append('<script type="application/json" id="%s-data">%s</script>' % (vid, script_json(prune(tree, min_share))))
        parts.append("<script>%s</script>" % asset("flame.js"))
        parts.append('<script>(function () { var d = JSON.parse(document.getElementById("%s-data").textContent); '
                     'VramscopeFlame.render(document.getElementById("%s-flame"), d, {}); })();</script>'
                     % (vid, vid))
    parts.append("</div>")
    return "".join(parts)


def plain(view, rows=5):
    """The text/plain view: title, facts and the first top lines."""
    out = ["vramscope \u00b7 " + (view.get("title") or "GPU memory")]
    out += ["  " + f for f in view.get("facts") or []]
    if view.get("peak_line"):
        out.append("  " + view["peak_line"])
    if view.get("note"):
        out.append("  " + view["note"])
    if view.get("diff") is not None:
        out += ["  %12s %12s %12s  %-7s %s" % r for r in diff_rows(view)[:rows]]
    for r in top_rows(view)[:rows]:
        out.append("  %12s %6s  %s" % (r[0], r[1], r[4]))
    for f in view.get("findings") or []:
        out.append("  %s: %s%s" % (f["severity"], f["title"], (" \u2014 " + f["where"]) if f.get("where") else ""))
    return "\n".join(out)
