"""What the agent costs an inference program (issue #27), on a CUDA machine.

Within one process, blocks alternating the agent's modes (the first block of
each mode and the first iteration of each block are left out):

    python3 examples/inference/cost.py --workload generate --cycle off,default,record --block-s 5 --blocks 12

  off      the agent detached (nothing recorded, no threads)
  default  vramscope.attach() with the default sampling, its clock scaled by
           --scale (period_s and window_s divided by it, the same 1% duty) so
           that every block holds a window: an upper bound of the default,
           as each block also pays an attach and a warm-up tick; with
           --period-s P the clock's period is P (window P/100, the default's
           duty) and there is no warm-up window (warmup=0,warmup_allocs=0:
           the warm-up is once per process, not once per block; timed apart)
  record   recording all along (VRAMSCOPE_SAMPLE=off): what a recorded window costs

Within one attach, call by call (the tightest pairing; docs/inference.md):

    python3 examples/inference/cost.py --workload serve --alternate --seconds 120

Within one attach, token by token (generate and serve): the stack sampler's
ticks against the tokens beside them, the hooks by the agent's own timing
(none run during a generate call), the other threads by their CPU share, the
windows as 1% of what recording costs:

    python3 examples/inference/cost.py --workload serve --tokens --seconds 90 --record-slowdown 0.164

Across processes, call by call (lockstep.py: two processes, one plain, one
under `vramscope run`, taking turns one call at a time):

    python3 examples/inference/lockstep.py --workload serve --seconds 120 --vramscope bin/vramscope

Across processes (plain python against `vramscope run`, the true defaults):

    python3 examples/inference/cost.py --workload eval --seconds 20

prints one JSON line: the iterations' times and the agent's own status.
"""
import argparse
import json
import os
import signal
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workloads  # noqa: E402
from stats import alternate_summary, describe, spread, tick_delays  # noqa: E402
from workloads import SHAPES, WORKLOADS  # noqa: E402

DEFAULT_PERIOD_S, DEFAULT_WINDOW_S = 30.0, 0.3


def attach(mode, scale, period_s=None):
    import vramscope

    if mode == "default":
        spec = "period_s=%g,window_s=%g" % (DEFAULT_PERIOD_S / scale, DEFAULT_WINDOW_S / scale)
        if period_s:
            spec = "period_s=%g,window_s=%g,warmup=0,warmup_allocs=0" % (
                period_s, period_s * DEFAULT_WINDOW_S / DEFAULT_PERIOD_S)
        vramscope.attach(socket=os.environ.get("VRAMSCOPE_SOCKET"), sample=spec)
    elif mode == "record":
        vramscope.attach(socket=os.environ.get("VRAMSCOPE_SOCKET"), sample="off")


def detach():
    import vramscope

    st = vramscope.status() if hasattr(vramscope, "status") else {}
    vramscope.detach()
    return {"sampling": (st or {}).get("sampling"), "cost": (st or {}).get("cost")}


CPU = []  # the calling thread's CPU seconds of each timed call, in order (beside its wall time)


def timed(fn, model, i):
    """One call's wall seconds; its CPU seconds on this thread go to CPU. The
    host's speed steps by 2x for tens of seconds (docs/inference.md): the CPU
    time says whether a slow stretch was this thread's work or the host's."""
    t, c = time.perf_counter(), time.thread_time()
    fn(model, i)
    torch.cuda.synchronize()
    CPU.append(time.thread_time() - c)
    return time.perf_counter() - t


class Cut(Exception):
    """SIGTERM (a time limit): the blocks that ended are still printed."""


def _cut(signum, frame):
    raise Cut()


def discovering():
    """Whether the attached agent still looks for the root modules with
    torch's global module hooks (without an optimizer step, until SETTLE_CALLS
    root calls in a row found no new one: once per process, and once per
    block here)."""
    try:
        from vramscope.agent import _agent

        hooks = _agent._agent.levels.hooks
        return hooks is not None and not hooks[1].done
    except Exception:
        return False


