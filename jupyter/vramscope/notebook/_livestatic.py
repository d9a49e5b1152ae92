"""The static copy of `%vramscope live` (see _widget's module doc): its last
state as text/html (the latest counters and the chart of the kept samples as
an SVG image, drawn here; no script) and text/plain. The widget rewrites it
every few seconds while it samples and when it stops, so an exported notebook
shows where the counters ended."""
import math
import time

from ._flamesvg import xml_text
from ._html import MUTED, STATIC_CLASS, _e, data_uri, static_class
from ._report import fmt_bytes, fmt_count

# As static/live.js draws them.
SERIES = (("used", "GPU memory used", "#0969da", "bytes"), ("reserved", "torch reserved", "#bf8700", "bytes"),
          ("allocated", "torch allocated", "#1a7f37", "bytes"), ("util", "GPU utilisation", "#cf222e", "pct"))
WIDTH, HEIGHT = 1000, 220
PAD_L, PAD_R, PAD_T, PAD_B = 8, 8, 16, 14


def _num(p, key):
    """A sample's value as a float, or None (absent, not a number, not finite)."""
    v = p.get(key) if isinstance(p, dict) else None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def _points(samples):
    """The samples that have a time, in order."""
    return [p for p in samples or [] if _num(p, "t") is not None]


def latest(samples, key):
    for p in reversed(samples):
        v = _num(p, key)
        if v is not None:
            return v
    return None


def _fmt(v, axis):
    return "%d%%" % round(v) if axis == "pct" else fmt_bytes(v)


def chart(samples, total=0):
    """The chart of live.js as an SVG document: bytes on the left scale (up to
    the GPU's total when known), utilisation in percent on the right."""
    t1 = _num(samples[-1], "t")
    t0 = min(_num(samples[0], "t"), t1 - 60000)
    top = max([float(total or 0)] + [v for p in samples for v in (_num(p, k) for k in ("used", "reserved", "allocated"))
                                     if v is not None]) or 1.0
    span = max(1.0, t1 - t0)

    def x(t):
        return PAD_L + (t - t0) / span * (WIDTH - PAD_L - PAD_R)

    def y(v, axis):
        scale = 100.0 if axis == "pct" else top
        return HEIGHT - PAD_B - min(max(v / scale, 0.0), 1.0) * (HEIGHT - PAD_T - PAD_B)

    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d">'
             % (WIDTH, HEIGHT, WIDTH, HEIGHT),
             '<rect x="0.5" y="0.5" width="%d" height="%d" fill="none" stroke="#d1d9e0"/>' % (WIDTH - 1, HEIGHT - 1),
             '<g font-family="system-ui, sans-serif" font-size="11" fill="#59636e">'
             '<text x="%d" y="11">%s</text><text x="%d" y="11" text-anchor="end">100%%</text>'
             '<text x="%d" y="%d">%s s</text></g>' % (PAD_L, xml_text(fmt_bytes(top)), WIDTH - PAD_R, PAD_L, HEIGHT - 2,
                                                    round((t1 - t0) / 1000))]
    for key, label, color, axis in SERIES:
        runs, run = [], []
        for p in samples:
            v = _num(p, key)
            if v is None:  # a gap: the line breaks, as in live.js
                if run:
                    runs.append(run)
                run = []
                continue
            run.append("%.1f,%.1f" % (x(_num(p, "t")), y(v, axis)))
        if run:
            runs.append(run)
        for r in runs:
            if len(r) == 1:
                cx, cy = r[0].split(",")
                parts.append('<circle cx="%s" cy="%s" r="2" fill="%s"><title>%s</title></circle>'
                             % (cx, cy, color, xml_text(label)))
            else:
                parts.append('<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"><title>%s</title>'
                             '</polyline>' % (color, " ".join(r), xml_text(label)))
    parts.append("</svg>")
    return "".join(parts)


def status(state):
    """"stopped · 42 samples over 41 s, the last at 12:00:01 UTC" and the like."""
    samples = _points(state.get("samples"))
    run = "running" if state.get("running") else "stopped"
    if not samples:
        return "%s \u00b7 no samples yet" % run
    t0, t1 = _num(samples[0], "t"), _num(samples[-1], "t")
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t1 / 1000))
    return "%s \u00b7 %s sample%s over %d s, the last at %s" % (run, fmt_count(len(samples)),
                                                             "" if len(samples) == 1 else "s",
                                                             round((t1 - t0) / 1000), when)


def legend(samples):
    """[(label, value text, colour)] of the latest value of each series."""
    out = []
    for key, label, color, axis in SERIES:
        v = latest(samples, key)
        if v is not None:
            out.append((label, _fmt(v, axis), color))
    return out


def page(state, key=""):
    """The static copy of a live view: title, source, status, latest values, chart."""
    samples = _points(state.get("samples"))
    cls = (STATIC_CLASS + " " + static_class(key)).strip()
    parts = ['<div class="%s">' % cls, "<div><b>vramscope \u00b7 live</b></div>"]
    facts = [x for x in (state.get("source"), "device %s" % state.get("device", 0), status(state)) if x]
    parts.append("<div %s>%s</div>" % (MUTED, " \u00b7 ".join(_e(f) for f in facts)))
    if state.get("note"):
        parts.append("<div %s>%s</div>" % (MUTED, _e(state["note"])))
    if state.get("idle"):
        parts.append("<div %s>%s</div>" % (MUTED, _e(state["idle"])))
    if state.get("warning"):
        parts.append('<div class="vs-live-warning"><b>\u26a0 %s</b></div>' % _e(state["warning"]))
    items = legend(samples)
    if items:
        parts.append("<div>%s</div>" % " &nbsp; ".join(
            '<span style="color:%s">\u25a0</span> %s <b>%s</b>' % (c, _e(lab), _e(v)) for lab, v, c in items))
    if samples:
        parts.append('<img class="vs-live-chart" src="%s" width="%d" alt="%s" '
                     'style="display:block;max-width:100%%;height:auto">'
                     % (data_uri(chart(samples, state.get("total"))), WIDTH,
                        _e("GPU memory over time: " + ", ".join("%s %s" % (lab, v) for lab, v, _ in items))))
    parts.append("</div>")
    return "".join(parts)


def plain(state):
    samples = _points(state.get("samples"))
    out = ["vramscope \u00b7 live: %s" % (state.get("source") or "no source"), "  " + status(state)]
    if state.get("note"):
        out.append("  " + state["note"])
    if state.get("idle"):
        out.append("  " + state["idle"])
    if state.get("warning"):
        out.append("  warning: " + state["warning"])
    out += ["  %s: %s" % (lab, v) for lab, v, _ in legend(samples)]
    return "\n".join(out)
