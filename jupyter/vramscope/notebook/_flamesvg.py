"""A flame graph as a standalone SVG document, drawn in the kernel: the static
copy of a report (nbconvert, "Export as HTML", static viewers) shows it where
no script runs.

It draws the same JSON tree as flame.js (profiler/flame: Tree{title, weight,
unit, root}, nodes {n, f, l, t, v, c}) with the same layout (root on top,
children left to right in the tree's order, width proportional to bytes) and
the same light-theme colours (the node's kind, decided by the engine, times a
shade hashed from the name), so the picture matches the interactive widget. Each frame carries a
<title> (name, place, bytes), which a browser shows as a tooltip when the
image is opened on its own.

Bad input never raises: a frame without a usable value draws as nothing, a
tree without a root gives None and a reason (render() returns a Drawing).
"""
import colorsys
import math
import re
from xml.sax.saxutils import escape

from ._report import fmt_bytes, fmt_percent

WIDTH = 1000  # px, about a notebook column; a narrower page scales it down
ROW = 19  # px per stack level (flame.js: round(12px * 1.55))
FONT = 12  # px, monospace
CHAR = 0.602 * FONT  # advance of DejaVu Sans Mono / Menlo at FONT px
MIN_PX = 1.0  # narrower frames (and their subtrees) are left out
MAX_FRAMES = 3000  # above this, the narrowest frames go (the image stays a few hundred KB at most)
MAX_ROWS = 120  # deeper levels are cut (real Python stacks are tens deep; recursion can be thousands)
SHADES = 12
FONT_FAMILY = "DejaVu Sans Mono, Menlo, Consolas, monospace"

# flame.js's light theme: [hue, saturation, lightness] per kind, text colour.
BASES = {"user": (28, 92, 62), "library": (212, 16, 84), "synthetic": (0, 0, 91)}
TEXT = "#1b1b1b"


class Drawing:
    """The result of render(): svg (the document, or None), and what it left out."""

    def __init__(self, svg=None, reason="", frames=0, total=0, hidden=0, cut=False, title=""):
        self.svg = svg
        self.reason = reason  # why there is no picture
        self.frames = frames  # frames drawn
        self.total = total  # the root's bytes
        self.hidden = hidden  # frames of the tree not drawn (too narrow, too deep, past MAX_FRAMES)
        self.cut = cut  # levels below MAX_ROWS were not drawn
        self.title = title

    def __bool__(self):
        return self.svg is not None


def kind(node):
    """The kind the engine put on a node ("t": profiler.KindOfFile), which
    flame.js draws too; a node that says none is a library's."""
    k = node.get("t")
    return k if isinstance(k, str) and k in BASES else "library"


def fnv1a(s):
    """flame.js's hashString: FNV-1a over UTF-16 code units, so a name keeps its shade."""
    h = 0x811C9DC5
    b = s.encode("utf-16-le", "surrogatepass")
    for i in range(0, len(b), 2):
        h ^= b[i] | (b[i + 1] << 8)
        h = (h * 0x01000193) & 0xFFFFFFFF
    return h


def shade_palette(hsl, n=SHADES):
    """flame.js's shadePalette as hex colours (SVG renderers outside browsers may not read hsl())."""
    out = []
    spread = 26 if hsl[1] > 5 else 0
    for j in range(n):
        t = j / (n - 1) - 0.5 if n > 1 else 0
        u = ((j * 5) % n) / (n - 1) - 0.5 if n > 1 else 0
        h = round((hsl[0] + t * spread + 360) % 360, 1)
        light = round(max(8, min(92, hsl[2] + u * 10)), 1)
        r, g, b = colorsys.hls_to_rgb(h / 360, light / 100, round(hsl[1], 1) / 100)
        out.append("#%02x%02x%02x" % (round(r * 255), round(g * 255), round(b * 255)))
    return out


PALETTE = {k: shade_palette(v) for k, v in BASES.items()}


def _value(node):
    try:
        v = float(node.get("v") or 0)
    except (TypeError, ValueError, AttributeError):
        return 0.0
    return v if v > 0 and math.isfinite(v) else 0.0


