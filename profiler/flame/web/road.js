/*
 * vramscope road: a run's memory step by step, shared by the CLI's page, the
 * VS Code webview and the Jupyter widget (report.js draws it above the
 * timeline). It draws the analysis' "road" (analyze/road.go: steps {step,
 * allocated, reserved, peak, nvml_bytes, inputs, phase, recorded, oom}, cap,
 * change) on a <canvas>: steps on the x-axis; allocated, reserved and each
 * step's peak as lines, NVML's memory of the process dotted, the cap dashed,
 * the recorded windows shaded, the failing step in red; the change the
 * engine found under it. Hover for a step's numbers.
 *
 * Loads like timeline.js: classic script (globalThis.VramscopeRoad) after
 * view.js and series.js, require(), or import. No network.
 */
(function (root, factory) {
  "use strict";
  const viewBase = (root && root.VramscopeView) || (typeof require === "function" ? require("./view.js") : null);
  const series = (root && root.VramscopeSeries) || (typeof require === "function" ? require("./series.js") : null);
  if (!viewBase || !series) throw new Error("vramscope road.js: load view.js and series.js first (profiler/flame/web/files.json)");
  const api = factory(viewBase, series);
  if (typeof module === "object" && module !== null && module.exports) module.exports = api;
  if (root) root.VramscopeRoad = api;
})(typeof globalThis !== "undefined" ? globalThis : this, function (viewBase, series) {
  "use strict";

  const { formatBytes, formatCount, el, Listeners, Redraw } = viewBase;
  const { axisBytes, niceStep } = series;
  const AXIS_W = 70;
  const AXIS_H = 18;

  /** usable says whether a report's road has steps to draw. */
  function usable(road) {
    return !!(road && Array.isArray(road.steps) && road.steps.length > 0);
  }

  /** windowsOf gives the recorded windows as [first step, last step] runs. */
  function windowsOf(steps) {
    const out = [];
    let open = null;
    for (const s of steps) {
      if (s.recorded) {
        if (open && s.step === open[1] + 1) open[1] = s.step;
        else out.push((open = [s.step, s.step]));
      } else open = null;
    }
    return out;
  }

  /** extent is the x range (first and last step) and the highest level drawn. */
  function extent(road) {
    const st = road.steps;
    let top = +road.cap || 0;
    for (const s of st) top = Math.max(top, +s.peak || 0, +s.reserved || 0, +s.allocated || 0, +s.nvml_bytes || 0);
    return { x0: st[0].step, x1: Math.max(st[st.length - 1].step, st[0].step + 1), top: top > 0 ? top * 1.05 : 1 };
  }

  /**
   * stepTicks gives the whole steps to label between x0 and x1 on widthPx
   * pixels: a nice interval (1, 2, 5 × 10^k) at least minPx apart, so that
   * labels never overlap.
   */
  function stepTicks(x0, x1, widthPx, minPx) {
    const span = Math.max(1, x1 - x0);
    let xs = Math.max(1, Math.ceil(niceStep(span, Math.max(1, Math.floor(widthPx / minPx)))));
    while ((xs / span) * widthPx < minPx && xs < span) xs = niceStep(xs * 2.1, 1);
    const out = [];
    for (let s = Math.ceil(x0 / xs) * xs; s <= x1; s += xs) out.push(s);
    return out;
  }

  /** describe is one step as a line of text (the hover's). */
  function describe(s) {
    const parts = ["step " + s.step + (s.phase && s.phase !== "train" ? " (" + s.phase + ")" : "")];
    if (s.oom) parts.push("ran out of memory");
    if (s.inputs && s.inputs.length) parts.push("inputs " + s.inputs.map((d) => d.join(" × ")).join(", "));
    if (s.peak >= 0) parts.push("peak " + formatBytes(s.peak));
    if (s.allocated >= 0) parts.push("allocated " + formatBytes(s.allocated));
    if (s.reserved >= 0) parts.push("reserved " + formatBytes(s.reserved));
    if (s.nvml_bytes > 0) parts.push("NVML " + formatBytes(s.nvml_bytes));
    if (s.dur_us > 0) parts.push((s.dur_us / 1000).toFixed(1) + " ms");
    if (s.recorded) parts.push("recorded");
    return parts.join(" · ");
  }

  /** nearest is the index of the step drawn nearest to step x. */
  function nearest(steps, x) {
    let lo = 0;
    let hi = steps.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (steps[mid].step < x) lo = mid + 1;
      else hi = mid;
    }
    if (lo > 0 && Math.abs(steps[lo - 1].step - x) <= Math.abs(steps[lo].step - x)) return lo - 1;
    return lo;
  }

  const LINES = [
    { key: "peak", label: "step peak", css: "--vr-road-peak", color: "#e15759", dash: [] },
    { key: "reserved", label: "reserved", css: "--vr-road-reserved", color: "#59636e", dash: [] },
    { key: "allocated", label: "allocated at step end", css: "--vr-road-alloc", color: "#4e79a7", dash: [] },
    { key: "nvml_bytes", label: "NVML (process)", css: "--vr-road-nvml", color: "#76b7b2", dash: [2, 3] },
  ];

  class RoadView {
    constructor(container, road) {
      this.road = road;
      this.steps = road.steps;
      this.ext = extent(road);
      this.windows = windowsOf(this.steps);
      this.listeners = new Listeners();
      this.el = el("div", "vr-road-view", container);
      const head = el("div", "vr-road-head", this.el);
      const n = +road.total || this.steps.length;
      el("span", "vr-road-title", head, "The road: " + formatCount(n) + " steps" +
        (n > this.steps.length ? " (" + formatCount(this.steps.length) + " drawn)" : ""));
      const key = el("span", "vr-road-key", head);
      this.keys = LINES.filter((l) => this.steps.some((s) => +s[l.key] > 0)).map((l) => {
        const k = el("span", "vr-road-k", key, l.label);
        k.dataset.line = l.key;
        return { line: l, sw: k };
      });
      if (road.cap > 0) el("span", "vr-road-k vr-road-k-cap", key, "cap " + formatBytes(road.cap));
      if (this.windows.length) el("span", "vr-road-k vr-road-k-rec", key, "recorded");
      this.canvas = el("canvas", "vr-road-canvas", this.el);
      this.canvas.setAttribute("role", "img");
      this.canvas.setAttribute("aria-label", this.summary());
      this.tip = el("div", "vr-road-tip", this.el);
      this.tip.hidden = true;
      if (road.change && road.change.text) el("div", "vr-road-change", this.el, road.change.text);
      this.ctx = this.canvas.getContext("2d");
      this.nextDraw = new Redraw(() => this.draw());
      this.readTheme();
      this.listeners.on(this.canvas, "mousemove", (e) => this.hover(e));
      this.listeners.on(this.canvas, "mouseleave", () => (this.tip.hidden = true));
      this.listeners.onResize(this.el, () => this.nextDraw.schedule());
      this.listeners.onTheme(() => {
        this.readTheme();
        this.nextDraw.schedule();
      });
      this.nextDraw.schedule();
    }

    summary() {
      const last = this.steps[this.steps.length - 1];
      return "Memory per step over " + this.steps.length + " steps; the last: " + describe(last);
    }

    readTheme() {
      const style = getComputedStyle(this.el);
      const v = (n, d) => style.getPropertyValue(n).trim() || d;
      this.bg = v("--vf-bg", "#ffffff");
      this.muted = v("--vf-muted", "#59636e");
      this.grid = v("--vf-border", "#d1d9e0");
      this.errorColor = v("--vf-error", "#cf222e");
      this.recColor = v("--vr-road-rec", "rgba(130, 80, 223, 0.12)");
      this.font = "11px " + v("--vf-ui-font", "sans-serif");
      this.colors = {};
      for (const l of LINES) this.colors[l.key] = v(l.css, l.color);
      for (const k of this.keys || []) k.sw.style.borderColor = this.colors[k.line.key];
    }

    xOf(step) {
      const w = Math.max(1, this.cssW - AXIS_W - 8);
      return AXIS_W + ((step - this.ext.x0) / (this.ext.x1 - this.ext.x0)) * w;
    }

    yOf(v) {
      return 4 + this.plotH - (v / this.ext.top) * this.plotH;
    }

    draw() {
      const cssW = this.canvas.clientWidth;
      const cssH = this.canvas.clientHeight;
      if (!(cssW > 0) || !(cssH > 0)) return;
      this.cssW = cssW;
      this.plotH = cssH - AXIS_H - 4;
      const dpr = window.devicePixelRatio || 1;
      this.canvas.width = Math.round(cssW * dpr);
      this.canvas.height = Math.round(cssH * dpr);
      const ctx = this.ctx;
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.fillStyle = this.bg;
      ctx.fillRect(0, 0, cssW, cssH);
      ctx.fillStyle = this.recColor;
      for (const [a, b] of this.windows) ctx.fillRect(this.xOf(a - 0.5), 4, Math.max(2, this.xOf(b + 0.5) - this.xOf(a - 0.5)), this.plotH);
      this.axes(ctx, cssH);
      for (const l of LINES) this.line(ctx, l);
      if (this.road.cap > 0) {
        ctx.strokeStyle = this.errorColor;
        ctx.setLineDash([6, 4]);
        ctx.beginPath();
        ctx.moveTo(AXIS_W, this.yOf(this.road.cap));
        ctx.lineTo(cssW - 8, this.yOf(this.road.cap));
        ctx.stroke();
        ctx.setLineDash([]);
      }
      for (const s of this.steps) {
        if (!s.oom) continue;
        const x = this.xOf(s.step);
        ctx.strokeStyle = this.errorColor;
        ctx.beginPath();
        ctx.moveTo(x, 4);
        ctx.lineTo(x, 4 + this.plotH);
        ctx.stroke();
        ctx.fillStyle = this.errorColor;
        ctx.textAlign = x > cssW - 60 ? "right" : "left";
        ctx.fillText("OOM", x + (ctx.textAlign === "right" ? -3 : 3), 10);
      }
      this.drawn = (this.drawn || 0) + 1;
    }

    axes(ctx, cssH) {
      ctx.font = this.font;
      ctx.fillStyle = this.muted;
      ctx.strokeStyle = this.grid;
      ctx.lineWidth = 1;
      ctx.textBaseline = "middle";
      ctx.textAlign = "right";
      const ys = niceStep(this.ext.top, 4);
      ctx.beginPath();
      for (let v = 0; v <= this.ext.top; v += ys) {
        const y = Math.round(this.yOf(v)) + 0.5;
        ctx.moveTo(AXIS_W, y);
        ctx.lineTo(this.cssW - 8, y);
        ctx.fillText(axisBytes(v), AXIS_W - 6, y);
      }
      ctx.stroke();
      // Step labels at whole steps, at least 60 px apart (they never overlap).
      ctx.textAlign = "center";
      ctx.textBaseline = "top";
      for (const s of stepTicks(this.ext.x0, this.ext.x1, Math.max(1, this.cssW - AXIS_W - 8), 60)) {
        ctx.fillText(String(s), this.xOf(s), cssH - AXIS_H + 3);
      }
    }

    line(ctx, l) {
      ctx.strokeStyle = this.colors[l.key];
      ctx.setLineDash(l.dash);
      ctx.lineWidth = l.key === "peak" ? 1.5 : 1;
      ctx.beginPath();
      let pen = false;
      for (const s of this.steps) {
        const v = +s[l.key];
        if (!(v > 0)) continue; // not measured at this step (-1): joins the measured ones
        const x = this.xOf(s.step);
        const y = this.yOf(v);
        if (pen) ctx.lineTo(x, y);
        else ctx.moveTo(x, y);
        pen = true;
        if (this.steps.length < 200) ctx.rect(x - 1, y - 1, 2, 2);
      }
      ctx.stroke();
      ctx.setLineDash([]);
      ctx.lineWidth = 1;
    }

    hover(e) {
      const r = this.canvas.getBoundingClientRect();
      const x = e.clientX - r.left;
      const w = Math.max(1, this.cssW - AXIS_W - 8);
      const step = this.ext.x0 + ((x - AXIS_W) / w) * (this.ext.x1 - this.ext.x0);
      const s = this.steps[nearest(this.steps, step)];
      this.tip.textContent = describe(s);
      this.tip.hidden = false;
      this.tip.style.left = Math.min(Math.max(0, x + 12), Math.max(0, this.cssW - 320)) + "px";
    }

    destroy() {
      this.listeners.clear();
      this.nextDraw.cancel();
      this.el.remove();
    }
  }

  /** render draws a road into container; returns {view, destroy, refreshTheme}. */
  function render(container, road) {
    const v = new RoadView(container, road);
    return {
      view: v,
      destroy: () => v.destroy(),
      refreshTheme: () => {
        v.readTheme();
        v.nextDraw.schedule();
      },
    };
  }

  return { render, usable, windowsOf, extent, describe, nearest, stepTicks };
});
