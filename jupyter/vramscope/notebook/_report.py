"""What the notebook shows, picked out of the engine's JSON: the facts line,
the top lines (with cell-relative names), the findings and a diff's rows.
Formatting only; every number comes from the Go engine (or from torch's own
counters, for the peak before a cell)."""
import os

UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def fmt_bytes(n):
    """Binary units, two decimals, as the engine's FormatBytes and flame.js's
    formatBytes: 1536 -> "1.50 KiB" (the shared cases:
    profiler/flame/testdata/format_vectors.json)."""
    n = int(n or 0)
    sign = "-" if n < 0 else ""
    v = float(abs(n))
    u = 0
    while v >= 1024 and u < len(UNITS) - 1:
        v /= 1024
        u += 1
    if u == 0:
        return "%s%d B" % (sign, round(v))
    if "%.2f" % v == "1024.00" and u < len(UNITS) - 1:
        v, u = 1.0, u + 1
    return "%s%.2f %s" % (sign, v, UNITS[u])


def fmt_delta(n):
    return ("+" if n > 0 else "") + fmt_bytes(n)


def fmt_count(n):
    """Thousands grouped with commas, as flame.js's formatCount: 1234567 -> "1,234,567"."""
    return "{:,}".format(int(n or 0))


def fmt_percent(part, whole):
    """part/whole as flame.js's formatPercent: "12.34%", a tiny non-zero share "<0.01%"."""
    if not (whole > 0):
        return "0.00%"
    p = (part / whole) * 100
    if 0 < p < 0.005:
        return "<0.01%"
    return "%.2f%%" % p


def fmt_share(x):
    x = float(x or 0) * 100
    if 0 < x < 0.05:
        return "<0.1%"
    return "%.1f%%" % x


def site_label(site, labeler):
    """The name of one site (analyze.Site): "cell [3], line 5 (train_step)" or
    "/path/file.py:69 (fn)" or a phase's own name."""
    f, line, fn = site.get("file") or "", site.get("line") or 0, site.get("function") or ""
    if not f:
        return fn  # a phase: the engine named its cells (--names)
    where = labeler.label(f, line) if labeler else ("%s:%d" % (f, line) if line else f)
    if fn and fn != "<module>":
        where += " (%s)" % fn
    return where


def top_lines(result, labeler, top=10):
    """The sites holding the most at the peak, as rows for the table."""
    rows = []
    for s in (result.get("sites") or [])[: max(0, int(top))]:
        f = s.get("file") or ""
        rows.append({
            "label": site_label(s, labeler),
            "cell": labeler.cell(f) if (labeler and f) else None,
            "file": f,
            "line": s.get("line") or 0,
            "function": s.get("function") or "",
            "kind": s.get("kind") or "",
            "peak_bytes": s.get("peak_bytes") or 0,
            "peak_share": s.get("peak_share") or 0,
            "alloc_bytes": s.get("alloc_bytes") or 0,
            "allocs": s.get("allocs") or 0,
            "max_alloc": s.get("max_alloc") or 0,
        })
    return rows


def findings(result, labeler):
    out = []
    for f in result.get("findings") or []:
        where = ""
        if f.get("file"):
            where = labeler.label(f["file"], f.get("line") or 0) if labeler else "%s:%s" % (f["file"], f.get("line"))
        out.append({
            "kind": f.get("kind") or "",
            "severity": f.get("severity") or "info",
            "title": f.get("title") or "",
            "where": where,
            "fix": f.get("fix") or "",
            # an out-of-memory error's plans that fit (vramscope fit), each with its predicted peak
            "plans": [{"title": p.get("title") or "", "peak_reserved": p.get("peak_reserved") or 0,
                       "cost": p.get("cost") or ""} for p in f.get("plans") or []],
        })
    return out


def peak_device(result):
    peak = result.get("peak") or {}
    for d in result.get("devices") or []:
        if d.get("device") == peak.get("device"):
            return d
    devs = result.get("devices") or []
    return devs[0] if devs else {}


