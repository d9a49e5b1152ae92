"""The ranks of one job in the notebook (`%vramscope ranks`, `%vramscope snap
PID --job`): the engine's rank view (`vramscope ranks --json`, the same
analysis as the CLI's and the daemon's) as a static HTML table, then the
chosen rank's report (its flame graph, top lines and findings, as
`%vramscope open` shows a file)."""
import html
import os

from . import _engine, _report, _views, _widget

GROUP_PREFIX = "job-"


def is_group(words):
    return len(words) == 1 and words[0].startswith(GROUP_PREFIX) and not os.path.exists(words[0])


def socket_args(socket):
    return ["--socket", socket] if socket else []


def rank_view(sources, socket=None):
    """(the rank view, {rank: snapshot file}) of a stored group or of files."""
    if is_group(sources):
        rv = _engine.run_json(["ranks", sources[0], "--json"] + socket_args(socket))
        stored = _engine.run_json(["snapshots", "--json"] + socket_args(socket)).get("snapshots") or []
        paths = {s.get("id"): s.get("path") for s in stored}
        files = {r["rank"]: paths.get(r["source"]) for r in rv.get("ranks") or []}
    else:
        rv = _engine.run_json(["ranks", "--json"] + list(sources))
        files = {r["rank"]: r["source"] for r in rv.get("ranks") or []}
    return rv, files


def take_job(pid, socket=None, label=None):
    """Asks the daemon for every rank of pid's launch: the group (GroupResult)."""
    args = ["snap", str(int(pid)), "--job", "--json"] + socket_args(socket)
    if label:
        args += ["--label", label]
    return _engine.run_json(args, timeout=300)


def pick(rv, rank):
    """The rank to show: the one asked for, else the heaviest (the one that runs out first)."""
    ranks = [r["rank"] for r in rv.get("ranks") or []]
    if rank is None:
        return rv.get("max_rank", ranks[0] if ranks else None)
    if rank not in ranks:
        raise _engine.EngineError("no rank %d here (ranks %s)" % (rank, ", ".join(map(str, ranks))))
    return rank


def _cell(text, right=False):
    style = ' style="text-align:right;padding:0 8px"' if right else ' style="padding:0 8px"'
    return "<td%s>%s</td>" % (style, html.escape(str(text)))


def _line(site):
    if not site:
        return "-"
    where = site.get("function") or ""
    if site.get("file"):
        where = "%s:%d (%s)" % (os.path.basename(site["file"]), site.get("line") or 0, where)
    return where


def table_html(rv, shown=None):
    """The rank table and each outlier's lines against the median rank, as
    static HTML (no script: it survives export as it is)."""
    b = _report.fmt_bytes
    out = ["<div><b>%d ranks</b>: median rank %s (peak %s), imbalance %.2f (max/median peak, rank %s)" % (
        len(rv.get("ranks") or []), rv.get("median_rank"), html.escape(b(rv.get("median_peak_bytes") or 0)),
        rv.get("imbalance") or 0, rv.get("max_rank"))]
    out.append("<table><tr>" + "".join("<th>%s</th>" % h for h in (
        "rank", "GPU", "peak", "reserved", "non-PyTorch", "\u00d7 median", "top line", "")) + "</tr>")
    for r in rv.get("ranks") or []:
        gpu = r["device"] if r.get("device_by_nvml") else "cuda:%d" % r["device"]
        top = (r.get("top_lines") or [None])[0]
        mark = ("outlier" if r.get("outlier") else "") + (" \u25c0 shown" if r["rank"] == shown else "")
        out.append("<tr>" + _cell(r["rank"], True) + _cell(gpu, True) + _cell(b(r["peak_bytes"]), True)
                   + _cell(b(r["reserved_bytes"]), True)
                   + _cell(b(r["non_pytorch_bytes"]) if r.get("gpu_bytes") else "-", True)
                   + _cell("%.2f" % r["peak_vs_median"], True)
                   + _cell("%s %s" % (b(top["peak_bytes"]), _line(top)) if top else "-") + _cell(mark) + "</tr>")
    out.append("</table>")
    for o in rv.get("outliers") or []:
        out.append("<div>rank %d against the median rank %s: peak %s</div><table>" % (
            o["rank"], rv.get("median_rank"), html.escape(_report.fmt_delta(o["peak_delta"]))))
        for ln in o.get("lines") or []:
            out.append("<tr>" + _cell(_report.fmt_delta(ln["peak_delta"]), True) + _cell(_line(ln)) + "</tr>")
        out.append("</table>")
    out.append("</div>")
    return "\n".join(out)


def show(rv, files, rank, weight="peak", top=10):
    """The outputs: the table (HTML), then the chosen rank's report."""
    from IPython.display import HTML

    shown = pick(rv, rank)
    path = files.get(shown)
    if not path or not os.path.isfile(path):
        raise _engine.EngineError("rank %s's snapshot is not readable here (%s)" % (shown, path))
    view, labeler = _views.snapshot_view(path, weight, top, title="rank %d \u00b7 %s" % (shown, os.path.basename(path)))
    view.pop("result", None)
    return [HTML(table_html(rv, shown)), _widget.report(view, files={"": path}, labeler=labeler)]
