/*
 * vramscope timeline's pure parts (no DOM): axis scales and labels, the
 * analysis timeline's points as typed columns and their per-pixel
 * downsampling, the markers (steps, the peak, OOMs), and the pacing of
 * hover requests for what a moment holds. timeline.js draws with them; the
 * node tests run them without a browser.
 *
 * Loads like flame.js: classic script (globalThis.VramscopeSeries) after
 * view.js, require(), or import. No network. Inlined into an HTML script
 * element, so it never contains the sequences that close one.
 */
(function (root, factory) {
  "use strict";
  const viewBase = (root && root.VramscopeView) || (typeof require === "function" ? require("./view.js") : null);
  if (!viewBase) throw new Error("vramscope series.js: load view.js first (profiler/flame/web/files.json)");
  const api = factory(viewBase);
  if (typeof module === "object" && module !== null && module.exports) module.exports = api;
  if (root) root.VramscopeSeries = api;
})(typeof globalThis !== "undefined" ? globalThis : this, function (viewBase) {
  "use strict";

  const { formatBytes } = viewBase;

  // ---------------------------------------------------------------------------
  // Scales (pure)

  const UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];

  /** axisBytes is a short axis label: three significant digits ("954 MiB", "1.40 GiB"). */
  function axisBytes(n) {
    let v = Math.abs(n);
    let u = 0;
    while (v >= 1024 && u < UNITS.length - 1) {
      v /= 1024;
      u++;
    }
    const digits = u === 0 || v >= 100 ? 0 : v >= 10 ? 1 : 2;
    return (n < 0 ? "-" : "") + v.toFixed(digits) + " " + UNITS[u];
  }

  /** formatTime gives microseconds as "812 µs", "4.20 ms" or "12.345 s". */
  function formatTime(us) {
    const a = Math.abs(us);
    if (a < 1000) return Math.round(us) + " \u00b5s";
    if (a < 1e6) return (us / 1000).toFixed(2) + " ms";
    return (us / 1e6).toFixed(3) + " s";
  }

  /** niceStep is a round tick step (1, 2 or 5 times a power of ten) giving about n ticks over span. */
  function niceStep(span, n) {
    const raw = span / Math.max(1, n);
    const p = Math.pow(10, Math.floor(Math.log10(raw || 1)));
    const m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
  }

  // ---------------------------------------------------------------------------
  // Series and per-pixel downsampling (pure)

  /** seriesOf turns a timeline's points into typed columns; categories may be absent. */
  function seriesOf(timeline, endUS) {
    const pts = (timeline && timeline.points) || [];
    const names = (timeline && timeline.category_names) || [];
    const n = pts.length;
    // classified[i]: point i has categories (they stop where the engine's level log does).
    // low: each point's lowest allocated level (older analyses: its highest).
    const s = { n: n, names: names, t: new Float64Array(n), alloc: new Float64Array(n), low: new Float64Array(n), reserved: new Float64Array(n), cats: names.map(() => new Float64Array(n)), classified: new Uint8Array(n), hasCats: false, unclassified: false };
    for (let i = 0; i < n; i++) {
      const p = pts[i];
      s.t[i] = +p.time_us || 0;
      s.alloc[i] = +p.allocated || 0;
      s.low[i] = p.low_allocated !== undefined ? Math.min(+p.low_allocated || 0, s.alloc[i]) : s.alloc[i];
      s.reserved[i] = +p.reserved || 0;
      const c = p.categories;
      if (c && c.length) {
        s.hasCats = true;
        s.classified[i] = 1;
        for (let j = 0; j < names.length; j++) s.cats[j][i] = +c[j] || 0;
      } else if (s.alloc[i] > 0) {
        s.unclassified = true;
      }
    }
    s.unclassified = s.unclassified && s.hasCats;
    // end: the trace's last event; past it the series has no level (it is
    // never drawn flat beyond its trace). Older reports carry no end.
    s.end = +endUS > 0 ? +endUS : Infinity;
    return s;
  }

  /**
   * stepWarp maps the time of one timeline (steps a) onto another's (steps b)
   * so that their steps line up: step i of a onto step i of b, linearly
   * inside a step; before the first and after the last common step, a shift.
   * Without steps on both sides it aligns the first events (t0a onto t0b).
   */
  function stepWarp(a, b, t0a, t0b) {
    const n = Math.min((a || []).length, (b || []).length);
    if (!n) return { to: (t) => t - t0a + t0b, from: (t) => t - t0b + t0a };
    const ka = [+a[0].start_us].concat(a.slice(0, n).map((x) => +x.end_us));
    const kb = [+b[0].start_us].concat(b.slice(0, n).map((x) => +x.end_us));
    const map = (xs, ys) => (t) => {
      if (t <= xs[0]) return t - xs[0] + ys[0];
      if (t >= xs[n]) return t - xs[n] + ys[n];
      let i = 0;
      while (xs[i + 1] < t) i++;
      const w = xs[i + 1] - xs[i];
      return w > 0 ? ys[i] + ((t - xs[i]) * (ys[i + 1] - ys[i])) / w : ys[i];
    };
    return { to: map(ka, kb), from: map(kb, ka) };
  }

  /** indexAt is the last point at or before time t (-1 before the first). */
  function indexAt(s, t) {
    let lo = 0;
    let hi = s.n - 1;
    if (hi < 0 || t < s.t[0] || t > s.end) return -1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (s.t[mid] <= t) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }

  /**
   * columns downsamples s over [t0, t1) to px pixel columns, keeping for each
   * the highest and lowest allocated (of the points' highs and lows), the
   * highest reserved and the point that reached the highest (its categories
   * are drawn). A column without a point
   * holds the level of the point before it, so steps stay flat.
   */
  function columns(s, t0, t1, px, warp) {
    px = Math.max(1, Math.floor(px));
    const c = { px: px, max: new Float64Array(px), min: new Float64Array(px), reserved: new Float64Array(px), at: new Int32Array(px).fill(-1) };
    const span = Math.max(1e-9, t1 - t0);
    const tOf = warp || ((t) => t); // drawn time -> the series' own time
    let i = Math.max(0, Math.min(s.n - 1, indexAt(s, Math.min(tOf(t0), s.end)))); // the point in force at the column's start
    for (let x = 0; x < px; x++) {
      const end = tOf(t0 + ((x + 1) * span) / px);
      if (s.n === 0 || s.t[0] >= end || tOf(t0 + (x * span) / px) > s.end) continue;
      let best = i;
      let lo = s.low[i];
      let res = s.reserved[i];
      let j = i + 1;
      for (; j < s.n && s.t[j] < end; j++) {
        if (s.alloc[j] > s.alloc[best]) best = j;
        lo = Math.min(lo, s.low[j]);
        res = Math.max(res, s.reserved[j]);
      }
      c.at[x] = best;
      c.max[x] = s.alloc[best];
      c.min[x] = lo;
      c.reserved[x] = res;
      i = j - 1;
    }
    return c;
  }

  /** markersOf gathers what the timeline marks: steps, the peak and OOMs, by time. */
  function markersOf(device, report) {
    const out = [];
    const tl = (device && device.timeline) || {};
    for (const m of tl.markers || []) if (m.kind === "step") out.push({ t: +m.time_us, kind: "step", label: m.name });
    if (!out.length) for (const st of (report && report.steps) || []) out.push({ t: +st.start_us, kind: "step", label: "step " + st.index });
    if (device && device.peak && device.peak.bytes > 0) out.push({ t: +device.peak.time_us, kind: "peak", label: "peak " + formatBytes(device.peak.bytes) });
    for (const o of (report && report.ooms) || []) {
      if (!device || o.device === device.device) out.push({ t: +o.time_us, kind: "oom", label: "OOM: " + formatBytes(o.requested) + " requested" });
    }
    return out.sort((a, b) => a.t - b.t);
  }

  /**
   * hoverRequests asks what a hovered moment holds once the pointer has rested
   * on it for `delay` ms (150 by default): moving to another moment cancels
   * the wait, at most one request is in flight, and when it ends only the
   * newest moment still waiting is asked next (the latest wins; an answer for
   * a moment no longer hovered is dropped). fetch(t) gives the answer or a
   * promise of it; show(key, answer) is called for the hovered moment only.
   * A host whose answers come from far away (a kernel, a language server) is
   * asked once per rest, not once per mouse move. options: {delay,
   * setTimeout, clearTimeout} (the timers, for tests).
   */
  function hoverRequests(fetch, show, options) {
    const o = options || {};
    const delay = o.delay === undefined ? 150 : o.delay;
    const setT = o.setTimeout || setTimeout;
    const clearT = o.clearTimeout || clearTimeout;
    let hovered = null; // {key, t}: the moment under the pointer
    let timer = null;
    let inFlight = null;
    let waiting = null;
    let asked = 0;
    let shown = null;

    function ask(h) {
      if (inFlight) {
        waiting = h;
        return;
      }
      inFlight = h;
      asked++;
      let answer;
      try {
        answer = Promise.resolve(fetch(h.t));
      } catch (err) {
        answer = Promise.reject(err);
      }
      answer.then(
        (a) => done(h, a),
        (err) => {
          console.error("vramscope timeline: describing a moment failed", err);
          done(h, null);
        },
      );
    }

    function done(h, answer) {
      inFlight = null;
      const still = (x) => hovered !== null && hovered.key === x.key;
      if (answer && still(h)) {
        shown = h.key;
        show(h.key, answer);
      }
      const next = waiting;
      waiting = null;
      if (next && still(next) && next.key !== h.key) ask(next);
    }

    function stopWaiting() {
      if (timer !== null) clearT(timer);
      timer = null;
    }

    return {
      /** move says the pointer is on the moment `key` (time t). */
      move(key, t) {
        if (hovered !== null && hovered.key === key) return; // the same moment: keep waiting, or showing
        hovered = { key: key, t: t };
        shown = null;
        stopWaiting();
        timer = setT(() => {
          timer = null;
          if (hovered) ask(hovered);
        }, delay);
      },
      /** leave says the pointer left the timeline: nothing is waited for or shown. */
      leave() {
        hovered = null;
        shown = null;
        waiting = null;
        stopWaiting();
      },
      state: () => ({ asked: asked, inFlight: inFlight !== null, waiting: waiting !== null, shown: shown }),
    };
  }

  return {
    formatTime: formatTime,
    axisBytes: axisBytes,
    niceStep: niceStep,
    seriesOf: seriesOf,
    stepWarp: stepWarp,
    indexAt: indexAt,
    columns: columns,
    markersOf: markersOf,
    hoverRequests: hoverRequests,
  };
});