def cycle(a, model, fn, t0):
    modes = a.cycle.split(",")
    blocks = []
    i = 0
    cut = False
    signal.signal(signal.SIGTERM, _cut)
    try:
        for b in range(a.blocks):
            mode = modes[b % len(modes)]
            attach(mode, a.scale, a.period_s)
            times, calls, found, end = [], [], [], time.perf_counter() + a.block_s
            c0 = len(CPU)
            while time.perf_counter() < end:
                found.append(discovering())
                times.append(timed(fn, model, i))
                calls.append(i)
                i += 1
            agent = detach() if mode != "off" else None
            blocks.append({"mode": mode, "times": times, "calls": calls, "discovering": found, "agent": agent,
                           "cpu": CPU[c0:]})
            print("block %d %s: %d calls, mean %.4f s (at %.1f s)" % (b, mode, len(times), statistics.fmean(times),
                                                                      time.perf_counter() - t0), file=sys.stderr,
                  flush=True)
    except Cut:
        cut = True
    out = {"blocks": blocks, "summary": summary(blocks, modes), "cut_by_sigterm": cut,
           "by_call": by_call(blocks, modes, SHAPES.get(a.workload, 1))}
    slow = out["summary"].get("record", {}).get("paired_mean") or a.record_slowdown
    out["own"] = own(blocks, slow)
    return out


def own(blocks, record_slowdown):
    """What the default blocks cost by the agent's own measures, where the
    blocks' times are too noisy to resolve it: the share of each block spent
    in its hooks and backward wrapper (on the user's thread), the share its
    threads ran (an upper bound of the GIL they took), and the share
    recorded (windows open) times what recording costs (record_slowdown:
    the record blocks' paired slowdown of this run, or --record-slowdown).
    Medians over the default blocks."""
    rows = []
    for b in blocks:
        ag = b.get("agent") or {}
        smp, cost = ag.get("sampling") or {}, ag.get("cost") or {}
        since = smp.get("since_s") or 0.0
        if b["mode"] != "default" or since <= 0:
            continue
        hooks = (cost.get("hook_s", 0.0) + cost.get("levels_s", 0.0) + cost.get("backward_wrapper_s", 0.0)) / since
        threads = cost.get("agent_threads_cpu_s", 0.0) / since
        duty = smp.get("recorded_s", 0.0) / since
        row = {"duty": duty, "hooks_share": hooks, "threads_share": threads}
        if record_slowdown is not None:
            row["bound"] = duty * max(0.0, record_slowdown) + hooks + threads
        rows.append(row)
    if not rows:
        return None
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    return dict(med, blocks=len(rows), record_slowdown=record_slowdown)


def beside_off(rows, m):
    """rows: (mode, value) per block, in order (value None: nothing to pair).
    For each block of mode m with an off block beside it: (its index, its
    value over the mean of the off values beside it, less 1)."""
    out = []
    for j, (mode, v) in enumerate(rows):
        if mode != m or v is None:
            continue
        near = [rows[k][1] for k in (j - 1, j + 1)
                if 0 <= k < len(rows) and rows[k][0] == "off" and rows[k][1] is not None]
        if near:
            out.append((j, v / statistics.fmean(near) - 1))
    return out


def by_call(blocks, modes, shapes):
    """Each mode against off, call by call: a call's time over the median of
    the same call (its number modulo `shapes`) in the off blocks, so a block's
    mix of request sizes does not count. Each block's mean ratio is paired
    with the off blocks beside it (their ratios, near 1); the first block of
    each mode, each block's first call and the calls made while the agent
    still looked for its root modules (`discovering`: once per process,
    once per block here) are left out; those calls' mean ratio is given
    apart ("discovery")."""
    kept = blocks[len(modes):]
    ref = {}
    for b in kept:
        if b["mode"] == "off":
            for c, t in list(zip(b["calls"], b["times"]))[1:]:
                ref.setdefault(c % shapes, []).append(t)
    ref = {k: statistics.median(v) for k, v in ref.items()}
    rows, counts, found = [], [], {}
    for b in kept:
        rs = []
        for j, (c, t, d) in enumerate(zip(b["calls"], b["times"], b["discovering"])):
            r = t / ref[c % shapes] if c % shapes in ref else None
            if r is None or j == 0:
                continue
            if d:
                found.setdefault(b["mode"], []).append(r)
            else:
                rs.append(r)
        rows.append((b["mode"], statistics.fmean(rs) if rs else None))
        counts.append(len(rs))
    out = {"shapes": shapes}
    for m in modes:
        pairs = beside_off(rows, m) if m != "off" else []
        if not pairs:
            continue
        mean, se, ci = spread([d for _, d in pairs])
        out[m] = {"paired_mean": mean, "paired_se": se, "ci95": ci,
                  "blocks": len(pairs), "calls": sum(counts[j] for j, _ in pairs),
                  "discovery": {"calls": len(found.get(m, [])),
                                "mean_ratio": statistics.fmean(found[m]) if found.get(m) else None}}
    return out


