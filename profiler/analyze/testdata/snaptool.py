"""Independent reference for vramscope's analysis tests (standard library only).

  snaptool.py facts FILE...         one JSON object per line: what a plain replay of
                                    each snapshot says (peak, counts, allocator state)
  snaptool.py wrap FILE N OUT       OUT is FILE with the first N entries of every
                                    device trace dropped, as when the ring buffer wraps
  snaptool.py synth KIND OUT        a small synthetic snapshot (see SYNTH below)
  snaptool.py strip FILE OUT        OUT is FILE without its annotations (as recorded
                                    without global_record_annotations)
  snaptool.py expandable FILE OUT   OUT is FILE with allocator_settings saying
                                    expandable_segments:True (the trace is unchanged)
  snaptool.py cut FILE T OUT        OUT is FILE as if dumped at time T (microseconds): the
                                    trace and annotations up to T, the segments' blocks as
                                    they were then (segments themselves are kept as they are)
  snaptool.py release FILE F:L OUT  OUT is FILE with every block alive at the end that was
                                    allocated at source line F:L (file base name) freed after
                                    its last entry, as if the program had cleared that list

The replay is deliberately naive and written from PyTorch's documented format,
not from vramscope's code: allocated bytes go up by an `alloc` entry's block
size and down by a `free_completed` entry's block size (trace entries record the
bytes requested; the allocator hands out blocks of at least 512 bytes, in
multiples of 512, and "allocated" counts blocks); blocks active in `segments` that the
trace never allocated (or whose allocation it no longer holds) were there before
the trace, as were blocks the trace frees without having allocated them.
"""
import json
import os
import pickle
import sys


