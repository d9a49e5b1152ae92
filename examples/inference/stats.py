"""The statistics of the cost harness (cost.py, lockstep.py, reread.py),
apart from torch so that the raw files can be read again anywhere and the
formulas tested on known answers (jupyter/tests/test_cost_stats.py)."""
import bisect
import math
import statistics


def spread(xs):
    """(mean, standard error or None with one value, 95% interval or None)."""
    m = statistics.fmean(xs)
    se = statistics.stdev(xs) / len(xs) ** 0.5 if len(xs) > 1 else None
    return m, se, [m - 2 * se, m + 2 * se] if se else None


def shifts(pairs):
    """(x, ref) pairs -> each x - ref over the mean ref. Not x / ref - 1: the
    mean of ratios is biased upward by the noise in ref (Jensen: by about
    ref's squared coefficient of variation, ~2% for generate32 on the H200's
    host, where nothing differs but the noise)."""
    m = statistics.fmean(r for _, r in pairs)
    return [(x - r) / m for x, r in pairs]


def median_ci(xs):
    """(median, its 95% interval from order statistics, or None under 6 values).
    Distribution-free: the interval holds the median with >= 95% chance
    whatever the noise, which on the H200's host comes as rare 2-5x calls
    (the host's steps) that move a mean by more than the cost measured."""
    v, n = sorted(xs), len(xs)
    if n < 6:
        return statistics.median(v), None
    # the largest k with P(Binomial(n, 1/2) < k) <= 2.5%: [v[k-1], v[n-k]] holds the median
    k, below = 0, 0.0
    while True:
        nxt = below + math.comb(n, k) / 2 ** n
        if nxt > 0.025:
            break
        below, k = nxt, k + 1
    return statistics.median(v), [v[max(k - 1, 0)], v[n - max(k, 1)]]


def describe(xs):
    """Mean and median of xs, each with its 95% interval, and how many."""
    m, se, ci = spread(xs)
    med, mci = median_ci(xs)
    return {"mean": m, "se": se, "ci95": ci, "median": med, "median_ci95": mci, "pairs": len(xs)}


def alternate_summary(rows, threads):
    """--alternate's figures from its rows (each call's off, on and record
    times) and the steady threads' CPU share: each mode less the off call
    beside it, by mean and by median, and the default's estimate."""
    out = {}
    for mode in ("on", "record"):
        for key in ("", "_cpu"):
            rs = shifts([(r[mode + key], r["off" + key]) for r in rows])
            if len(rs) > 1:
                out[mode + key] = describe(rs)
    if "on" in out and "record" in out:
        duty = 0.01  # the default's: window_s / period_s
        est = out["on"]["mean"] + duty * out["record"]["mean"] + threads
        se = (out["on"]["se"] ** 2 + (duty * out["record"]["se"]) ** 2) ** 0.5
        add = duty * out["record"]["median"] + threads  # the on calls' median shift, plus the same parts
        mci = out["on"]["median_ci95"]
        out["default_estimate"] = {"mean": est, "ci95": [est - 2 * se, est + 2 * se], "duty": duty,
                                   "median": out["on"]["median"] + add,
                                   "median_ci95": mci and [mci[0] + add, mci[1] + add],
                                   "threads_share_added": threads,
                                   "note": "on-off, plus duty x (record-off), plus the CPU share of the link, "
                                           "worker and clock threads (on in all three modes; an upper bound of "
                                           "what they take from the program)"}
    return out


def tick_delays(calls, ticks):
    """What a stack sampler's tick costs the program's thread, token by token:
    each token during which a tick began (ticks: their start times, sorted)
    against the mean of its two neighbours in the same call that had none
    (the call's first and last token left out). Returns (for each such token
    its time less its neighbours', over the neighbours' mean time; that mean
    time in seconds)."""
    pairs = []
    for toks in calls:
        had = []
        for b, e in toks:
            j = bisect.bisect_left(ticks, b)
            had.append(j < len(ticks) and ticks[j] < e)
        for k in range(1, len(toks) - 1):
            if had[k] and not had[k - 1] and not had[k + 1]:
                near = (toks[k - 1][1] - toks[k - 1][0] + toks[k + 1][1] - toks[k + 1][0]) / 2
                pairs.append((toks[k][1] - toks[k][0], near))
    if not pairs:
        return [], None
    return shifts(pairs), statistics.fmean(r for _, r in pairs)
