/*
 * vramscope moments: what was live at any time, from analyze's Moments
 * (per-bucket net deltas of live bytes by origin; profiler/analyze/moments.go
 * and docs/report.md). The live set at the end of a bucket is the base plus
 * the deltas up to it, summed from a cached checkpoint every 32 buckets; it is
 * turned into a flame tree (profiler/flame's JSON) and into top lines, so a
 * click on the timeline shows what was live then and a hover names its top
 * lines (momentAt: one cached answer per bucket for both). Pure: no DOM.
 *
 * Loads like flame.js: classic script (globalThis.VramscopeMoments),
 * require(), or import. Inlined into an HTML script element, so it never
 * contains the sequences that close one.
 */
(function (root, factory) {
  "use strict";
  const api = factory();
  if (typeof module === "object" && module !== null && module.exports) module.exports = api;
  if (root) root.VramscopeMoments = api;
})(typeof globalThis !== "undefined" ? globalThis : this, function () {
  "use strict";

  const CHECKPOINT = 32;

  /** newMoments wraps analyze's Moments with a cache of checkpoints (live sets every 32 buckets). */
  function newMoments(m) {
    if (!m || !m.buckets || !m.origins) return null;
    return { m: m, checkpoints: new Map() };
  }

  /** bucketOf is the moment bucket holding time t; -1 before the trace. */
  function bucketOf(mo, t) {
    const m = mo.m;
    if (t < m.start_us) return -1;
    return Math.min(m.buckets.length - 1, Math.floor((t - m.start_us) / m.width_us));
  }

  /** liveAt gives the bytes live by origin (a Float64Array) at the end of bucket b (-1: the base). */
  function liveAt(mo, b) {
    const m = mo.m;
    b = Math.min(b, m.buckets.length - 1);
    const start = Math.floor((b + 1) / CHECKPOINT) * CHECKPOINT; // checkpoint k: buckets 0..k-1 added
    let k = start;
    while (k > 0 && !mo.checkpoints.has(k)) k -= CHECKPOINT;
    if (!mo.checkpoints.has(k)) mo.checkpoints.set(k, baseOf(m));
    let live = mo.checkpoints.get(k);
    while (k < start) {
      live = live.slice();
      for (let i = k; i < k + CHECKPOINT; i++) addRow(live, m.buckets[i], m.unit);
      k += CHECKPOINT;
      mo.checkpoints.set(k, live);
    }
    live = live.slice();
    for (let i = start; i <= b; i++) addRow(live, m.buckets[i], m.unit);
    return live;
  }

  function baseOf(m) {
    const live = new Float64Array(m.origins.length);
    const base = m.base || [];
    for (let i = 0; i + 1 < base.length; i += 2) live[base[i]] += base[i + 1];
    return live;
  }

  function addRow(live, row, unit) {
    for (let j = 0; j + 1 < row.length; j += 2) live[row[j]] += row[j + 1] * unit;
  }

  /** treeOf builds a flame tree (profiler/flame's JSON) of a live set. */
  function treeOf(mo, live, title) {
    const m = mo.m;
    const root = { n: "all", t: "synthetic", v: 0, c: [] };
    const index = new Map([[root, new Map()]]);
    for (let o = 0; o < live.length; o++) {
      const v = live[o];
      if (!(v > 0)) continue;
      root.v += v;
      let node = root;
      for (const fi of m.origins[o]) {
        const f = m.frames[fi];
        const key = f.n + "\u0000" + (f.f || "") + "\u0000" + (f.l || 0);
        const kids = index.get(node);
        let child = kids.get(key);
        if (!child) {
          child = { n: f.n, t: f.t, v: 0 }; // the kind the engine decided
          if (f.f) child.f = f.f;
          if (f.l) child.l = f.l;
          kids.set(key, child);
          index.set(child, new Map());
          (node.c || (node.c = [])).push(child);
        }
        child.v += v;
        node = child;
      }
      node.s = (node.s || 0) + v;
    }
    sortTree(root);
    return { title: title || "live", weight: "live", unit: "bytes", root: root };
  }

  function sortTree(node) {
    const stack = [node];
    while (stack.length) {
      const n = stack.pop();
      if (!n.c) continue;
      n.c.sort((a, b) => b.v - a.v);
      for (const c of n.c) stack.push(c);
    }
  }

  /** topLinesOf lists the source lines holding the most of a live set: {name, file, line, bytes}. */
  function topLinesOf(mo, live, n) {
    const m = mo.m;
    const by = new Map();
    for (let o = 0; o < live.length; o++) {
      if (!(live[o] > 0)) continue;
      const s = m.sites[o];
      const key = s >= 0 ? s : -1 - o; // an origin without a line stands for itself
      by.set(key, (by.get(key) || 0) + live[o]);
    }
    const out = [];
    for (const [key, bytes] of by) {
      const f = key >= 0 ? m.frames[key] : lastFrame(m, -1 - key);
      out.push({ name: f.n, file: f.f || "", line: f.l || 0, bytes: bytes });
    }
    out.sort((a, b) => b.bytes - a.bytes);
    return out.slice(0, n || 10);
  }

  /**
   * momentAt answers what was live at the end of bucket b: {bucket, live,
   * bytes, lines (the top 10)}. The click (the flame graph) and the hover (the
   * tooltip's lines) ask the same question, so the answers are kept for the
   * last `keep` buckets asked (16 by default): a click after a hover, or a
   * hover back on a moment, reads the cache.
   */
  function momentAt(mo, b, keep) {
    const cache = mo.answers || (mo.answers = new Map());
    let a = cache.get(b);
    if (a) {
      cache.delete(b); // most recently used last
      cache.set(b, a);
      return a;
    }
    const live = liveAt(mo, b);
    let bytes = 0;
    for (let o = 0; o < live.length; o++) if (live[o] > 0) bytes += live[o];
    a = { bucket: b, live: live, bytes: bytes, lines: topLinesOf(mo, live, 10) };
    cache.set(b, a);
    while (cache.size > (keep || 16)) cache.delete(cache.keys().next().value);
    return a;
  }

  function lastFrame(m, o) {
    const path = m.origins[o];
    return path.length ? m.frames[path[path.length - 1]] : { n: "(no frames)" };
  }

  return {
    newMoments: newMoments,
    bucketOf: bucketOf,
    liveAt: liveAt,
    treeOf: treeOf,
    topLinesOf: topLinesOf,
    momentAt: momentAt,
  };
});
