"""The static copy of a report: `text/html` (the facts, the flame graph as an
SVG image drawn in the kernel by _flamesvg, the top lines and the findings;
no script, no external URL) and `text/plain`. It is a display output of its
own, beside the widget's, for the places where widgets cannot render
(nbconvert, "Export as HTML", static viewers, a terminal); the widget hides it
while it is rendered (see _widget and static/dom.js)."""
import base64
import html
import os

from . import _flamesvg
from ._report import fmt_bytes, fmt_count, fmt_delta, fmt_share

STATIC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")
_cache = {}


def asset(name):
    """A file of static/ (the core's, named in static/files.json, are symlinks to profiler/flame/web)."""
    s = _cache.get(name)
    if s is None:
        with open(os.path.join(STATIC, name), encoding="utf-8") as f:
            s = _cache[name] = f.read()
    return s


def _e(s):
    return html.escape(str(s), quote=True)


def _table(head, rows):
    """A table whose last column (the line) is left-aligned, the numbers right."""
    def row(tag, cells):
        n = len(cells)
        return "<tr>%s</tr>" % "".join('<%s style="text-align:%s">%s</%s>' % (tag, "left" if i == n - 1 else "right",
                                                                              _e(c), tag) for i, c in enumerate(cells))
    return '<table class="vs-table"><thead>%s</thead><tbody>%s</tbody></table>' % (
        row("th", head), "".join(row("td", r) for r in rows))


def top_rows(view):
    return [(fmt_bytes(r["peak_bytes"]), fmt_share(r["peak_share"]), fmt_bytes(r["alloc_bytes"]),
             fmt_count(r["allocs"]), r["label"]) for r in view.get("top_lines") or []]


TOP_HEAD = ("at peak", "share", "allocated", "allocs", "line")
DIFF_HEAD = ("peak \u0394", "before", "after", "status", "line")


def diff_rows(view):
    return [(fmt_delta(r["peak_delta"]), fmt_bytes(r["peak_before"]), fmt_bytes(r["peak_after"]), r["status"],
             r["label"]) for r in view.get("diff") or []]


# The static copy must read the same where a sanitizer has been at it
# (JupyterLab for an untrusted notebook, GitHub): no <style> (dropped there),
# a few inline styles (JupyterLab keeps them) over plain tables, lists and <b>,
# which read well without them too. The flame graph is
# an <img> of an SVG data URI rather than inline <svg>: sanitizers keep <img>
# and drop <svg> (leaving its text behind), and an SVG image runs no script
# and loads nothing.
MUTED = 'style="opacity:0.75;margin:2px 0"'  # the theme's text colour, lighter: light and dark themes
STATIC_CLASS = "vramscope-static"
SEVERITY_COLOR = {"error": "#cf222e", "warning": "#9a6700"}  # inline: sanitizers keep style attributes


def static_class(key):
    """The class a widget's front end hides while a view of it is rendered (see static/dom.js)."""
    return "vs-static-" + key if key else ""


def data_uri(svg):
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode("utf-8")).decode("ascii")


def flame_image(tree, caption):
    """The flame graph as an <img> with a caption line, or a note saying why there is none."""
    try:
        d = _flamesvg.render(tree or {})
    except Exception as e:  # a bug here must not take the report with it
        return "<div %s>flame graph not drawn: %s</div>" % (MUTED, _e(e))
    if not d:
        return "<div %s>flame graph: %s</div>" % (MUTED, _e(d.reason))
    head = "Flame graph%s: %s in all" % ((" (" + caption + ")") if caption else "", fmt_bytes(d.total))
    left = []
    if d.hidden:
        n = fmt_count(d.hidden + d.frames)
        left.append("%s of %s frames too narrow to draw left out" % (fmt_count(d.hidden), n))
    if d.cut:
        left.append("stacks cut at %d levels" % _flamesvg.MAX_ROWS)
    alt = "flame graph of %s: %s in all, %s frames" % (d.title or "GPU memory", fmt_bytes(d.total), fmt_count(d.frames))
    return ('<div><b>%s</b></div><img class="vs-flame" src="%s" width="%d" alt="%s" '
            'style="display:block;max-width:100%%;height:auto;margin:4px 0">%s'
            % (_e(head), data_uri(d.svg), _flamesvg.WIDTH, _e(alt),
               "<div %s>%s</div>" % (MUTED, _e("; ".join(left))) if left else ""))


def page(view, key=""):
    """The static copy of a report view (the dict _magic builds): a text/html
    fragment without script or external URL. key: the widget's static_key,
    whose view hides this copy while it is rendered."""
    cls = (STATIC_CLASS + " " + static_class(key)).strip()
    parts = ['<div class="%s">' % cls, "<div><b>vramscope \u00b7 %s</b></div>" % _e(view.get("title") or "GPU memory")]
    if view.get("facts"):
        parts.append("<div %s>%s</div>" % (MUTED, " \u00b7 ".join(_e(f) for f in view["facts"])))
    if view.get("peak_line"):
        parts.append("<div><b>%s</b></div>" % _e(view["peak_line"]))
    if view.get("note"):
        parts.append("<div %s>%s</div>" % (MUTED, _e(view["note"])))
    if view.get("diff") is not None:
        parts.append(_table(DIFF_HEAD, diff_rows(view)))
    tree = view.get("tree")
    if tree:
        parts.append(flame_image(tree, _flame_caption(view, tree)))
    if view.get("top_lines"):
        parts.append("<div><b>Top lines at the peak</b></div>" + _table(TOP_HEAD, top_rows(view)))
    fs = view.get("findings")
    if fs:
        items = []
        for f in fs:
            where = (" \u2014 " + _e(f.get("where"))) if f.get("where") else ""
            fix = ("<br>fix: " + _e(f["fix"])) if f.get("fix") else ""
            sev = str(f.get("severity") or "info")
            items.append('<li><b style="color:%s">%s</b> %s%s%s%s</li>' % (SEVERITY_COLOR.get(sev, "inherit"), _e(sev),
                                                                          _e(f.get("title") or ""), where, fix,
                                                                          _plans(f.get("plans"))))
        parts.append('<div><b>Findings</b></div><ul style="margin:2px 0">%s</ul>' % "".join(items))
    elif fs is not None:
        parts.append("<div %s>Findings: none</div>" % MUTED)
    parts.append("</div>")
    return "".join(parts)


def _plans(plans):
    """The plans that fit beside an out-of-memory finding: each with its predicted reserved peak and cost."""
    if not plans:
        return ""
    rows = "".join("<li>%s: %s reserved <span %s>(%s)</span></li>" % (_e(p["title"]), _e(fmt_bytes(p["peak_reserved"])),
                                                                       MUTED, _e(p["cost"])) for p in plans)
    return '<br>plans that fit (vramscope fit):<ul style="margin:2px 0">%s</ul>' % rows


def _flame_caption(view, tree):
    """What the graph weighs ("peak"), and which side of a diff it shows."""
    return ", ".join(x for x in (tree.get("weight") or view.get("weight"), view.get("side")) if x)


def plain(view, rows=10):
    """The text/plain view (terminals, and nbconvert's LaTeX/PDF, which takes
    no HTML): title, facts, the top lines and the findings."""
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
        out += ["    fits with %s (%s reserved)" % (p["title"], fmt_bytes(p["peak_reserved"])) for p in f.get("plans") or ()]
    return "\n".join(out)