def block_size(requested):
    return max(512, -(-requested // 512) * 512)


def replay(trace):
    live = {}  # addr -> (size, seq)
    cur = peak = 0
    peak_seq, peak_t = -1, None
    pre_freed = 0
    pre_frees = []  # (seq, size, free-stack user frame)
    allocs = alloc_bytes = 0
    # The levels (relative to the unknown start) after every event.
    for i, e in enumerate(trace):
        a = e["action"]
        size = block_size(e["size"])
        if a == "alloc":
            allocs += 1
            alloc_bytes += size
            if e["addr"] in live:
                cur -= live[e["addr"]][0]
            live[e["addr"]] = (size, i)
            cur += size
        elif a == "free_completed":
            if e["addr"] in live:
                cur -= live.pop(e["addr"])[0]
            else:
                pre_freed += size
                cur -= size
                pre_frees.append((i, size))
        if cur > peak:
            peak, peak_seq, peak_t = cur, i, e["time_us"]
    return dict(live=live, cur=cur, peak=peak, peak_seq=peak_seq, peak_t=peak_t, pre_freed=pre_freed,
                pre_frees=pre_frees, allocs=allocs, alloc_bytes=alloc_bytes)


def is_user(fn):
    if "<ipython-input" in fn or "/ipykernel_" in fn:
        return True
    if not fn.endswith(".py") or fn.startswith("<"):
        return False
    return not any(s in fn for s in ("site-packages/", "dist-packages/", "/lib/python", "/torch/"))


def user_frame(frames):
    for f in frames or []:
        if is_user(f["filename"]):
            return {"file": f["filename"], "line": f["line"], "function": f["name"]}
    return None


def device_facts(snap, dev, trace):
    segs = [s for s in snap.get("segments", []) if s.get("device", 0) == dev]
    r = replay(trace)
    live = r["live"]
    pre_live = pre_live_noframes = 0
    active = active_count = 0
    for s in segs:
        for b in s["blocks"]:
            if b["state"] == "inactive":
                continue
            active += b["size"]
            active_count += 1
            if b["address"] not in live:
                pre_live += b["size"]
                if not b.get("frames"):
                    pre_live_noframes += b["size"]
    base = pre_live + r["pre_freed"]
    # Pre-trace blocks freed after the peak were live at it.
    pre_freed_after_peak = sum(size for seq, size in r["pre_frees"] if seq > r["peak_seq"])
    # Reserved over time: anchored at the end state, which the segments give.
    reserved_end = sum(s["total_size"] for s in segs)
    rcur = 0
    rlevels = []
    for e in trace:
        a = e["action"]
        if a in ("segment_alloc", "segment_map"):
            rcur += e["size"]
        elif a in ("segment_free", "segment_unmap"):
            rcur -= e["size"]
        rlevels.append(rcur)
    rbase = reserved_end - rcur
    max_reserved = rbase + max([0] + rlevels)
    ooms = []
    for e in trace:
        if e["action"] == "oom":
            ooms.append({"size": e["size"], "device_free": e.get("device_free"),
                         "user": user_frame(e.get("frames")), "time_us": e["time_us"]})
    free_sizes, largest_free = 0, 0
    for s in segs:
        for b in s["blocks"]:
            if b["state"] == "inactive":
                free_sizes += b["size"]
                largest_free = max(largest_free, b["size"])
    actions = {}
    for e in trace:
        actions[e["action"]] = actions.get(e["action"], 0) + 1
    return {
        "device": dev,
        "events": len(trace),
        "actions": actions,
        "peak": base + r["peak"],
        "peak_event": r["peak_seq"],
        "peak_time_us": r["peak_t"],
        "pre_trace_bytes": base,
        "pre_live": pre_live,
        "pre_live_noframes": pre_live_noframes,
        "pre_freed": r["pre_freed"],
        "pre_freed_after_peak": pre_freed_after_peak,
        "allocs": r["allocs"],
        "alloc_bytes": r["alloc_bytes"],
        "active_bytes": active,
        "active_blocks": active_count,
        "reserved": reserved_end,
        "max_reserved": max_reserved,
        "segments": len(segs),
        "expandable_segments": sum(1 for s in segs if s.get("is_expandable")),
        "private_pool_segments": sum(1 for s in segs if tuple(s.get("segment_pool_id", (0, 0))) != (0, 0)),
        "external_free": free_sizes,
        "largest_free_block": largest_free,
        "ooms": ooms,
        "first_time_us": trace[0]["time_us"] if trace else None,
        "last_time_us": trace[-1]["time_us"] if trace else None,
    }


def facts(path):
    with open(path, "rb") as f:
        snap = pickle.load(f)
    traces = snap.get("device_traces", [])
    devs = set(range(len(traces))) | {s.get("device", 0) for s in snap.get("segments", [])}
    anns = snap.get("external_annotations", [])
    out = {
        "file": path,
        "devices": [device_facts(snap, d, traces[d] if d < len(traces) else []) for d in sorted(devs)],
        "step_markers": sum(1 for a in anns if a["stage"] == "START" and a["name"].startswith("Optimizer.step#")),
        "annotations": len(anns),
        "expandable_setting": bool(snap.get("allocator_settings", {}).get("expandable_segments", False)),
    }
    out["events"] = sum(d["events"] for d in out["devices"])
    return out


def wrap(path, n, out):
    with open(path, "rb") as f:
        snap = pickle.load(f)
    snap["device_traces"] = [t[n:] for t in snap["device_traces"]]
    with open(out, "wb") as f:
        pickle.dump(snap, f, protocol=4)


def strip(path, out):
    with open(path, "rb") as f:
        snap = pickle.load(f)
    snap["external_annotations"] = []
    with open(out, "wb") as f:
        pickle.dump(snap, f, protocol=4)


def expandable(path, out):
    with open(path, "rb") as f:
        snap = pickle.load(f)
    snap["allocator_settings"]["expandable_segments"] = True
    snap["allocator_settings"]["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    with open(out, "wb") as f:
        pickle.dump(snap, f, protocol=4)


def live_at(trace, t, final):
    """The blocks alive at time t: address -> block dict. final is the
    snapshot's active blocks (address -> block), alive at the end."""
    allocs = {}  # addr -> the alloc entry of the block there, up to t
    after = set()  # addresses allocated after t and not freed since
    live = {}
    for e in trace:
        a = e["action"]
        if e["time_us"] <= t:
            if a == "alloc":
                allocs[e["addr"]] = e
            elif a == "free_completed":
                allocs.pop(e["addr"], None)
            continue
        if a == "alloc":
            after.add(e["addr"])
        elif a == "free_completed":
            if e["addr"] in after:
                after.discard(e["addr"])
                continue
            al = allocs.get(e["addr"], e)  # no alloc up to t: from before the trace
            live[e["addr"]] = {"address": e["addr"], "size": block_size(al["size"]), "requested_size": al["size"],
                               "state": "active_allocated", "frames": al.get("frames", [])}
    for addr, b in final.items():
        if addr not in after:
            live[addr] = b
    return live


def rebuild(seg, live):
    """seg's blocks: the live ones inside it, free space between them."""
    lo, hi = seg["address"], seg["address"] + seg["total_size"]
    blocks, at = [], lo
    for addr in sorted(a for a in live if lo <= a < hi):
        b = live[addr]
        if addr > at:
            blocks.append({"address": at, "size": addr - at, "requested_size": 0, "state": "inactive", "frames": []})
        blocks.append(b)
        at = addr + b["size"]
    if at < hi:
        blocks.append({"address": at, "size": hi - at, "requested_size": 0, "state": "inactive", "frames": []})
    seg = dict(seg, blocks=blocks)
    active = [b for b in blocks if b["state"] != "inactive"]
    seg["allocated_size"] = seg["active_size"] = sum(b["size"] for b in active)
    seg["requested_size"] = sum(b["requested_size"] for b in active)
    return seg


def cut(path, t, out):
    with open(path, "rb") as f:
        snap = pickle.load(f)
    segs = []
    for dev, trace in enumerate(snap["device_traces"]):
        final = {b["address"]: b for s in snap["segments"] if s["device"] == dev for b in s["blocks"]
                 if b["state"] != "inactive"}
        live = live_at(trace, t, final)
        segs += [rebuild(s, live) for s in snap["segments"] if s["device"] == dev]
    snap["segments"] = segs
    snap["device_traces"] = [[e for e in tr if e["time_us"] <= t] for tr in snap["device_traces"]]
    snap["external_annotations"] = [a for a in snap.get("external_annotations", []) if a.get("time_us", 0) <= t]
    with open(out, "wb") as f:
        pickle.dump(snap, f, protocol=4)


def release(path, place, out):
    base, line = place.rsplit(":", 1)
    with open(path, "rb") as f:
        snap = pickle.load(f)
    for dev, trace in enumerate(snap["device_traces"]):
        allocs = {}
        for e in trace:
            if e["action"] == "alloc":
                allocs[e["addr"]] = e
            elif e["action"] == "free_completed":
                allocs.pop(e["addr"], None)
        t = trace[-1]["time_us"] if trace else 0
        freed = set()
        for addr, e in sorted(allocs.items(), key=lambda kv: kv[1]["time_us"]):
            if any(os.path.basename(fr["filename"]) == base and fr["line"] == int(line) for fr in e.get("frames", [])):
                t += 1
                for action in ("free_requested", "free_completed"):
                    trace.append(dict(e, action=action, time_us=t, frames=[]))
                freed.add(addr)
        for i, s in enumerate(snap["segments"]):
            if s["device"] == dev and any(b["address"] in freed for b in s["blocks"]):
                live = {b["address"]: b for b in s["blocks"] if b["state"] != "inactive" and b["address"] not in freed}
                snap["segments"][i] = rebuild(s, live)
    with open(out, "wb") as f:
        pickle.dump(snap, f, protocol=4)


# --- synthetic snapshots -------------------------------------------------------

USER = "/workspace/proj/train.py"
LIB = "/usr/local/lib/python3.12/site-packages/torch/nn/modules/linear.py"


def frames(*places):
    """Innermost first, as PyTorch records them."""
    return [{"filename": f, "line": l, "name": n} for f, l, n in places]


def entry(action, addr, size, t, fr=(), **kw):
    e = {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t, "frames": list(fr),
         "compile_context": "N/A", "user_metadata": ""}
    e.update(kw)
    return e


def segment(dev, addr, total, blocks, pool=(0, 0), expandable=False):
    return {"device": dev, "address": addr, "total_size": total,
            "allocated_size": sum(b["size"] for b in blocks if b["state"] != "inactive"),
            "active_size": sum(b["size"] for b in blocks if b["state"] != "inactive"),
            "requested_size": sum(b["requested_size"] for b in blocks if b["state"] != "inactive"),
            "stream": 0, "segment_type": "large", "segment_pool_id": pool, "is_expandable": expandable,
            "frames": [], "blocks": blocks}


def block(addr, size, state, fr=()):
    return {"address": addr, "size": size, "requested_size": size, "state": state, "frames": list(fr)}


def settings(expandable=False):
    return {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1, "expandable_segments": expandable}


def synth_two_devices():
    """Device 0 has segments but an empty trace; device 1 does the work."""
    fw = frames((LIB, 134, "forward"), (USER, 20, "step"), (USER, 40, "main"))
    bw = frames()
    opt = frames((USER, 22, "step"), (USER, 40, "main"))
    M = 1 << 20
    t1 = [
        entry("segment_alloc", 0x10000000, 64 * M, 1000, fw),
        entry("alloc", 0x10000000, 8 * M, 1001, fw),
        entry("alloc", 0x10800000, 16 * M, 1002, fw),
        entry("alloc", 0x11800000, 4 * M, 1003, bw),  # backward, frameless
        entry("free_completed", 0x10800000, 16 * M, 1004, bw),
        entry("alloc", 0x11C00000, 2 * M, 1005, opt),
        entry("free_completed", 0x11800000, 4 * M, 1006, bw),
    ]
    segs = [
        segment(0, 0x20000000, 32 * M, [block(0x20000000, 12 * M, "active_allocated", opt),
                                         block(0x20C00000, 20 * M, "inactive")]),
        segment(1, 0x10000000, 64 * M, [block(0x10000000, 8 * M, "active_allocated", fw),
                                         block(0x10800000, 16 * M, "inactive"),
                                         block(0x11800000, 4 * M, "inactive"),
                                         block(0x11C00000, 2 * M, "active_allocated", opt),
                                         block(0x11E00000, 34 * M, "inactive")]),
    ]
    anns = [{"name": "Optimizer.step#SGD.step", "stage": "START", "device": 1, "time_us": 1005},
            {"name": "Optimizer.step#SGD.step", "stage": "END", "device": 1, "time_us": 1006}]
    return {"segments": segs, "device_traces": [[], t1], "allocator_settings": settings(),
            "external_annotations": anns}


def synth_address_reuse():
    """An alloc over an address the trace still holds (its free was not recorded)."""
    fw = frames((USER, 10, "main"))
    M = 1 << 20
    t = [
        entry("alloc", 0x1000, 8 * M, 10, fw),
        entry("alloc", 0x1000, 2 * M, 11, fw),
    ]
    segs = [segment(0, 0x1000, 16 * M, [block(0x1000, 2 * M, "active_allocated", fw),
                                         block(0x1000 + 2 * M, 14 * M, "inactive")])]
    return {"segments": segs, "device_traces": [t], "allocator_settings": settings(),
            "external_annotations": []}


def synth_long():
    """100k events over a long time span: the timeline must stay bounded and keep the peak."""
    fw = frames((USER, 10, "main"))
    t, events = 0, []
    K = 1 << 10
    G = 1 << 30
    events.append(entry("segment_alloc", 0x7F0000000000, G, t, fw))
    for i in range(50000):
        t += 7 + (i % 13)
        size = (1 + (i * 7919) % 97) * K
        if i == 31337:
            size = 512 * K * K  # one spike, far above the rest
        events.append(entry("alloc", 0x100000 + i * 4096, size, t, fw))
        t += 3
        events.append(entry("free_completed", 0x100000 + i * 4096, size, t, fw))
    segs = [segment(0, 0x7F0000000000, G, [block(0x7F0000000000, G, "inactive")])]
    return {"segments": segs, "device_traces": [events], "allocator_settings": settings(),
            "external_annotations": []}


def synth_hours():
    """A training run recorded over 3 hours (beyond the 71 minutes uint32 microseconds hold): 12
    steps 15 minutes apart, each a forward activation, a frameless gradient, an optimizer step; the
    activations grow by 1 MiB a step, so each step's peak is known."""
    fw = frames((LIB, 134, "forward"), (USER, 20, "step"), (USER, 40, "main"))
    opt = frames((USER, 22, "step"), (USER, 40, "main"))
    M = 1 << 20
    events, anns, t = [entry("segment_alloc", 0x10000000, 256 * M, 0, fw)], [], 0
    for k in range(12):
        t = k * 900_000_000 + 1000
        act = (16 + k) * M
        events += [entry("alloc", 0x10000000, act, t, fw),
                   entry("alloc", 0x12000000, 8 * M, t + 10),  # backward, frameless
                   entry("free_completed", 0x10000000, act, t + 20, fw),
                   entry("free_completed", 0x12000000, 8 * M, t + 40, opt)]
        anns += [{"name": "Optimizer.step#SGD.step", "stage": "START", "device": 0, "time_us": t + 30},
                 {"name": "Optimizer.step#SGD.step", "stage": "END", "device": 0, "time_us": t + 50}]
    segs = [segment(0, 0x10000000, 256 * M, [block(0x10000000, 256 * M, "inactive")])]
    return {"segments": segs, "device_traces": [events], "allocator_settings": settings(),
            "external_annotations": anns}



def synth_kv_oom():
    """An OOM in batch generation captured between sampled windows (the trace holds only the failure),
    named by the agent: 32 MiB of weights, a KV cache of 2 layers' keys and values [8, 4, 100, 64] in
    fp16 (2 KiB a token), 1 MiB of logits; the request (a layer's keys grown to 101 tokens) fails under
    a cap (the device had far more free, the cache less than the request)."""
    M = 1 << 20
    gen = frames(("/usr/lib/python3/site-packages/transformers/cache_utils.py", 120, "update"),
                 (USER, 30, "main"))
    kv_size = 8 * 4 * 100 * 64 * 2
    blocks, entries, addr = [], [], 0x7F0000000000
    blocks.append(block(addr, 32 * M, "active_allocated"))
    entries.append([0, addr, 32 * M, "parameter", "model.lm_head.weight", "model.lm_head", "", 0, [8192, 2048]])
    addr += 32 * M
    for layer in range(2):
        for kind in ("keys", "values"):
            blocks.append(block(addr, kv_size, "active_allocated"))
            entries.append([0, addr, kv_size, "kv_cache", "past_key_values.layers[%d].%s in generate" % (layer, kind),
                            "", "", 0, [8, 4, 100, 64]])
            addr += kv_size
    blocks.append(block(addr, M, "active_allocated"))
    entries.append([0, addr, M, "local", "logits in generate", "", "", 0, [8, 1, 32768]])
    addr += M
    used = addr - 0x7F0000000000
    blocks.append(block(addr, 256 << 10, "inactive"))  # less than the request: the cap stops a new segment
    t = [entry("oom", 0, 8 * 4 * 101 * 64 * 2, 5000, gen, device_free=100 << 30)]
    tensors = {"version": 1, "took_ms": 3.0, "truncated": False, "objects": 1000, "routes": {}, "entries": entries,
               "methods": []}
    return {"segments": [segment(0, 0x7F0000000000, used + (256 << 10), blocks)], "device_traces": [t],
            "allocator_settings": settings(), "external_annotations": [], "vramscope_tensors": tensors}


def synth_eval_keep_layers(layers=12, batches=24):
    """An evaluation loop over a 12-layer GPT-2-like model, 24 batches, without an optimizer, that keeps
    every batch's 100 MiB of logits (eval.py:19, `out = model(ids)`) and frees them after the loop: the
    layers' stacks make nearly every allocation (layers x batches of each), the batch's own a few."""
    lib = "/usr/lib/python3/site-packages/transformers/models/gpt2/modeling_gpt2.py"
    lin = "/usr/lib/python3/site-packages/torch/nn/modules/linear.py"
    user = "/workspace/proj/eval.py"
    M = 1 << 20
    st = {"t": 1000, "next": 0x7F0000000000}
    ev, live = [], {}

    def fw(*inner):
        return frames(*inner, (user, 19, "main"))

    def alloc(size, fr):
        st["t"] += 5
        a = st["next"]
        st["next"] += size
        ev.append(entry("alloc", a, size, st["t"], fr))
        live[a] = size
        return a

    def free(*addrs):
        for a in addrs:
            st["t"] += 5
            ev.append(entry("free_completed", a, live.pop(a), st["t"], []))

    def layer(h):
        ln = alloc(2 * M, fw((lib, 400, "forward"), (lib, 380, "forward")))
        qkv = alloc(6 * M, fw((lin, 125, "forward"), (lib, 300, "forward"), (lib, 381, "forward")))
        free(ln)
        att = alloc(2 * M, fw((lib, 320, "forward"), (lib, 381, "forward")))
        free(qkv)
        proj = alloc(2 * M, fw((lin, 125, "forward"), (lib, 330, "forward"), (lib, 381, "forward")))
        free(att)
        h2 = alloc(2 * M, fw((lib, 382, "forward")))
        free(proj, h)
        ln2 = alloc(2 * M, fw((lib, 400, "forward"), (lib, 383, "forward")))
        fc = alloc(8 * M, fw((lin, 125, "forward"), (lib, 350, "forward"), (lib, 384, "forward")))
        free(ln2)
        g = alloc(8 * M, fw((lib, 351, "forward"), (lib, 384, "forward")))
        free(fc)
        p2 = alloc(2 * M, fw((lin, 125, "forward"), (lib, 352, "forward"), (lib, 384, "forward")))
        free(g)
        out = alloc(2 * M, fw((lib, 385, "forward")))
        free(p2, h2)
        return out

    kept, ids = [], None
    for _b in range(batches):
        new_ids = alloc(4096, frames((user, 18, "main")))
        if ids:
            free(ids)
        ids = new_ids
        e1 = alloc(2 * M, fw((lin, 190, "forward"), (lib, 900, "forward")))
        e2 = alloc(2 * M, fw((lib, 901, "forward")))
        h = alloc(2 * M, fw((lib, 902, "forward")))
        free(e1, e2)
        for _l in range(layers):
            h = layer(h)
        lnf = alloc(2 * M, fw((lib, 950, "forward")))
        free(h)
        kept.append(alloc(100 * M, fw((lin, 125, "forward"), (lib, 1200, "forward"))))
        free(lnf)
    free(*kept)
    free(ids)
    total = st["next"] - 0x7F0000000000
    segs = [segment(0, 0x7F0000000000, total, [block(0x7F0000000000, total, "inactive")])]
    return {"segments": segs, "device_traces": [ev], "allocator_settings": settings(), "external_annotations": []}


SYNTH = {"two_devices": synth_two_devices, "address_reuse": synth_address_reuse, "long": synth_long,
         "kv_oom": synth_kv_oom, "eval_keep_layers": synth_eval_keep_layers, "hours": synth_hours}


def main(argv):
    if argv[0] == "facts":
        for p in argv[1:]:
            print(json.dumps(facts(p)))
    elif argv[0] == "wrap":
        wrap(argv[1], int(argv[2]), argv[3])
    elif argv[0] == "strip":
        strip(argv[1], argv[2])
    elif argv[0] == "expandable":
        expandable(argv[1], argv[2])
    elif argv[0] == "cut":
        cut(argv[1], int(argv[2]), argv[3])
    elif argv[0] == "release":
        release(argv[1], argv[2], argv[3])
    elif argv[0] == "synth":
        with open(argv[2], "wb") as f:
            pickle.dump(SYNTH[argv[1]](), f, protocol=4)
    else:
        sys.exit("unknown command " + argv[0])


if __name__ == "__main__":
    main(sys.argv[1:])