def summary(blocks, modes):
    """Mean iteration time per mode (first block of each mode and first
    iteration of each block left out), and each mode's slowdown against off
    with a paired estimate: every block against the off blocks beside it."""
    kept = [dict(b, times=b["times"][1:]) for b in blocks[len(modes):] if len(b["times"]) > 1]
    means = {m: statistics.fmean([t for b in kept if b["mode"] == m for t in b["times"]]) for m in modes
             if any(b["mode"] == m for b in kept)}
    out = {"mean_s": means}
    if "off" not in means:
        return out
    rows = [(b["mode"], statistics.fmean(b["times"])) for b in kept]
    for m in means:
        if m == "off":
            continue
        diffs = [d for _, d in beside_off(rows, m)]
        mean, se, _ = spread(diffs) if diffs else (None, None, None)
        out[m] = {"slowdown": means[m] / means["off"] - 1, "paired_mean": mean, "paired_se": se,
                  "blocks": len(diffs)}
    return out


def attach_discovered(model, fn):
    """Attach with a clock that never opens a window (the windows are costed
    apart) and run calls until the root discovery ends (once per attach: not
    timed); returns the next call's number."""
    import vramscope

    vramscope.attach(socket=os.environ.get("VRAMSCOPE_SOCKET"),
                     sample="period_s=1e9,window_s=0.3,warmup=0,warmup_allocs=0")
    i = 0
    while discovering() and i < 64:
        fn(model, i)
        i += 1
    return i


def alternate(a, model, fn, t0):
    """Within one attach, call by call: each call is run three times in a row,
    with the agent's parts off (no root hooks, the stack sampler paused), on (the
    default's parts), and on with the allocator's history recorded during the
    call, in an order that rotates (off/on/record, on/record/off, ...); the
    host's speed, which steps by 2x for tens of seconds on the H200's host,
    is the same for the three. The clock opens no window here (its period is
    1e9 s): its windows' cost is the recorded share (1% by default) times
    what recording costs (the record calls). The link's, the worker's and
    the clock's threads stay on in all three: their CPU share over the calls
    is added (`steady_threads_share`)."""
    from vramscope.agent import _agent, _torch as vt

    i = attach_discovered(model, fn)
    if not _agent._parts(True):
        raise SystemExit("the agent's parts cannot be switched (no root hooks yet?)")
    ag = _agent._agent

    steady = [t for name, t in ag.threads().items() if name != "sampler"]  # on in every mode

    def steady_threads_cpu():
        return sum(_agent._thread_cpu_s(t) for t in steady)

    orders = (("off", "on", "record"), ("on", "record", "off"), ("record", "off", "on"))
    rows, cut, end = [], False, time.perf_counter() + a.seconds
    w0, c0 = time.perf_counter(), steady_threads_cpu()
    signal.signal(signal.SIGTERM, _cut)
    try:
        while time.perf_counter() < end:
            row = {"call": i}
            for mode in orders[len(rows) % 3]:
                _agent._parts(mode != "off")
                if mode == "record":
                    vt.start_recording(torch, 100_000, "python", clear=True)
                row[mode] = timed(fn, model, i)
                row[mode + "_cpu"] = CPU[-1]
                if mode == "record":
                    vt.stop_recording(torch)
            _agent._parts(True)
            rows.append(row)
            i += 1
    except Cut:
        cut = True
    threads = (steady_threads_cpu() - c0) / max(1e-9, time.perf_counter() - w0)
    vt.stop_recording(torch)
    agent = detach()
    out = {"rows": rows, "cut_by_sigterm": cut, "agent": agent, "warm_calls": rows[0]["call"] if rows else i,
           "steady_threads_share": threads}
    out.update(alternate_summary(rows, threads))
    return out


