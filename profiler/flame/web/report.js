/*
 * vramscope report: the linked views of one analysis, shared by the CLI's
 * page, the VS Code webview and the Jupyter widget. It composes the timeline
 * (timeline.js), the flame graph (flame.js), the top lines, the categories,
 * the findings and, when allocmap.js and the analysis's allocator_maps are
 * present, the allocator map. The views are linked: a click on the timeline
 * shows the flame graph and top lines of what was live then; a click on a
 * finding selects its time range on the timeline and its lines in the flame
 * graph; a click on a line selects its frames. A diff's report (diff --html)
 * also has "before" (the other snapshot's timeline, overlaid) and "diff" (per
 * line), shown with the change by category.
 *
 * Data: the flame tree (profiler/flame's JSON) and the report object of
 * analyze's Result.Report ({device: {timeline, peak, ...}, sites, categories,
 * findings, ooms, steps, moments, allocator_maps?}). Loads like flame.js
 * (globalThis.VramscopeReport); needs view.js loaded first, and
 * VramscopeFlame, VramscopeTimeline and VramscopeMoments (or passed in
 * options.flame, options.timeline, options.moments).
 */
(function (root, factory) {
  "use strict";
  const viewBase = (root && root.VramscopeView) || (typeof require === "function" ? require("./view.js") : null);
  if (!viewBase) throw new Error("vramscope report.js: load view.js first (profiler/flame/web/files.json)");
  const api = factory(root, viewBase);
  if (typeof module === "object" && module !== null && module.exports) module.exports = api;
  if (root) root.VramscopeReport = api;
})(typeof globalThis !== "undefined" ? globalThis : this, function (root, viewBase) {
  "use strict";

  // Formatting and the DOM helpers every view shares (view.js).
  const { formatBytes, formatPercent, el, mark, measure } = viewBase;

  function base(file) {
    const s = String(file || "");
    return s.slice(s.lastIndexOf("/") + 1);
  }

  /** findingRange is a finding's time range on the timeline, or null. */
  function findingRange(f, report) {
    const ev = (f && f.evidence) || {};
    if (ev.start_us > 0 && ev.end_us >= ev.start_us) return [ev.start_us, Math.max(ev.end_us, ev.start_us + 1)];
    if (f && f.kind === "out_of_memory") {
      const o = ((report && report.ooms) || [])[0];
      if (o) return [o.time_us, o.time_us + 1];
    }
    return null;
  }

  /** findingFrames are the {file, line} places a finding points at. */
  function findingFrames(f) {
    const out = [];
    if (f && f.file) out.push({ file: f.file, line: f.line || 0 });
    for (const l of (f && f.evidence && f.evidence.lines) || []) out.push({ file: l.file, line: l.line || 0 });
    return out;
  }

  /**
   * instant says whether a device's timeline is one instant: points all at
   * one time (drawn, it was a grey bar from "0 µs" to "1 µs").
   */
  function instant(dev) {
    const pts = dev && dev.timeline && dev.timeline.points;
    if (!pts || !pts.length) return false;
    return +pts[pts.length - 1].time_us - +pts[0].time_us <= 0;
  }

  class ReportView {
    constructor(container, tree, report, options) {
      this.options = options || {};
      this.Flame = this.options.flame || root.VramscopeFlame;
      this.Timeline = this.options.timeline || root.VramscopeTimeline;
      this.Moments = this.options.moments || root.VramscopeMoments;
      this.Road = this.options.road || root.VramscopeRoad; // optional: a host without road.js draws no road
      if (!this.Flame || !this.Timeline || !this.Moments) throw new Error("vramscope report: flame.js, timeline.js and moments.js must be loaded first");
      this.peakTree = tree;
      this.report = report || {};
      this.moments = this.Moments.newMoments(this.report.moments);
      this.build(container);
      this.renderViews();
    }

    build(container) {
      const r = el("div", "vr-root vc-view");
      this.el = r;
      this.roadBox = el("section", "vr-road", r);
      this.roadBox.setAttribute("aria-label", "Memory per step over the run");
      this.roadBox.hidden = true;
      this.tlBox = el("section", "vr-timeline", r);
      this.tlBox.setAttribute("aria-label", "Memory over time");
      const body = el("div", "vr-body", r);
      const main = el("section", "vr-flame", body);
      const head = el("div", "vr-flame-head", main);
      // The tree given is the peak's unless the host says otherwise (another weight).
      this.baseLabel = this.options.baseLabel || "At the peak";
      this.showing = el("span", "vr-showing", head, this.baseLabel);
      this.peakBtn = el("button", "vr-peak vc-button", head, "Back to " + (this.options.baseName || "the peak"));
      this.peakBtn.type = "button";
      this.peakBtn.hidden = true;
      this.flameBox = el("div", "vr-flame-graph", main);
      this.side = el("aside", "vr-side", body);
      this.changeBox = this.section("Change", "vr-change");
      this.changeBox.parentNode.hidden = true;
      this.linesBox = this.section("Top lines", "vr-lines");
      this.catsBox = this.section("Categories", "vr-cats");
      this.findingsBox = this.section("Findings", "vr-findings");
      this.mapBox = this.section("Allocator map", "vr-allocmap");
      this.mapBox.parentNode.hidden = true;
      container.appendChild(r);
    }

    section(title, cls) {
      const s = el("section", "vr-section " + cls, this.side);
      el("h2", "vr-h", s, title);
      return el("div", "vr-section-body", s);
    }

    renderViews() {
      const o = this.options;
      const flameOpts = Object.assign({}, o.flameOptions || {});
      this.flame = this.Flame.render(this.flameBox, this.peakTree, flameOpts);
      const dev = this.report.device;
      if (this.Road && this.Road.usable(this.report.road)) {
        this.roadBox.hidden = false;
        this.road = this.Road.render(this.roadBox, this.report.road);
      }
      if (instant(dev)) {
        // One instant (an OOM between recorded windows: the allocator's state
        // and the failing request) has no time axis to draw: say so in a line.
        this.tlBox.classList.add("vr-timeline-note");
        el("div", "vr-note", this.tlBox, "No recorded trace before this snapshot: the allocator's state at one instant" +
          (this.road ? " (the road above is every step of the run)." : "."));
      } else if (dev && dev.timeline && dev.timeline.points && dev.timeline.points.length) {
        const before = this.report.before && this.report.before.device;
        this.timeline = this.Timeline.render(this.tlBox, dev, this.report, {
          onMoment: (t) => this.showMoment(t),
          describe: this.moments ? (t) => this.describeMoment(t) : undefined,
          momentKey: this.moments ? (t) => this.Moments.bucketOf(this.moments, t) : undefined,
          colors: o.categoryColors,
          overlay: before || undefined,
          overlaySteps: before ? this.report.before.steps || [] : undefined,
          overlayLabel: before ? "before: " + base(this.report.before.file) : undefined,
        });
      } else {
        this.tlBox.hidden = true;
      }
      this.peakBtn.addEventListener("click", () => this.showPeak());
      this.fillLines(this.report.sites || [], "at the peak");
      this.fillCategories();
      this.fillChange();
      this.fillFindings();
      this.renderAllocMap();
      // A report of an OOM opens at the failure, as the allocator map does,
      // not at an earlier successful peak (the peak button goes back to it),
      // where the host asks (openAtOOM: the page, the editor) and the tree
      // it was given is the peak's (the notebook's weight buttons choose theirs).
      const oom = (this.report.ooms || [])[0];
      const atPeak = !this.peakTree.weight || this.peakTree.weight === "peak";
      if (oom && this.moments && !this.report.diff && o.openAtOOM && atPeak) this.showOOM(oom);
    }

    /** showOOM draws what was live at the OOM, saying so. */
    showOOM(oom) {
      if (this.showMoment(+oom.time_us)) {
        this.showing.textContent = "At the OOM (" + formatBytes(oom.requested) + " requested): " + this.showing.textContent;
      }
    }

    /** showMoment draws what was live at time t: the flame graph and the top lines. */
    showMoment(t) {
      if (!this.moments) {
        this.showing.textContent = "This snapshot records no moments (no trace)";
        return null;
      }
      mark("vramscope-moment-start");
      const b = this.Moments.bucketOf(this.moments, t);
      const answer = this.Moments.momentAt(this.moments, b);
      const m = this.moments.m;
      const end = b < 0 ? m.start_us : m.start_us + (b + 1) * m.width_us;
      const dev = this.report.device || {};
      const at = this.Timeline.formatTime(end - (dev.timeline && dev.timeline.points.length ? dev.timeline.points[0].time_us : m.start_us));
      const tree = this.Moments.treeOf(this.moments, answer.live, "live at " + at);
      this.flame.setTree(tree);
      this.fillLines(answer.lines.map((l) => ({ file: l.file, line: l.line, function: l.name, peak_bytes: l.bytes })), "at " + at);
      this.showing.textContent = "Live at " + at + ": " + formatBytes(tree.root.v);
      this.peakBtn.hidden = false;
      if (this.timeline) this.timeline.pick(t, true);
      mark("vramscope-moment-end");
      this.lastMomentMs = measure("vramscope-moment", "vramscope-moment-start", "vramscope-moment-end");
      this.moment = { t: t, bucket: b, bytes: tree.root.v };
      return this.moment;
    }

    // describeMoment names the 3 lines holding the most at time t, for the
    // timeline's tooltip once the pointer rests there: the same answer a
    // click on that moment draws (momentAt, cached per bucket).
    describeMoment(t) {
      const answer = this.Moments.momentAt(this.moments, this.Moments.bucketOf(this.moments, t));
      return answer.lines.slice(0, 3).map((l) => ({ bytes: l.bytes, label: l.file ? base(l.file) + ":" + l.line : l.name }));
    }

    showPeak() {
      this.flame.setTree(this.peakTree);
      this.fillLines(this.report.sites || [], "at the peak");
      this.showing.textContent = this.baseLabel;
      this.peakBtn.hidden = true;
      this.moment = null;
      if (this.timeline) this.timeline.pick(null, true);
    }

    fillLines(sites, when) {
      const box = this.linesBox;
      box.textContent = "";
      el("div", "vr-note", box, "Source lines holding the most memory " + when);
      const list = el("ol", "vr-list", box);
      for (const s of sites.slice(0, 10)) {
        const li = el("li", "vr-item", list);
        const b = el("button", "vr-link", li);
        b.type = "button";
        el("span", "vr-bytes", b, formatBytes(s.peak_bytes));
        el("span", "vr-where", b, s.file ? base(s.file) + ":" + s.line : String(s.function || ""));
        if (s.function && s.file) el("span", "vr-func", b, s.function);
        b.title = (s.file || "") + (s.line ? ":" + s.line : "");
        b.addEventListener("click", () => {
          if (s.file) this.flame.selectFrames([{ file: s.file, line: s.line }], base(s.file) + ":" + s.line);
          if (s.file && typeof this.options.onFrameClick === "function") this.options.onFrameClick({ name: s.function, file: s.file, line: s.line });
        });
      }
      if (!sites.length) el("li", "vr-empty", list, "nothing live");
    }

    fillCategories() {
      const cats = (this.report.categories || []).filter((c) => c.bytes > 0);
      const box = this.catsBox;
      if (!cats.length) {
        box.parentNode.hidden = true;
        return;
      }
      el("div", "vr-note", box, "Live at the peak by what the memory is for");
      const total = cats.reduce((a, c) => a + c.bytes, 0);
      for (const c of cats) {
        const row = el("div", "vr-cat", box);
        const sw = el("span", "vt-swatch", row);
        sw.style.background = (this.options.categoryColors || {})[c.name] || this.Timeline.categoryColor(c.name);
        el("span", "vr-cat-name", row, c.name.replace(/_/g, " "));
        el("span", "vr-bytes", row, formatBytes(c.bytes) + " \u00b7 " + formatPercent(c.bytes, total));
      }
    }

    // fillChange lists what a diff changed: the peak, each category, and the
    // lines whose memory at the peak changed most (a click selects their frames).
    fillChange() {
      const d = this.report.diff;
      if (!d) return;
      const box = this.changeBox;
      box.parentNode.hidden = false;
      const delta = (n) => (n > 0 ? "+" : "") + formatBytes(n);
      el("div", "vr-note", box, "Peak " + formatBytes(d.peak_before) + " \u2192 " + formatBytes(d.peak_after) + " (" + delta(d.peak_delta) + "), from " + base(d.before));
      // A run that ran out of memory never allocated what it asked for: say so beside its peak.
      for (const [side, o] of [["before", d.oom_before], ["after", d.oom_after]]) {
        if (!o) continue;
        const cap = o.process_cap ? ", under a per-process cap of " + formatBytes(o.process_cap)
          : o.process_cap_at_most ? ", under a per-process cap of at most " + formatBytes(o.process_cap_at_most) : "";
        el("div", "vr-note vr-oom", box, side + " ran out of memory: asked for " + formatBytes(o.requested) + " with " + formatBytes(o.allocated) +
          " allocated (it needed at least " + formatBytes(o.allocated + o.requested) + ")" + cap + (o.file ? ", at " + base(o.file) + ":" + o.line : ""));
      }
      const before = new Map(((this.report.before || {}).categories || []).map((c) => [c.name, c.bytes]));
      const after = new Map((this.report.categories || []).map((c) => [c.name, c.bytes]));
      for (const name of new Set([...before.keys(), ...after.keys()])) {
        const a = before.get(name) || 0;
        const b = after.get(name) || 0;
        if (!a && !b) continue;
        const row = el("div", "vr-cat vr-cat-delta", box);
        el("span", "vt-swatch", row).style.background = this.Timeline.categoryColor(name);
        el("span", "vr-cat-name", row, name.replace(/_/g, " "));
        el("span", "vr-bytes", row, formatBytes(a) + " \u2192 " + formatBytes(b) + " (" + delta(b - a) + ")");
      }
      const list = el("ol", "vr-list", box);
      for (const s of (d.sites || []).filter((x) => x.status !== "same").slice(0, 10)) {
        const b = el("button", "vr-link", el("li", "vr-item vr-delta-" + s.status, list));
        b.type = "button";
        el("span", "vr-bytes", b, delta(s.peak_delta));
        el("span", "vr-where", b, s.file ? base(s.file) + ":" + s.line : String(s.function || ""));
        el("span", "vr-func", b, s.status);
        b.addEventListener("click", () => s.file && this.flame.selectFrames([{ file: s.file, line: s.line }], base(s.file) + ":" + s.line));
      }
    }

    fillFindings() {
      const box = this.findingsBox;
      const fs = this.report.findings || [];
      if (!fs.length) {
        el("div", "vr-note", box, "No findings");
        return;
      }
      const list = el("ol", "vr-list", box);
      fs.forEach((f, i) => {
        const li = el("li", "vr-item vr-finding vr-sev-" + (f.severity || "info"), list);
        const b = el("button", "vr-link", li);
        b.type = "button";
        b.dataset.finding = String(i);
        el("span", "vr-sev", b, f.severity || "info");
        el("span", "vr-title", b, f.title || f.kind);
        if (f.file) el("span", "vr-where", b, base(f.file) + ":" + f.line);
        b.title = f.fix || "";
        b.addEventListener("click", () => this.selectFinding(i));
      });
    }

    /** selectFinding selects a finding's time range on the timeline and its lines in the flame graph. */
    selectFinding(i) {
      const f = (this.report.findings || [])[i];
      if (!f) return null;
      for (const b of this.findingsBox.querySelectorAll(".vr-link")) b.classList.toggle("vr-selected", b.dataset.finding === String(i));
      const range = findingRange(f, this.report);
      if (this.timeline) {
        this.timeline.highlight(range ? range[0] : null, range ? range[1] : null);
        if (range) {
          const pad = Math.max((range[1] - range[0]) * 0.25, (this.timeline.state().full[1] - this.timeline.state().full[0]) * 0.05);
          this.timeline.setRange(range[0] - pad, range[1] + pad);
        }
      }
      const sel = this.flame.selectFrames(findingFrames(f), f.title || f.kind);
      return { range: range, frames: sel.count };
    }

    renderAllocMap() {
      const maps = this.report.allocator_maps;
      const A = this.options.allocmap || root.VramAllocMap;
      if (!maps || !A || typeof A.render !== "function") return;
      this.mapBox.parentNode.hidden = false;
      try {
        this.allocmap = A.render(this.mapBox, maps, { report: this.report });
      } catch (err) {
        el("div", "vr-note", this.mapBox, "The allocator map could not be drawn: " + (err && err.message ? err.message : err));
      }
    }

    controller() {
      const flame = this.flame;
      return Object.assign({}, flame, {
        flame: flame,
        timeline: this.timeline || null,
        allocmap: this.allocmap || null,
        showMoment: (t) => this.showMoment(t),
        showPeak: () => this.showPeak(),
        selectFinding: (i) => this.selectFinding(i),
        reportState: () => ({
          moment: this.moment || null,
          momentMs: this.lastMomentMs,
          timeline: this.timeline ? this.timeline.state() : null,
          flame: flame.state(),
          lines: Array.from(this.linesBox.querySelectorAll(".vr-where")).map((e) => e.textContent),
        }),
        road: this.road || null,
        destroy: () => {
          if (this.timeline) this.timeline.destroy();
          if (this.road) this.road.destroy();
          flame.destroy();
          if (this.el.parentNode) this.el.parentNode.removeChild(this.el);
        },
        refreshTheme: () => {
          flame.refreshTheme();
          if (this.timeline) this.timeline.refreshTheme();
          if (this.road) this.road.refreshTheme();
        },
      });
    }
  }

  /**
   * render draws the linked report into container and returns the flame
   * graph's controller extended with {flame, timeline, showMoment(t),
   * showPeak(), selectFinding(i), reportState()}. options: {flameOptions
   * (flame.js's options: onFrameClick, colors, height), onFrameClick (for a
   * top line), categoryColors, baseLabel and baseName (what the tree given
   * shows, when not the peak: "All allocations", "all allocations"),
   * openAtOOM (a report with an OOM, given the peak's tree, first shows what
   * was live at the OOM), flame, timeline, moments, allocmap (the modules,
   * when not globals)}. Measured as
   * "vramscope-report-render".
   */
  function render(container, tree, report, options) {
    mark("vramscope-report-start");
    if (typeof tree === "string") tree = JSON.parse(tree);
    if (typeof report === "string") report = JSON.parse(report);
    const view = new ReportView(container, tree, report, options);
    mark("vramscope-report-end");
    measure("vramscope-report-render", "vramscope-report-start", "vramscope-report-end");
    return view.controller();
  }

  return { render: render, findingRange: findingRange, findingFrames: findingFrames, instant: instant };
});