def facts(result, name=None):
    """Short facts about a snapshot's analysis, one per string. name: what to
    call it (default: the file's name, with the file's size)."""
    out = []
    ev = int(result.get("events") or 0)
    events = "%s trace event%s" % (fmt_count(ev), "" if ev == 1 else "s")
    if name:
        out.append("%s: %s" % (name, events))
    else:
        name = os.path.basename(result.get("file") or "") or "snapshot"
        out.append("%s: %s, %s" % (name, events, fmt_bytes(result.get("file_bytes"))))
    peak = result.get("peak") or {}
    dev = peak_device(result)
    if peak.get("bytes"):
        s = "device %s: peak %s" % (peak.get("device", 0), fmt_bytes(peak["bytes"]))
        start, t = dev.get("start_us"), peak.get("time_us")
        if start and t:
            s += " at +%.3fs into the trace" % ((t - start) / 1e6)
        out.append(s)
    if dev.get("pre_trace_bytes"):
        out.append("%s allocated before the trace began" % fmt_bytes(dev["pre_trace_bytes"]))
    at = result.get("attribution") or {}
    if at.get("peak_bytes"):
        s = "%.1f%% of the peak named (user lines, phases, tensors)" % (100 * float(at.get("attributed_share") or 0))
        if at.get("unknown_bytes"):
            s += "; %s from before recording not named" % fmt_bytes(at["unknown_bytes"])
        out.append(s)
    out.extend(named_tensors(result))
    al = dev.get("allocator") or {}
    if al.get("reserved"):
        s = "allocator: %s reserved in %s segments, %s allocated, fragmentation %d%%" % (
            fmt_bytes(al["reserved"]), fmt_count(al.get("segments")), fmt_bytes(al.get("allocated")),
            round(100 * float(al.get("fragmentation") or 0)))
        if al.get("external_free"):
            # What the figure measures and when it matters, where it is printed.
            s += (" (the largest free block, %s, is the biggest request served without a new segment; "
                  "it matters only near the device's or the cap's limit)" % fmt_bytes(al.get("largest_free_block")))
        out.append(s)
    return out


def named_tensors(result, top=3):
    """What the agent named among the memory alive at the snapshot (at an OOM:
    what filled the device), as fact lines; none without names."""
    t = result.get("named_tensors")
    if not t or not t.get("live_bytes"):
        return []
    out = ["%.1f%% of the %s alive named (tensor walk: %d names in %.0f ms%s)" % (
        100 * float(t.get("named_share") or 0), fmt_bytes(t["live_bytes"]), int(t.get("entries") or 0),
        float(t.get("walk_ms") or 0), ", stopped early" if t.get("truncated") else "")]
    for g in (t.get("groups") or [])[:top]:
        out.append("%s %s: %s (%d)" % (fmt_bytes(g.get("bytes")), (g.get("kind") or "").replace("_", " "),
                                       g.get("name") or "", int(g.get("tensors") or 0)))
    return out


def diff_rows(d, labeler, top=20):
    rows = []
    for s in (d.get("sites") or [])[: max(0, int(top))]:
        rows.append({
            "label": site_label(s, labeler),
            "status": _status_label(s),
            "peak_before": s.get("peak_before") or 0,
            "peak_after": s.get("peak_after") or 0,
            "peak_delta": s.get("peak_delta") or 0,
            "alloc_delta": s.get("alloc_delta") or 0,
            "allocs_delta": s.get("allocs_delta") or 0,
        })
    return rows


def _status_label(s):
    """"new", "gone", or for a changed site the measures that changed ("peak, allocated")."""
    status = s.get("status") or ""
    if status == "changed" and s.get("changed"):
        return ", ".join(s["changed"])
    return status


def diff_facts(d):
    a = os.path.basename(d.get("before") or "A")
    b = os.path.basename(d.get("after") or "B")
    sites = d.get("sites") or []
    new = sum(1 for s in sites if s.get("status") == "new")
    gone = sum(1 for s in sites if s.get("status") == "gone")
    same = sum(1 for s in sites if s.get("status") == "same")
    return ["%s \u2192 %s" % (a, b),
            "peak %s \u2192 %s (%s)" % (fmt_bytes(d.get("peak_before")), fmt_bytes(d.get("peak_after")),
                                       fmt_delta(d.get("peak_delta") or 0)),
            "%d new sites, %d gone, %d changed" % (new, gone, len(sites) - new - gone - same)]
