/*
 * view.js: what every view of the core shares — the flame graph, the timeline, the
 * report and the allocator map all need it, written once. Bytes, shares and
 * counts as the views print them; theme colours read as light or dark; DOM
 * elements; performance marks; a view's listeners and its batched redraws.
 * Every host loads it first (profiler/flame/web/files.json lists the core in
 * load order).
 *
 * Loads like flame.js: classic script (globalThis.VramscopeView), require(),
 * or import. No network. Inlined into an HTML script element, so it never
 * contains the sequences that close one.
 */
(function (root, factory) {
  "use strict";
  const api = factory();
  if (typeof module === "object" && module !== null && module.exports) module.exports = api;
  if (root) root.VramscopeView = api;
})(typeof globalThis !== "undefined" ? globalThis : this, function () {
  "use strict";

  // ---------------------------------------------------------------------------
  // Numbers as the views print them (pure)

  const UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];

  /**
   * formatBytes gives binary units with two decimals: 1536 -> "1.50 KiB", as
   * the engine's profiler.FormatBytes (the shared cases:
   * profiler/flame/testdata/format_vectors.json).
   */
  function formatBytes(n) {
    n = Number(n) || 0;
    const sign = n < 0 ? "-" : "";
    let v = Math.abs(n);
    let u = 0;
    while (v >= 1024 && u < UNITS.length - 1) {
      v /= 1024;
      u++;
    }
    if (u === 0) return sign + Math.round(v) + " B";
    let s = fixed2(v);
    // 1023.999 KiB would print as "1024.00 KiB"; show it as the next unit.
    if (s === "1024.00" && u < UNITS.length - 1) {
      s = "1.00";
      u++;
    }
    return sign + s + " " + UNITS[u];
  }

  /**
   * fixed2 writes x >= 0 with two decimals, an exact tie to even as Go's and
   * Python's %.2f do: toFixed rounds it up, and 1152 bytes read "1.13 KiB"
   * here but "1.12 KiB" in the CLI. x lies halfway between two hundredths
   * exactly when 8x is an odd integer (x = odd/8).
   */
  function fixed2(x) {
    const s = x.toFixed(2);
    const e = x * 8; // exact: a power of two
    if (!Number.isSafeInteger(e) || e % 2 !== 1) return s;
    const down = Math.floor(x * 100); // x * 100 = down + 0.5 exactly
    return down % 2 === 0 ? (down / 100).toFixed(2) : s;
  }

  /** formatPercent gives part/whole as "12.34%"; tiny non-zero shares read "<0.01%". */
  function formatPercent(part, whole) {
    if (!(whole > 0)) return "0.00%";
    const p = (part / whole) * 100;
    if (p > 0 && p < 0.005) return "<0.01%";
    return (p < 0 ? "-" + fixed2(-p) : fixed2(p)) + "%";
  }

  /** formatCount groups thousands with commas, independent of the viewer's locale. */
  function formatCount(n) {
    return String(Math.round(Number(n) || 0)).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  }

  // ---------------------------------------------------------------------------
  // Theme colours (pure)

  /** parseColor reads #rgb, #rrggbb(aa) and rgb()/rgba() into [r, g, b, a], or null. */
  function parseColor(s) {
    s = String(s || "").trim().toLowerCase();
    let m = /^#([0-9a-f]{3,8})$/.exec(s);
    if (m) {
      let h = m[1];
      if (h.length === 3 || h.length === 4) h = h.replace(/./g, (c) => c + c);
      if (h.length !== 6 && h.length !== 8) return null;
      const a = h.length === 8 ? parseInt(h.slice(6, 8), 16) / 255 : 1;
      return [parseInt(h.slice(0, 2), 16), parseInt(h.slice(2, 4), 16), parseInt(h.slice(4, 6), 16), a];
    }
    m = /^rgba?\(([^)]*)\)$/.exec(s);
    if (!m) return null;
    const parts = m[1].split(/[\s,/]+/).filter(Boolean);
    if (parts.length < 3) return null;
    const ch = (p) => (p.endsWith("%") ? (parseFloat(p) * 255) / 100 : parseFloat(p));
    const a = parts.length > 3 ? (parts[3].endsWith("%") ? parseFloat(parts[3]) / 100 : parseFloat(parts[3])) : 1;
    const rgba = [ch(parts[0]), ch(parts[1]), ch(parts[2]), a];
    return rgba.every((x) => Number.isFinite(x)) ? rgba : null;
  }

  /** isDark says whether a background color is dark (relative luminance < 0.4). */
  function isDark(rgba) {
    if (!rgba || rgba[3] === 0) return false;
    const lin = (c) => {
      c /= 255;
      return c <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4);
    };
    return 0.2126 * lin(rgba[0]) + 0.7152 * lin(rgba[1]) + 0.0722 * lin(rgba[2]) < 0.4;
  }

  // ---------------------------------------------------------------------------
  // DOM

  /** el makes an element of tag and class, with text when given, appended to parent when given. */
  function el(tag, cls, parent, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }

  /** mark sets a performance mark (the benchmarks and tests read the measures). */
  function mark(name) {
    if (typeof performance !== "undefined" && performance.mark) performance.mark(name);
  }

  /** measure records the measure name from mark start to mark end and gives its milliseconds. */
  function measure(name, start, end) {
    if (typeof performance === "undefined" || !performance.measure) return 0;
    const m = performance.measure(name, start, end);
    return m && m.duration !== undefined ? m.duration : 0;
  }

  /**
   * Listeners holds what a view listens to, so that its destroy() lets go of
   * all of it: DOM events, a ResizeObserver, and the theme (VS Code and
   * JupyterLab swap classes, styles and data-theme on body and html when the
   * theme changes).
   */
  class Listeners {
    constructor() {
      this.events = [];
      this.observers = [];
    }

    on(target, type, fn, opts) {
      target.addEventListener(type, fn, opts);
      this.events.push([target, type, fn, opts]);
    }

    /** onResize calls fn when element's size changes (where ResizeObserver exists). */
    onResize(element, fn) {
      if (typeof ResizeObserver === "undefined") return;
      const r = new ResizeObserver(fn);
      r.observe(element);
      this.observers.push(r);
    }

    /** onTheme calls fn when the host's theme may have changed. */
    onTheme(fn) {
      if (typeof MutationObserver === "undefined" || typeof document === "undefined" || !document.body) return;
      const m = new MutationObserver(fn);
      const opts = { attributes: true, attributeFilter: ["class", "style", "data-theme"] };
      m.observe(document.body, opts);
      m.observe(document.documentElement, opts);
      this.observers.push(m);
    }

    clear() {
      for (const [t, type, fn, opts] of this.events) t.removeEventListener(type, fn, opts);
      for (const o of this.observers) o.disconnect();
      this.events = [];
      this.observers = [];
    }
  }

  /**
   * Redraw batches a view's redraws into one animation frame: schedule() asks
   * for one draw, settle() draws a pending one now, cancel() drops it.
   */
  class Redraw {
    constructor(draw) {
      this.draw = draw;
      this.req = 0;
    }

    schedule() {
      if (this.req) return;
      this.req = requestAnimationFrame(() => {
        this.req = 0;
        this.draw();
      });
    }

    settle() {
      if (!this.req) return;
      this.cancel();
      this.draw();
    }

    cancel() {
      if (this.req) cancelAnimationFrame(this.req);
      this.req = 0;
    }
  }

  return {
    formatBytes: formatBytes,
    formatPercent: formatPercent,
    formatCount: formatCount,
    parseColor: parseColor,
    isDark: isDark,
    el: el,
    mark: mark,
    measure: measure,
    Listeners: Listeners,
    Redraw: Redraw,
  };
});
