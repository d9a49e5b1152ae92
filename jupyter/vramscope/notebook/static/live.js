// vramscope live widget: the front end of vramscope.notebook._widget.LiveWidget.
// Like widget.js, it follows flame.js (wrapped as `VramscopeFlame`), here only
// for its byte formatting. State: samples [{t (unix ms), used, total, util,
// allocated, reserved}] (absent values null), running, source, note, total,
// idle (why the GPU idled over the last minute, by line: vramscope idle).
// warning (the daemon's OOM forecast for this kernel, in words; "" for none).
// The Stop/Start button sets `running`; the kernel's sampling thread follows.

const fmt = VramscopeFlame.formatBytes;

const SERIES = [
  { key: "used", label: "GPU memory used", color: "#0969da", axis: "bytes" },
  { key: "reserved", label: "torch reserved", color: "#bf8700", axis: "bytes" },
  { key: "allocated", label: "torch allocated", color: "#1a7f37", axis: "bytes" },
  { key: "util", label: "GPU utilisation", color: "#cf222e", axis: "pct" },
];

function render({ model, el }) {
  const root = h("div", "vs-widget vs-live", el);
  const head = h("div", "vs-head", root);
  h("span", "vs-title", head, "vramscope \u00b7 live");
  const btn = h("button", "vs-button vs-live-toggle", head);
  btn.type = "button";
  const source = h("span", "vs-facts", head);
  const note = h("div", "vs-note", root);
  const idle = h("div", "vs-note vs-idle", root);
  const warning = h("div", "vs-note vs-live-warning", root);
  const canvas = h("canvas", "vs-live-chart", root);
  const legend = h("div", "vs-legend", root);

  function latest(samples, key) {
    for (let i = samples.length - 1; i >= 0; i--) if (samples[i][key] !== null && samples[i][key] !== undefined) return samples[i][key];
    return null;
  }

  function draw() {
    const samples = model.get("samples") || [];
    btn.textContent = model.get("running") ? "Stop" : "Start";
    source.textContent = model.get("source") || "";
    note.textContent = model.get("note") || "";
    note.hidden = !note.textContent;
    idle.textContent = model.get("idle") || "";
    idle.hidden = !idle.textContent;
    warning.textContent = model.get("warning") ? "\u26a0 " + model.get("warning") : "";
    warning.hidden = !warning.textContent;
    root.dataset.samples = String(samples.length);

    legend.textContent = "";
    SERIES.forEach((s) => {
      const v = latest(samples, s.key);
      if (v === null) return;
      const item = h("span", "vs-legend-item", legend);
      h("span", "vs-swatch", item).style.background = s.color;
      item.appendChild(document.createTextNode(s.label + " " + (s.axis === "pct" ? Math.round(v) + "%" : fmt(v))));
    });

    const dpr = window.devicePixelRatio || 1;
    const w = canvas.clientWidth || 600;
    const hgt = canvas.clientHeight || 220;
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(hgt * dpr);
    const ctx = canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, hgt);
    const style = getComputedStyle(root);
    const muted = style.getPropertyValue("--vf-muted").trim() || "#888";
    ctx.font = "11px " + (style.getPropertyValue("--vf-ui-font").trim() || "sans-serif");
    ctx.fillStyle = muted;
    if (samples.length < 1) {
      ctx.fillText("waiting for samples\u2026", 8, 16);
      return;
    }
    const t1 = samples[samples.length - 1].t;
    const t0 = Math.min(samples[0].t, t1 - 60000);
    let maxB = model.get("total") || 0;
    samples.forEach((p) => ["used", "reserved", "allocated"].forEach((k) => (maxB = Math.max(maxB, p[k] || 0))));
    maxB = maxB || 1;
    const pad = { l: 8, r: 8, t: 16, b: 14 };
    const x = (t) => pad.l + ((t - t0) / Math.max(1, t1 - t0)) * (w - pad.l - pad.r);
    const yb = (v) => hgt - pad.b - (v / maxB) * (hgt - pad.t - pad.b);
    const yp = (v) => hgt - pad.b - (v / 100) * (hgt - pad.t - pad.b);
    ctx.fillText(fmt(maxB), pad.l, 11);
    ctx.fillText("100%", w - pad.r - 28, 11);
    ctx.fillText(Math.round((t1 - t0) / 1000) + " s", pad.l, hgt - 2);
    SERIES.forEach((s) => {
      ctx.strokeStyle = s.color;
      ctx.lineWidth = 1.5;
      ctx.beginPath();
      let pen = false;
      samples.forEach((p) => {
        const v = p[s.key];
        if (v === null || v === undefined) {
          pen = false;
          return;
        }
        const px = x(p.t);
        const py = s.axis === "pct" ? yp(v) : yb(v);
        if (pen) ctx.lineTo(px, py);
        else ctx.moveTo(px, py);
        pen = true;
      });
      ctx.stroke();
    });
  }

  btn.addEventListener("click", () => {
    model.set("running", !model.get("running"));
    model.save_changes();
  });
  const redraw = () => requestAnimationFrame(draw);
  ["change:samples", "change:running", "change:source", "change:note", "change:total", "change:idle", "change:warning"].forEach((ev) => model.on(ev, redraw));
  const ro = new ResizeObserver(redraw);
  ro.observe(canvas);
  draw();
  const showStatic = hideStaticCopy(el, model.get("static_key")); // see dom.js
  return () => {
    showStatic();
    ro.disconnect();
    model.off(null, redraw);
  };
}

export default { render };
