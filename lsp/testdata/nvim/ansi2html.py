"""Turns a terminal capture with SGR colour codes (tmux capture-pane -e) into HTML (screenshot.sh)."""
import html
import re
import sys

BASE = ["#000000", "#cd0000", "#00cd00", "#cdcd00", "#0000ee", "#cd00cd", "#00cdcd", "#e5e5e5",
        "#7f7f7f", "#ff0000", "#00ff00", "#ffff00", "#5c5cff", "#ff00ff", "#00ffff", "#ffffff"]


def color256(n):
    if n < 16:
        return BASE[n]
    if n < 232:
        n -= 16
        steps = [0, 95, 135, 175, 215, 255]
        return "#%02x%02x%02x" % (steps[n // 36], steps[n // 6 % 6], steps[n % 6])
    v = 8 + 10 * (n - 232)
    return "#%02x%02x%02x" % (v, v, v)


def sgr(params, st):
    codes = [int(p) if p else 0 for p in params.split(";")] or [0]
    i = 0
    while i < len(codes):
        c = codes[i]
        if c == 0:
            st.clear()
        elif c == 1:
            st["bold"] = True
        elif c == 3:
            st["italic"] = True
        elif c in (4, 21):
            st["underline"] = True
        elif c in (38, 48) and i + 1 < len(codes):
            key = "fg" if c == 38 else "bg"
            if codes[i + 1] == 5 and i + 2 < len(codes):
                st[key] = color256(codes[i + 2])
                i += 2
            elif codes[i + 1] == 2 and i + 4 < len(codes):
                st[key] = "#%02x%02x%02x" % tuple(codes[i + 2:i + 5])
                i += 4
        elif 30 <= c <= 37 or 90 <= c <= 97:
            st["fg"] = BASE[c - 30 if c < 90 else c - 82]
        elif 40 <= c <= 47 or 100 <= c <= 107:
            st["bg"] = BASE[c - 40 if c < 100 else c - 92]
        elif c == 39:
            st.pop("fg", None)
        elif c == 49:
            st.pop("bg", None)
        i += 1


def style(st):
    parts = []
    if "fg" in st:
        parts.append("color:" + st["fg"])
    if "bg" in st:
        parts.append("background:" + st["bg"])
    if st.get("bold"):
        parts.append("font-weight:bold")
    if st.get("italic"):
        parts.append("font-style:italic")
    if st.get("underline"):
        parts.append("text-decoration:underline")
    return ";".join(parts)


def main():
    out, st = [], {}
    for token in re.split(r"(\x1b\[[0-9;]*m)", sys.stdin.read()):
        m = re.fullmatch(r"\x1b\[([0-9;]*)m", token)
        if m:
            sgr(m.group(1), st)
        elif token:
            out.append('<span style="%s">%s</span>' % (style(st), html.escape(token)))
    print('<!doctype html><meta charset="utf-8"><body style="margin:0;background:#0e1116;color:#e6e6e6">'
          '<pre style="font:14px/1.25 DejaVu Sans Mono,monospace;margin:8px">' + "".join(out) + "</pre>")


main()
