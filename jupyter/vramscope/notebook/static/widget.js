// vramscope notebook widget: the front end of vramscope.notebook._widget.FlameWidget.
//
// Not a module by itself: the kernel side (vramscope.notebook._widget.esm) prepends
// flame.js — the one renderer shared with the CLI's page and the VS Code
// webview, byte-identical to profiler/flame/web/flame.js — wrapped so that its
// exports are the constant `VramscopeFlame` used below. No network.
//
// State comes from the model (traitlets): tree, weight(s), side(s), title,
// facts, peak_line, note, top_lines, findings, diff, selected_info. The view
// writes `selected` when a frame is clicked; the kernel answers with
// `selected_info` (the cell-relative place and its source line). Custom
// messages are only requests: {type: "view", id, weight, side}, answered by
// {type: "view", id, ok, error} once the kernel has set `tree`.
//
// The report's static copy, a display output of its own for exporters, is
// hidden while this view is rendered (hideStaticCopy in dom.js).
//
// With a `report` (analyze --report: timeline, moments, top lines, findings),
// the view is report.js's linked report around the same flame graph: the
// timeline, a moment's live set on click, findings that select their time
// range and frames; the same code as the CLI's page and the VS Code webview.
// Its findings replace the widget's own list.
//
// For tests and hosts: the root element carries data-nodes, data-render-ms
// (flame.js's own layout+paint measure) and data-view-ms, and el.__vramscope
// is the flame controller ({state, frameAt, zoomTo, search, reset}; with a
// report, also {timeline, showMoment, selectFinding, reportState}).

const fmt = VramscopeFlame.formatBytes;

function share(x) {
  const p = (Number(x) || 0) * 100;
  return p > 0 && p < 0.05 ? "<0.1%" : p.toFixed(1) + "%";
}

function delta(n) {
  return (n > 0 ? "+" : "") + fmt(n);
}

function table(parent, head, rows) {
  const t = h("table", "vs-table", parent);
  const tr = h("tr", null, h("thead", null, t));
  head.forEach((c) => h("th", null, tr, c));
  const body = h("tbody", null, t);
  rows.forEach((r) => {
    const row = h("tr", null, body);
    r.forEach((c) => h("td", null, row, c));
  });
  return t;
}

// Calls fn once el is in the document and has a width: flame.js measures its
// container, and its render measure should time a real first paint.
function whenVisible(el, fn) {
  if (el.isConnected && el.clientWidth > 0) {
    fn();
    return () => {};
  }
  let done = false;
  const ro = new ResizeObserver(() => {
    if (!done && el.isConnected && el.clientWidth > 0) {
      done = true;
      ro.disconnect();
      fn();
    }
  });
  ro.observe(el);
  return () => ro.disconnect();
}

// What the flame graph of each weight shows, for the report's "Back to ...".
const BASES = {
  peak: ["At the peak", "the peak"],
  alloc: ["All allocations (weight: alloc)", "all allocations"],
  current: ["At the snapshot (weight: current)", "the snapshot"],
};