def layout(root, width=WIDTH, min_px=MIN_PX, max_rows=MAX_ROWS):
    """flame.js's layout without zoom: [(node, depth, x, w, is_root)] in preorder,
    frames narrower than min_px left out with their subtrees, levels from
    max_rows on cut. Also returns whether levels were cut."""
    total = _value(root)
    scale = width / total if total > 0 else 0.0
    out, cut = [], False
    stack = [(root, 0, 0.0)]  # explicit: stacks can be thousands deep
    while stack:
        node, depth, x = stack.pop()
        out.append((node, depth, x, _value(node) * scale, depth == 0))
        kids = _children(node)
        if kids and depth + 1 >= max_rows:
            cut = True
            continue
        placed, cx = [], x
        for c in kids:
            cw = _value(c) * scale
            if cw >= min_px:
                placed.append((c, depth + 1, cx))
            cx += cw
        stack.extend(reversed(placed))
    return out, cut


def _children(node):
    c = node.get("c")
    return [x for x in c if isinstance(x, dict)] if isinstance(c, list) else []


def count(root):
    """The frames of a tree (walked without recursion)."""
    n, stack = 0, [root]
    while stack:
        node = stack.pop()
        n += 1
        stack.extend(_children(node))
    return n


_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(s):
    """s as XML character data: escaped, and without the characters XML 1.0
    forbids (one control character in a frame name must not break the image)."""
    return escape(_NOT_XML.sub("\ufffd", str(s)))


def _fit(text, avail):
    """flame.js's fitLabel with a fixed character width (the font is monospace)."""
    if len(text) * CHAR <= avail:
        return text
    k = int((avail - CHAR) // CHAR)
    return text[:k] + "\u2026" if k >= 2 else ""


def _place(node):
    f, line = node.get("f") or "", node.get("l") or 0
    return ("%s:%s" % (f, line) if line else f) if f else ""


def render(tree, width=WIDTH):
    """The SVG of a flame tree (a Drawing; falsy with a reason when there is nothing to draw)."""
    root = tree.get("root") if isinstance(tree, dict) else None
    if not isinstance(root, dict):
        return Drawing(reason="the flame tree has no root")
    total = _value(root)
    if total <= 0:
        return Drawing(reason="no memory recorded in this profile", title=str(tree.get("title") or ""))
    frames, cut = layout(root, width)
    if len(frames) > MAX_FRAMES:
        # Keep the widest (a parent is never narrower than its children, so
        # every kept frame keeps its parent): they are what a reader can see.
        keep = sorted(range(len(frames)), key=lambda i: -frames[i][3])[:MAX_FRAMES]
        frames = [frames[i] for i in sorted(keep)]
    depth = max(f[1] for f in frames) + 1
    rects, labels = {}, []
    for node, d, x, w, is_root in frames:
        name = str(node.get("n") or "")
        shown = str(node.get("d") or name)  # flame.js's frameLabel: the engine's label for people
        k = "synthetic" if is_root else kind(node)
        fill = PALETTE[k][fnv1a(name) % SHADES]
        tip = "%s \u2014 %s (%s)" % (shown, fmt_bytes(_value(node)), fmt_percent(_value(node), total))
        if _place(node):
            tip += " \u2014 " + _place(node)
        rects.setdefault(fill, []).append('<rect x="%.1f" y="%d" width="%.1f" height="%d"><title>%s</title></rect>'
                                          % (x, d * ROW, max(w, 0.5), ROW - 1, xml_text(tip)))
        text = shown + (" \u00b7 " + fmt_bytes(total) if is_root else "")
        label = _fit(text, w - 8) if w >= 3 * CHAR + 8 else ""
        if label:
            labels.append('<text x="%.1f" y="%.1f">%s</text>' % (x + 4, d * ROW + (ROW - 1) / 2, xml_text(label)))
    height = depth * ROW
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
             'data-total="%d" data-frames="%d">' % (width, height, width, height, total, len(frames)),
             "<title>%s</title>" % xml_text("flame graph: %s, %s total" % (tree.get("title") or "GPU memory",
                                                                           fmt_bytes(total)))]
    for fill, rs in rects.items():
        parts.append('<g fill="%s">%s</g>' % (fill, "".join(rs)))
    parts.append('<g font-family="%s" font-size="%d" fill="%s" dominant-baseline="central">%s</g>'
                 % (FONT_FAMILY, FONT, TEXT, "".join(labels)))
    parts.append("</svg>")
    return Drawing("".join(parts), frames=len(frames), total=total, hidden=count(root) - len(frames), cut=cut,
                   title=str(tree.get("title") or ""))
