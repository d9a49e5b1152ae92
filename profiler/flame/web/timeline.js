/*
 * vramscope timeline: memory over time, shared by the CLI's page, the VS Code
 * webview and the Jupyter widget (like flame.js). It draws a device timeline
 * of the analysis JSON (points {time_us, allocated, reserved, categories},
 * category_names, markers) on a <canvas>: allocated stacked by category,
 * reserved as a line, step boundaries, the peak and OOMs marked. Drag to zoom
 * into a range, + / - / arrows / 0 (and double-click) to zoom, pan and reset,
 * hover for a tooltip, click to pick a moment. A diff overlays the other
 * snapshot's allocated memory as a line, both aligned at their first event.
 *
 * Loads like flame.js: classic script (globalThis.VramscopeTimeline) after
 * view.js and series.js (its pure parts), require(), or import. No network. Inlined into an HTML script element, so it
 * never contains the sequences that close one.
 */
(function (root, factory) {
  "use strict";
  const viewBase = (root && root.VramscopeView) || (typeof require === "function" ? require("./view.js") : null);
  const series = (root && root.VramscopeSeries) || (typeof require === "function" ? require("./series.js") : null);
  if (!viewBase || !series) throw new Error("vramscope timeline.js: load view.js and series.js first (profiler/flame/web/files.json)");
  const api = factory(viewBase, series);
  if (typeof module === "object" && module !== null && module.exports) module.exports = api;
  if (root) root.VramscopeTimeline = api;
})(typeof globalThis !== "undefined" ? globalThis : this, function (viewBase, series) {
  "use strict";

  // Formatting and the DOM helpers every view shares (view.js); the
  // timeline's scales, series, markers and hover requests (series.js).
  const { formatBytes, el, Listeners, Redraw } = viewBase;
  const { formatTime, axisBytes, niceStep, seriesOf, stepWarp, indexAt, columns, markersOf, hoverRequests } = series;

  // ---------------------------------------------------------------------------
  // The view (DOM)

  const CAT_COLORS = {
    parameter: "#4e79a7",
    gradient: "#f28e2b",
    optimizer_state: "#76b7b2",
    activation: "#e15759",
    temporary: "#edc948",
    other: "#9c9c9c",
    unknown: "#bab0ac",
    kv_cache: "#b07aa1",
    graph_pool: "#59a14f",
  };
  const AXIS_W = 70;
  const AXIS_H = 18;

  class TimelineView {
    constructor(container, device, report, options) {
      this.options = options || {};
      this.device = device || {};
      this.s = seriesOf(this.device.timeline, this.device.end_us);
      this.markers = markersOf(this.device, report);
      const t0 = this.s.n ? this.s.t[0] : 0;
      const last = this.s.n ? this.s.t[this.s.n - 1] : 1;
      this.full = [t0, Math.max(last, +this.device.end_us || 0, t0 + 1)];
      // The overlay (a diff's before side) is aligned step by step where both
      // have steps (overlaySteps, report.steps), else at the first event; it
      // is drawn up to its own trace's end only.
      const ov = this.options.overlay;
      if (ov && ov.timeline && ov.timeline.points && ov.timeline.points.length) {
        this.o = seriesOf(ov.timeline, ov.end_us);
        this.warp = stepWarp((report && report.steps) || [], this.options.overlaySteps || [], t0, this.o.t[0]);
        this.full[1] = Math.max(this.full[1], this.warp.from(Math.min(this.o.end, this.o.t[this.o.n - 1] + 1)));
      }
      this.range = this.full.slice();
      this.hoverT = null;
      this.moment = null; // the picked time
      this.band = null; // [t0, t1] highlighted (a finding's time range)
      this.drag = null;
      this.listeners = new Listeners();
      this.nextDraw = new Redraw(() => this.draw());
      this.momentLines = null; // {key, lines}: what the hovered moment holds, once asked
      if (typeof this.options.describe === "function") {
        this.lane = hoverRequests(
          (t) => this.options.describe(t),
          (key, lines) => this.showMomentLines(key, lines),
          { delay: this.options.hoverDelay },
        );
      }
      this.build(container);
      this.readTheme();
      this.attach();
    }

    build(container) {
      const root = el("div", "vt-root vc-view");
      root.tabIndex = 0;
      // Hosts with keyboard shortcuts of their own (JupyterLab's "0 0") leave
      // the timeline's keys to it.
      root.setAttribute("data-lm-suppress-shortcuts", "true");
      root.setAttribute("data-p-suppress-shortcuts", "true");
      root.setAttribute("role", "group");
      root.setAttribute("aria-label", "Memory over time: drag to zoom, + and - zoom, arrows pan, 0 resets, click picks a moment");
      const bar = el("div", "vt-toolbar", root);
      this.resetBtn = el("button", "vt-reset vc-button", bar);
      this.resetBtn.type = "button";
      this.resetBtn.textContent = "Reset zoom";
      this.resetBtn.title = "Show the whole timeline (0)";
      this.legend = el("span", "vt-legend", bar);
      this.status = el("span", "vt-status", bar);
      this.status.setAttribute("aria-live", "polite");
      this.canvas = el("canvas", "vt-canvas", root);
      this.canvas.setAttribute("role", "img");
      this.canvas.setAttribute("aria-label", "Allocated and reserved GPU memory over time");
      this.tooltip = el("div", "vt-tooltip vc-tooltip", root);
      this.tooltip.hidden = true;
      this.el = root;
      container.appendChild(root);
      this.ctx = this.canvas.getContext("2d");
      this.fillLegend();
    }

    fillLegend() {
      const add = (cls, color, text) => {
        const item = el("span", "vt-key " + cls, this.legend);
        const sw = el("span", "vt-swatch", item);
        sw.style.background = color;
        el("span", "", item).textContent = text;
      };
      if (this.s.hasCats) this.s.names.forEach((n) => add("vt-key-cat", this.catColor(n), n.replace(/_/g, " ")));
      else add("vt-key-cat", this.catColor("other"), "allocated");
      if (this.s.unclassified) add("vt-key-cat", this.catColor("unknown"), "not classified");
      add("vt-key-reserved", "transparent", "reserved");
      if (this.options.overlay) add("vt-key-overlay", "transparent", this.options.overlayLabel || "before");
    }

    catColor(name) {
      const o = (this.options.colors || {})[name];
      return o || CAT_COLORS[name] || CAT_COLORS.other;
    }

    readTheme() {
      const style = getComputedStyle(this.el);
      const v = (n, d) => style.getPropertyValue(n).trim() || d;
      this.bg = v("--vf-bg", "#ffffff");
      this.fg = v("--vf-fg", "#1f2328");
      this.muted = v("--vf-muted", "#59636e");
      this.grid = v("--vf-border", "#d1d9e0");
      this.accent = v("--vf-focus", "#0969da");
      this.errorColor = v("--vf-error", "#cf222e");
      this.overlayColor = (this.options.colors || {}).overlay || v("--vt-overlay", "#8250df");
      this.font = "11px " + v("--vf-ui-font", "sans-serif");
    }

    on(target, type, fn, opts) {
      this.listeners.on(target, type, fn, opts);
    }

    attach() {
      this.on(this.canvas, "mousedown", (e) => this.onDown(e));
      this.on(window, "mousemove", (e) => this.onMove(e));
      this.on(window, "mouseup", (e) => this.onUp(e));
      this.on(this.canvas, "mouseleave", () => this.setHover(null));
      this.on(this.canvas, "dblclick", () => this.reset());
      this.on(this.resetBtn, "click", () => this.reset());
      this.on(this.el, "keydown", (e) => this.onKey(e));
      this.listeners.onResize(this.el, () => this.schedule());
      this.listeners.onTheme(() => {
        this.readTheme();
        this.schedule();
      });
    }

    schedule() {
      if (!this.destroyed) this.nextDraw.schedule();
    }

    plotWidth() {
      return Math.max(1, this.cssW - AXIS_W - 8);
    }

    xOf(t) {
      return AXIS_W + ((t - this.range[0]) / (this.range[1] - this.range[0])) * this.plotWidth();
    }

    tOf(x) {
      return this.range[0] + ((x - AXIS_W) / this.plotWidth()) * (this.range[1] - this.range[0]);
    }

    draw() {
      if (this.destroyed) return;
      const cssW = this.canvas.clientWidth;
      const cssH = this.canvas.clientHeight;
      if (!(cssW > 0) || !(cssH > 0)) return;
      this.cssW = cssW;
      this.cssH = cssH;
      const dpr = window.devicePixelRatio || 1;
      if (this.canvas.width !== Math.round(cssW * dpr) || this.canvas.height !== Math.round(cssH * dpr)) {
        this.canvas.width = Math.round(cssW * dpr);
        this.canvas.height = Math.round(cssH * dpr);
      }
      const ctx = this.ctx;
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.fillStyle = this.bg;
      ctx.fillRect(0, 0, cssW, cssH);
      this.cols = columns(this.s, this.range[0], this.range[1], this.plotWidth());
      this.ocols = this.o ? columns(this.o, this.range[0], this.range[1], this.plotWidth(), this.warp.to) : null;
      let top = 0;
      for (let x = 0; x < this.cols.px; x++) top = Math.max(top, this.cols.max[x], this.cols.reserved[x], this.ocols ? this.ocols.max[x] : 0);
      this.yMax = top > 0 ? top * 1.05 : 1;
      this.plotH = cssH - AXIS_H - 4;
      this.paintAxes();
      this.paintAreas();
      this.paintOverlay();
      this.paintBand();
      this.paintMarkers();
      this.paintCursor();
      this.resetBtn.disabled = this.range[0] === this.full[0] && this.range[1] === this.full[1];
      this.drawn = (this.drawn || 0) + 1;
    }

    yOf(v) {
      return 4 + this.plotH - (v / this.yMax) * this.plotH;
    }

    paintAxes() {
      const ctx = this.ctx;
      ctx.font = this.font;
      ctx.fillStyle = this.muted;
      ctx.strokeStyle = this.grid;
      ctx.lineWidth = 1;
      ctx.textBaseline = "middle";
      ctx.textAlign = "right";
      const ys = niceStep(this.yMax, 4);
      ctx.beginPath();
      for (let v = 0; v <= this.yMax; v += ys) {
        const y = Math.round(this.yOf(v)) + 0.5;
        ctx.moveTo(AXIS_W, y);
        ctx.lineTo(this.cssW - 8, y);
        ctx.fillText(axisBytes(v), AXIS_W - 6, y);
      }
      ctx.stroke();
      ctx.textAlign = "center";
      ctx.textBaseline = "top";
      const span = this.range[1] - this.range[0];
      // Times are whole microseconds: a tick under 1 µs would repeat labels over each other.
      const ts = Math.max(1, niceStep(span, Math.max(2, Math.floor(this.plotWidth() / 110))));
      const origin = this.full[0];
      for (let t = Math.ceil((this.range[0] - origin) / ts) * ts; t <= this.range[1] - origin; t += ts) {
        ctx.fillText(formatTime(t), this.xOf(origin + t), this.cssH - AXIS_H + 3);
      }
    }

    // Each column is an envelope: solid up to its lowest level, lighter from
    // there to its highest, so a level that swings within a pixel (steps
    // zoomed out) reads as a band instead of a comb. The solid part stacks the
    // categories of the column's highest point, scaled to the lowest level;
    // points without categories (past the engine's level log) are drawn in
    // the "not classified" colour.
    paintAreas() {
      const ctx = this.ctx;
      const c = this.cols;
      const s = this.s;
      const names = s.hasCats ? s.names : ["other"];
      for (let j = 0; j <= names.length; j++) {
        const unknown = j === names.length;
        ctx.fillStyle = this.catColor(unknown ? "unknown" : names[j]);
        for (const part of ["solid", "band"]) {
          ctx.globalAlpha = part === "solid" ? 1 : 0.45;
          ctx.beginPath();
          for (let x = 0; x < c.px; x++) {
            const span = this.columnSpan(x, j, part);
            if (!span) continue;
            const y0 = this.yOf(span[0]);
            const y1 = this.yOf(span[1]);
            ctx.rect(AXIS_W + x, y1, 1, Math.max(0.5, y0 - y1));
          }
          ctx.fill();
        }
      }
      ctx.globalAlpha = 1;
      ctx.setLineDash([4, 3]);
      ctx.strokeStyle = this.fg;
      this.line((x) => c.reserved[x]);
      ctx.setLineDash([]);
    }

    // paintOverlay draws the other snapshot's allocated memory (each pixel's highest) as a line.
    paintOverlay() {
      if (!this.ocols) return;
      const ctx = this.ctx;
      ctx.strokeStyle = this.overlayColor;
      ctx.lineWidth = 2;
      this.line((x) => this.ocols.max[x], this.ocols);
      ctx.lineWidth = 1;
    }

    // columnSpan is the [bottom, top] bytes that category j (names.length:
    // not classified) fills in column x, in its solid part (up to the column's
    // lowest level) or its band (from there to the highest); null if none.
    columnSpan(x, j, part) {
      const c = this.cols;
      const s = this.s;
      const i = c.at[x];
      if (i < 0) return null;
      const classified = !s.hasCats || s.classified[i];
      const last = s.hasCats ? s.names.length : 1;
      let lo = 0;
      let hi = 0;
      if (j === last) {
        if (classified) return null;
        hi = c.max[x];
      } else if (!classified) {
        return null;
      } else if (!s.hasCats) {
        hi = c.max[x];
      } else {
        let below = 0;
        for (let k = 0; k < j; k++) below += s.cats[k][i];
        lo = below;
        hi = below + s.cats[j][i];
        if (j === last - 1) hi = Math.max(hi, c.max[x]); // bytes the categories leave out
      }
      const cut = c.min[x];
      if (part === "solid") {
        const top = Math.min(hi, cut);
        return top > lo ? [lo, top] : null;
      }
      const bottom = Math.max(lo, cut);
      return hi > bottom ? [bottom, hi] : null;
    }

    line(valueAt, cols) {
      const ctx = this.ctx;
      const c = cols || this.cols;
      if (!cols) ctx.lineWidth = 1;
      ctx.beginPath();
      let on = false;
      for (let x = 0; x < c.px; x++) {
        if (c.at[x] < 0) {
          on = false;
          continue;
        }
        const y = this.yOf(valueAt(x));
        if (on) ctx.lineTo(AXIS_W + x + 0.5, y);
        else ctx.moveTo(AXIS_W + x + 0.5, y);
        on = true;
      }
      ctx.stroke();
    }

    paintBand() {
      const b = this.drag && this.drag.moved ? [this.drag.t0, this.drag.t1].sort((p, q) => p - q) : this.band;
      if (!b) return;
      const ctx = this.ctx;
      const x0 = Math.max(AXIS_W, this.xOf(b[0]));
      const x1 = Math.min(this.cssW - 8, this.xOf(b[1]));
      ctx.globalAlpha = 0.18;
      ctx.fillStyle = this.accent;
      ctx.fillRect(x0, 4, Math.max(2, x1 - x0), this.plotH);
      ctx.globalAlpha = 1;
    }

    paintMarkers() {
      const ctx = this.ctx;
      let lastStep = -Infinity;
      for (const m of this.markers) {
        if (m.t < this.range[0] || m.t > this.range[1]) continue;
        const x = Math.round(this.xOf(m.t)) + 0.5;
        // Steps closer than 6 px are thinned out (zoom in to see each).
        if (m.kind === "step") {
          if (x - lastStep < 6) continue;
          lastStep = x;
        }
        ctx.strokeStyle = m.kind === "step" ? this.grid : m.kind === "oom" ? this.errorColor : this.fg;
        ctx.lineWidth = m.kind === "step" ? 1 : 1.5;
        ctx.setLineDash(m.kind === "step" ? [2, 3] : []);
        ctx.beginPath();
        ctx.moveTo(x, 4);
        ctx.lineTo(x, 4 + this.plotH);
        ctx.stroke();
        ctx.setLineDash([]);
        if (m.kind !== "step") {
          ctx.fillStyle = ctx.strokeStyle;
          ctx.font = this.font;
          ctx.textAlign = x > this.cssW - 120 ? "right" : "left";
          ctx.textBaseline = "top";
          ctx.fillText(m.kind === "oom" ? "OOM" : "peak", x + (ctx.textAlign === "left" ? 3 : -3), 5);
        }
      }
    }

    paintCursor() {
      const ctx = this.ctx;
      const draw = (t, color, w) => {
        if (t === null || t < this.range[0] || t > this.range[1]) return;
        const x = Math.round(this.xOf(t)) + 0.5;
        ctx.strokeStyle = color;
        ctx.lineWidth = w;
        ctx.beginPath();
        ctx.moveTo(x, 4);
        ctx.lineTo(x, 4 + this.plotH);
        ctx.stroke();
      };
      draw(this.moment, this.accent, 2);
      draw(this.hoverT, this.fg, 1);
    }

    clientT(e) {
      const r = this.canvas.getBoundingClientRect();
      const x = Math.min(Math.max(e.clientX - r.left, AXIS_W), this.cssW - 8);
      return this.tOf(x);
    }

    inPlot(e) {
      const r = this.canvas.getBoundingClientRect();
      const x = e.clientX - r.left;
      const y = e.clientY - r.top;
      return x >= AXIS_W && x <= r.width - 8 && y >= 0 && y <= r.height;
    }

    onDown(e) {
      if (e.button !== 0 || !this.inPlot(e)) return;
      this.el.focus({ preventScroll: true });
      const t = this.clientT(e);
      this.drag = { t0: t, t1: t, x: e.clientX, moved: false };
      e.preventDefault();
    }

    onMove(e) {
      if (this.drag) {
        this.drag.t1 = this.clientT(e);
        this.drag.moved = this.drag.moved || Math.abs(e.clientX - this.drag.x) > 3;
        this.schedule();
      }
      if (e.target === this.canvas && this.inPlot(e)) this.setHover(this.clientT(e), e);
      else if (!this.drag) this.setHover(null);
    }

    onUp() {
      const d = this.drag;
      if (!d) return;
      this.drag = null;
      if (d.moved) {
        const a = Math.min(d.t0, d.t1);
        const b = Math.max(d.t0, d.t1);
        if (b > a) this.setRange(a, b);
      } else {
        this.pick(d.t0);
      }
      this.schedule();
    }

    onKey(e) {
      const span = this.range[1] - this.range[0];
      const mid = this.moment !== null && this.moment >= this.range[0] && this.moment <= this.range[1] ? this.moment : this.range[0] + span / 2;
      switch (e.key) {
        case "+":
        case "=":
          this.setRange(mid - span / 4, mid + span / 4);
          break;
        case "-":
        case "_":
          this.setRange(mid - span, mid + span);
          break;
        case "ArrowLeft":
          this.setRange(this.range[0] - span / 5, this.range[1] - span / 5);
          break;
        case "ArrowRight":
          this.setRange(this.range[0] + span / 5, this.range[1] + span / 5);
          break;
        case "0":
        case "Escape":
          this.reset();
          break;
        case "Enter":
          this.pick(mid);
          break;
        default:
          return;
      }
      e.preventDefault();
    }

    /** setRange zooms to [a, b], kept inside the recording. */
    setRange(a, b) {
      const full = this.full;
      const fullSpan = full[1] - full[0];
      let span = Math.min(Math.max(b - a, 1), fullSpan);
      a = Math.max(full[0], Math.min(a, full[1] - span));
      this.range = [a, a + span];
      this.schedule();
      this.fire("onRange", this.range.slice());
      return this.range.slice();
    }

    reset() {
      return this.setRange(this.full[0], this.full[1]);
    }

    // pick marks the moment t and, unless quiet, tells the host (onMoment).
    pick(t, quiet) {
      this.moment = t;
      this.schedule();
      if (!quiet) this.fire("onMoment", t);
    }

    fire(name, arg) {
      const fn = this.options[name];
      if (typeof fn !== "function") return;
      try {
        fn(arg);
      } catch (err) {
        console.error("vramscope timeline: " + name + " failed", err);
      }
    }

    setHover(t, e) {
      this.hoverT = t;
      this.schedule();
      if (t === null) {
        this.tooltip.hidden = true;
        if (this.lane) this.lane.leave();
        return;
      }
      if (this.lane) this.lane.move(this.momentKey(t), t);
      this.fillTooltip(t);
      this.tooltip.hidden = false;
      if (e) this.hoverAt = [e.clientX, e.clientY];
      if (this.hoverAt) this.placeTooltip(this.hoverAt[0], this.hoverAt[1]);
    }

    // momentKey names the moment under time t: the host's (report.js: the
    // moments' bucket), else the pixel column.
    momentKey(t) {
      if (typeof this.options.momentKey === "function") return this.options.momentKey(t);
      return Math.round(this.xOf(t));
    }

    // showMomentLines is the lane's answer for the moment `key`: the tooltip
    // is filled again if it still shows that moment.
    showMomentLines(key, lines) {
      this.momentLines = { key: key, lines: lines };
      if (this.hoverT !== null && !this.tooltip.hidden && this.momentKey(this.hoverT) === key) this.setHover(this.hoverT);
    }

    fillTooltip(t) {
      const s = this.s;
      const i = indexAt(s, t);
      const tt = this.tooltip;
      tt.textContent = "";
      const line = (cls, text) => {
        el("div", cls, tt).textContent = text;
      };
      line("vf-tt-name", formatTime(t - this.full[0]));
      if (i < 0) return;
      line("vf-tt-bytes", "allocated " + formatBytes(s.alloc[i]) + " \u00b7 reserved " + formatBytes(s.reserved[i]));
      if (this.o) {
        const j = indexAt(this.o, this.warp.to(t));
        if (j >= 0) line("vf-tt-rel", (this.options.overlayLabel || "before") + ": allocated " + formatBytes(this.o.alloc[j]) + " \u00b7 reserved " + formatBytes(this.o.reserved[j]));
      }
      if (s.hasCats && s.classified[i]) {
        s.names.forEach((n, j) => {
          if (s.cats[j][i] > 0) line("vf-tt-rel", n.replace(/_/g, " ") + ": " + formatBytes(s.cats[j][i]));
        });
      } else if (s.hasCats) {
        line("vf-tt-rel", "categories: not classified here (the trace has more allocations and frees than the engine can index, 2^31)");
      }
      const near = this.markers.filter((m) => m.kind !== "step" && Math.abs(this.xOf(m.t) - this.xOf(t)) < 4);
      for (const m of near) line("vf-tt-self", m.label);
      // The host may say more about the moment (report.js: the lines live
      // then), once the pointer rests on it (hoverRequests).
      if (this.lane) this.fillMomentLines(tt, t);
      if (this.options.onMoment) line("vf-tt-hint", "click: what was live then");
    }

    fillMomentLines(tt, t) {
      const key = this.momentKey(t);
      const got = this.momentLines && this.momentLines.key === key ? this.momentLines.lines : null;
      tt.dataset.moment = got ? String(key) : "";
      if (!got) {
        el("div", "vf-tt-hint vt-tt-wait", tt).textContent = "rest here: the lines live then\u2026";
        return;
      }
      for (const item of got) {
        const row = el("div", "vf-tt-file vt-tt-line", tt);
        if (typeof item === "string") {
          row.textContent = item;
          continue;
        }
        row.dataset.bytes = String(item.bytes);
        row.textContent = formatBytes(item.bytes) + " " + item.label;
      }
    }

    placeTooltip(clientX, clientY) {
      const r = this.el.getBoundingClientRect();
      const tt = this.tooltip;
      let x = clientX - r.left + 14;
      let y = clientY - r.top + 12;
      if (x + tt.offsetWidth > r.width - 4) x = Math.max(4, clientX - r.left - tt.offsetWidth - 14);
      if (y + tt.offsetHeight > r.height - 4) y = Math.max(4, r.height - tt.offsetHeight - 4);
      tt.style.transform = "translate(" + Math.round(x) + "px, " + Math.round(y) + "px)";
    }

    controller() {
      return {
        setRange: (a, b) => this.setRange(a, b),
        reset: () => this.reset(),
        pick: (t, quiet) => this.pick(t, quiet),
        highlight: (a, b) => {
          this.band = a === undefined || a === null ? null : [a, b];
          this.schedule();
        },
        /** xAt is the client x of time t (for tests and hosts that point at a moment). */
        xAt: (t) => this.canvas.getBoundingClientRect().left + this.xOf(t),
        state: () => ({ range: this.range.slice(), full: this.full.slice(), moment: this.moment, band: this.band, points: this.s.n, overlayPoints: this.o ? this.o.n : 0, drawn: this.drawn || 0, markers: this.markers.length, hover: this.lane ? this.lane.state() : null }),
        refreshTheme: () => {
          this.readTheme();
          this.schedule();
        },
        destroy: () => this.destroy(),
      };
    }

    destroy() {
      if (this.destroyed) return;
      this.destroyed = true;
      if (this.lane) this.lane.leave();
      this.nextDraw.cancel();
      this.listeners.clear();
      if (this.el.parentNode) this.el.parentNode.removeChild(this.el);
    }
  }

  /**
   * render draws device (a Device of the analysis: {timeline, peak, end_us})
   * with report's steps and OOMs into container, and returns a controller
   * {setRange(a, b), reset(), pick(t), highlight(a, b), xAt(t), state(),
   * refreshTheme(), destroy()}. options: {onMoment(t), onRange([a, b]),
   * colors: {CATEGORY: css color, overlay}, overlay (another Device: a diff's
   * before side, drawn as a line up to its own trace's end, step i onto step
   * i where overlaySteps and report.steps both have steps, else aligned at
   * the first event), overlaySteps, overlayLabel,
   * describe(t) (what the moment t holds, for the tooltip: [{bytes, label}]
   * or strings, or a promise of them; asked once the pointer rests there
   * hoverDelay ms, 150 by default: see hoverRequests), momentKey(t) (the
   * moment t belongs to: one request per moment; default the pixel column)}.
   * The first paint is synchronous.
   */
  function render(container, device, report, options) {
    if (!container || typeof container.appendChild !== "function") throw new Error("vramscope timeline: container element required");
    const view = new TimelineView(container, device, report, options);
    view.draw();
    return view.controller();
  }

  // The pure parts (series.js) stay reachable here too, where hosts and tests found them.
  return Object.assign({}, series, {
    render: render,
    categoryColor: (name) => CAT_COLORS[name] || CAT_COLORS.other,
  });
});