class TokenClock:
    """A stopping criterion that never stops a `generate`: at each new token
    it waits for the GPU and notes when the token began and ended (the
    prompt's forward is not timed). Each call's tokens are a list of
    (start, end) perf_counter times."""

    def __init__(self):
        self.calls = []

    def start(self):
        self.cur, self.t = [], None
        self.calls.append(self.cur)

    def __call__(self, input_ids, scores, **kw):
        torch.cuda.synchronize()
        t = time.perf_counter()
        if self.t is not None:
            self.cur.append((self.t, t))
        self.t = time.perf_counter()
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)


def tokens(a, model, fn):
    """--tokens: the default agent under a generate loop, its parts measured
    where they act. The root hooks: none run during a generate call (a root's
    generate is one step: Roots.take), so the agent's own timing of what it
    does on the program's thread (levels cost_s) is their share. The stack
    sampler: its ticks are timed (its sample wrapped) and each token during
    which one began is set against its neighbours (tick_delays); the delay a
    tick, times the ticks a second, is its share. The link, the worker and
    the clock by their CPU share (an upper bound), the windows as 1% of
    --record-slowdown (what recording costs, from --alternate)."""
    from transformers import StoppingCriteria, StoppingCriteriaList
    from vramscope.agent import _agent, _stacks

    i = attach_discovered(model, fn)
    ag = _agent._agent
    smp = _stacks.sampler()
    ticks = []
    sample = smp.sample

    def timed_sample(me):
        ticks.append(time.perf_counter())
        sample(me)

    smp.sample = timed_sample

    class Crit(TokenClock, StoppingCriteria):
        pass

    clock = Crit()
    workloads.GENERATE_KW["stopping_criteria"] = StoppingCriteriaList([clock])
    threads = ag.threads()
    cpu = lambda: {k: _agent._thread_cpu_s(t) for k, t in threads.items()}  # noqa: E731
    lvl = ag.levels.levels
    step0, cost0 = (lvl.step, lvl.cost_s) if lvl is not None else (0, 0.0)
    w0, c0, end, cut = time.perf_counter(), cpu(), time.perf_counter() + a.seconds, False
    signal.signal(signal.SIGTERM, _cut)
    try:
        while time.perf_counter() < end:
            clock.start()
            fn(model, i)
            i += 1
    except Cut:
        cut = True
    wall = max(1e-9, time.perf_counter() - w0)
    c1 = cpu()
    shares = {("sampler_cpu" if k == "sampler" else k): (c1[k] - c0[k]) / wall for k in c1}
    workloads.GENERATE_KW.clear()
    smp.sample = sample
    steps, hooks = (lvl.step - step0, (lvl.cost_s - cost0) / wall) if lvl is not None else (None, None)
    agent = detach()
    timed_ticks = [t for t in ticks if t >= w0]  # in order: one thread appended them
    n_ticks = len(timed_ticks)
    delays, ref_s = tick_delays(clock.calls, timed_ticks)
    out = {"calls": len(clock.calls), "tokens": [[(round(b - w0, 6), round(e - b, 6)) for b, e in c] for c in clock.calls],
           "ticks": n_ticks, "tick_times": [round(t - w0, 6) for t in timed_ticks],
           "cut_by_sigterm": cut, "agent": agent, "thread_shares": shares,
           "steps": steps, "hooks_share": hooks, "ticked_tokens": len(delays)}
    if len(delays) > 1:
        d = describe(delays)
        m, ci = d["mean"], d["ci95"]
        rate = n_ticks / wall
        out["tick"] = {"delay_mean": m, "ci95": ci, "median": d["median"], "median_ci95": d["median_ci95"],
                       "delay_s": m * ref_s, "token_s": ref_s, "ticks_per_s": rate}
        sampler = m * ref_s * rate  # a tick's delay in seconds, times the ticks a second
        band = [c * ref_s * rate for c in ci]
        out["sampler_share"] = {"mean": sampler, "ci95": band, "cpu_share": shares["sampler_cpu"]}
        if a.record_slowdown is not None:
            add = shares["link"] + shares["worker"] + shares["clock"] + (hooks or 0.0) + 0.01 * a.record_slowdown
            out["default_estimate"] = {
                "mean": sampler + add, "ci95": [band[0] + add, band[1] + add],
                "others_added": add - 0.01 * a.record_slowdown, "windows_added": 0.01 * a.record_slowdown,
                "note": "the sampler's ticks' delay to the program's thread, plus the agent's own timing of its "
                        "hooks, plus the link's, worker's and clock's CPU share (an upper bound), plus 1% (the "
                        "default's duty) of what recording costs"}
    return out