function render({ model, el }) {
  const t0 = performance.now();
  const root = h("div", "vs-widget", el);
  const head = h("div", "vs-head", root);
  const title = h("span", "vs-title", head);
  const weights = h("span", "vs-buttons vs-weights", head);
  const sides = h("span", "vs-buttons vs-sides", head);
  const status = h("span", "vs-status", head);
  const facts = h("div", "vs-facts", root);
  const peak = h("div", "vs-peak", root);
  const note = h("div", "vs-note", root);
  const diff = h("div", "vs-diff", root);
  const flameHost = h("div", "vs-flame", root);
  const selected = h("div", "vs-selected", root);
  const top = h("div", "vs-top", root);
  const findings = h("div", "vs-findings", root);

  let ctrl = null;
  let nextId = 1;
  const pending = new Map();

  function drawHeader() {
    title.textContent = "vramscope \u00b7 " + (model.get("title") || "GPU memory");
    facts.textContent = (model.get("facts") || []).join(" \u00b7 ");
    peak.textContent = model.get("peak_line") || "";
    peak.hidden = !peak.textContent;
    note.textContent = model.get("note") || "";
    note.hidden = !note.textContent;
    buttons(weights, model.get("weights") || [], model.get("weight"), (w) => request({ weight: w }));
    buttons(sides, model.get("sides") || [], model.get("side"), (s) => request({ side: s }));
  }

  function buttons(box, names, current, onPick) {
    box.textContent = "";
    box.hidden = names.length < 2;
    names.forEach((n) => {
      const b = h("button", "vs-button", box, n);
      b.type = "button";
      b.dataset.value = n;
      if (n === current) b.setAttribute("aria-pressed", "true");
      b.addEventListener("click", () => n !== model.get(box === weights ? "weight" : "side") && onPick(n));
    });
  }

  function request(change) {
    const id = nextId++;
    pending.set(id, change);
    status.textContent = "computing\u2026";
    status.classList.remove("vs-error");
    model.send(Object.assign({ type: "view", id: id, weight: model.get("weight"), side: model.get("side") }, change));
  }

  function onCustom(msg) {
    if (!msg || msg.type !== "view" || !pending.has(msg.id)) return;
    pending.delete(msg.id);
    status.textContent = msg.ok ? "" : "error: " + (msg.error || "failed");
    status.classList.toggle("vs-error", !msg.ok);
  }

  function drawTables() {
    top.textContent = "";
    const rows = model.get("top_lines") || [];
    if (rows.length) {
      h("div", "vs-caption", top, "Top lines at the peak");
      table(top, ["at peak", "share", "allocated", "allocs", "line"], rows.map((r) => [fmt(r.peak_bytes), share(r.peak_share), fmt(r.alloc_bytes), String(r.allocs), r.label]));
    }
    findings.textContent = "";
    const fs = hasReport() ? null : model.get("findings");
    if (Array.isArray(fs)) {
      if (!fs.length) h("div", "vs-note", findings, "Findings: none");
      else {
        h("div", "vs-caption", findings, "Findings");
        const ul = h("ul", null, findings);
        fs.forEach((f) => {
          const li = h("li", null, ul);
          h("span", "vs-sev vs-sev-" + f.severity, li, f.severity);
          li.appendChild(document.createTextNode(" " + f.title + (f.where ? " \u2014 " + f.where : "")));
          if (f.fix) h("div", "vs-fix", li, "fix: " + f.fix);
        });
      }
    }
    diff.textContent = "";
    const d = model.get("diff");
    if (Array.isArray(d)) {
      table(diff, ["peak \u0394", "before", "after", "what changed", "line"], d.map((r) => [delta(r.peak_delta), fmt(r.peak_before), fmt(r.peak_after), r.status, r.label]));
    }
  }

  function drawSelected() {
    const s = model.get("selected_info") || {};
    selected.textContent = "";
    selected.hidden = !s.name && !s.where;
    if (selected.hidden) return;
    h("span", "vs-caption", selected, "selected: ");
    h("span", "vs-sel-name", selected, s.name || "");
    if (s.where) h("span", "vs-sel-where", selected, " \u2014 " + s.where);
    if (s.source) h("code", "vs-sel-source", selected, s.source);
  }

  function hasReport() {
    const r = model.get("report");
    return !!(r && r.device && typeof VramscopeReport !== "undefined");
  }

  function drawFlame() {
    if (ctrl) ctrl.destroy();
    ctrl = null;
    flameHost.textContent = "";
    flameHost.style.height = "";
    flameHost.classList.remove("vs-report");
    let tree = model.get("tree");
    // The kernel sends a tree deeper than its JSON encoder goes as JSON text (_deepjson.py).
    if (typeof tree === "string") tree = JSON.parse(tree);
    if (!tree || !tree.root) {
      h("div", "vs-note", flameHost, "no flame graph");
      return;
    }
    const s = performance.now();
    const height = model.get("height");
    if (hasReport()) {
      // The report fills a fixed height: the timeline above, the flame graph below.
      flameHost.classList.add("vs-report");
      flameHost.style.height = (height > 0 ? height + 260 : 760) + "px";
      const base = BASES[model.get("weight")] || BASES.peak;
      ctrl = VramscopeReport.render(flameHost, tree, model.get("report"), {
        baseLabel: base[0],
        baseName: base[1],
        flame: VramscopeFlame,
        timeline: VramscopeTimeline,
        moments: VramscopeMoments,
        road: VramscopeRoad,
        allocmap: typeof VramAllocMap !== "undefined" ? VramAllocMap : undefined,
      });
    } else {
      ctrl = VramscopeFlame.render(flameHost, tree, height > 0 ? { height: height } : {});
    }
    const st = ctrl.state();
    root.dataset.nodes = String(st.nodes);
    root.dataset.renderMs = String(st.renderMs);
    root.dataset.flameMs = String(performance.now() - s);
    root.__vramscope = ctrl;
  }

  // A click on a frame: flame.js zooms into it (its own listener); this one,
  // in the capture phase, reads the frame under the pointer before the zoom
  // changes the layout, then tells the kernel.
  function onClick(e) {
    if (!ctrl || !e.target.classList || !e.target.classList.contains("vf-canvas")) return;
    const f = ctrl.frameAt(e.clientX, e.clientY);
    if (!f) return;
    setTimeout(() => {
      model.set("selected", { name: f.name, file: f.file, line: f.line, path: ctrl ? ctrl.state().zoomPath : [] });
      model.save_changes();
    }, 0);
  }
  flameHost.addEventListener("click", onClick, true);

  const onTree = () => drawFlame();
  const onReport = () => {
    drawFlame();
    drawTables();
  };
  const onHeader = () => drawHeader();
  const onTables = () => drawTables();
  model.on("change:tree", onTree);
  model.on("change:report", onReport);
  ["change:title", "change:facts", "change:peak_line", "change:note", "change:weight", "change:weights", "change:side", "change:sides"].forEach((ev) => model.on(ev, onHeader));
  ["change:top_lines", "change:findings", "change:diff"].forEach((ev) => model.on(ev, onTables));
  model.on("change:selected_info", drawSelected);
  model.on("msg:custom", onCustom);

  drawHeader();
  drawTables();
  drawSelected();
  // The view is up: its static copy (an output of its own) would show the report twice.
  const showStatic = hideStaticCopy(el, model.get("static_key"));
  const unwatch = whenVisible(root, () => {
    performance.mark("vramscope-widget-render-start");
    drawFlame();
    performance.mark("vramscope-widget-render-end");
    performance.measure("vramscope-widget-render", "vramscope-widget-render-start", "vramscope-widget-render-end");
    root.dataset.viewMs = String(performance.now() - t0);
    // The host's theme (JupyterLab, VS Code) is known once the element is in the page.
    requestAnimationFrame(() => ctrl && ctrl.refreshTheme());
  });

  return () => {
    showStatic();
    unwatch();
    flameHost.removeEventListener("click", onClick, true);
    model.off("change:tree", onTree);
    model.off("change:report", onReport);
    model.off(null, onHeader);
    model.off(null, onTables);
    model.off("change:selected_info", drawSelected);
    model.off("msg:custom", onCustom);
    if (ctrl) ctrl.destroy();
  };
}

export default { render };