def on_command(a, model, fn):
    """--on-command: one call per line read ("call I"), its wall and CPU
    seconds written back ("T CPU"), until "quit" (lockstep.py drives two such
    processes, one plain and one under `vramscope run`, one call at a time).
    The answer's line is this process's own: what ran it and, under the agent,
    the agent's status."""
    out = sys.stdout
    print("ready", file=out, flush=True)
    n = 0
    for line in sys.stdin:
        cmd = line.split()
        if not cmd or cmd[0] == "quit":
            break
        t = timed(fn, model, int(cmd[1]))
        print("%.9f %.9f" % (t, CPU[-1]), file=out, flush=True)
        n += 1
    agent = None
    if "vramscope" in sys.modules:
        import vramscope

        st = vramscope.status() or {}
        agent = {"sampling": st.get("sampling"), "cost": st.get("cost")}
    return {"calls": n, "under_agent": agent is not None, "agent": agent}


def steady(a, model, fn):
    """One mode for --seconds: whatever this process runs under."""
    under = "vramscope" in sys.modules  # vramscope run's boot imports it; a plain process has not
    times, i, t0 = [], 0, time.perf_counter()
    while time.perf_counter() - t0 < a.seconds:
        times.append(timed(fn, model, i))
        i += 1
    agent = None
    try:
        import vramscope

        agent = {"sampling": vramscope.status().get("sampling"), "cost": vramscope.status().get("cost")}
    except Exception:
        pass
    out = {"iterations": len(times), "wall_s": time.perf_counter() - t0, "mean_s": statistics.fmean(times[1:]),
           "median_s": statistics.median(times[1:]), "times": times, "cpu": CPU[-len(times):], "agent": agent,
           "under_agent": under}
    if agent:  # the agent's own measure over the whole process, warm-up included (own())
        out["own"] = own([{"mode": "default", "agent": agent}], a.record_slowdown)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", choices=sorted(WORKLOADS), required=True)
    ap.add_argument("--cycle", default="")
    ap.add_argument("--alternate", action="store_true",
                    help="one attach; each call run with the agent's parts off, on, and recording (--seconds)")
    ap.add_argument("--tokens", action="store_true",
                    help="one attach; generate's tokens timed, the stack sampler's ticks against them (--seconds)")
    ap.add_argument("--on-command", action="store_true",
                    help="one call per line on stdin, its time on stdout (lockstep.py)")
    ap.add_argument("--blocks", type=int, default=12)
    ap.add_argument("--block-s", type=float, default=5.0)
    ap.add_argument("--scale", type=float, default=6.0)
    ap.add_argument("--period-s", type=float, default=None)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--record-slowdown", type=float, default=None,
                    help="what recording all along costs this workload (0.26 = +26%%), for the own bound when "
                    "the cycle has no record blocks")
    a = ap.parse_args()
    t0 = time.perf_counter()
    build, fn = WORKLOADS[a.workload]
    model = build()
    for i in range(max(2, SHAPES.get(a.workload, 1))):  # warm the kernels and the allocator's cache, every shape
        fn(model, i)
    torch.cuda.synchronize()
    print("built and warmed in %.1f s" % (time.perf_counter() - t0), file=sys.stderr, flush=True)
    if a.on_command:
        r = on_command(a, model, fn)
    elif a.tokens:
        r = tokens(a, model, fn)
    elif a.alternate:
        r = alternate(a, model, fn, t0)
    else:
        r = cycle(a, model, fn, t0) if a.cycle else steady(a, model, fn)
    r.update(workload=a.workload, torch=torch.__version__, device=torch.cuda.get_device_name(0),
             utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), argv=sys.argv[1:])
    print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
