/*
 * vramscope allocator map: the caching allocator's segments and blocks drawn
 * to scale, at the snapshot, the peak and the first OOM (analyze's
 * allocator_maps: [{device, maps: [{at, reserved, allocated,
 * largest_free_block, request?, segments: [{address, size, stream, pool,
 * expandable, blocks: [{offset, size, requested, state, line, merged,
 * allocated}]}], lines}]}]). Fragmentation as a picture: free space split
 * between allocated blocks, and at an OOM the failing request beside the
 * largest free block. Hover a block for its size, state and user line.
 *
 * Shared by the CLI's page, the VS Code webview and the Jupyter widget, and
 * loads like flame.js: classic script (globalThis.VramAllocMap) after
 * view.js, require(), or import. No network. Inlined into an HTML script element, so it never
 * contains the sequences that close one.
 */
(function (root, factory) {
  "use strict";
  const viewBase = (root && root.VramscopeView) || (typeof require === "function" ? require("./view.js") : null);
  if (!viewBase) throw new Error("vramscope allocmap.js: load view.js first (profiler/flame/web/files.json)");
  const api = factory(viewBase);
  if (typeof module === "object" && module !== null && module.exports) module.exports = api;
  if (root) root.VramAllocMap = api;
})(typeof globalThis !== "undefined" ? globalThis : this, function (viewBase) {
  "use strict";

  // Formatting, colours and the DOM helpers every view shares (view.js).
  const { formatBytes, parseColor, isDark, el, Listeners } = viewBase;

  // ---------------------------------------------------------------------------
  // Words (pure)

  const STATE_WORDS = {
    allocated: "allocated",
    pending_free: "freed, waiting for its stream",
    inactive_split: "free, split off inside a used segment",
    free: "free (the whole segment is unused)",
    mixed: "several small blocks, drawn together",
  };
  const MOMENT_WORDS = { snapshot: "At the snapshot", peak: "At the peak", oom: "At the out-of-memory error" };

  /** pickDefault chooses the map to show first: the OOM, else the peak, else the snapshot. */
  function pickDefault(maps) {
    for (const at of ["oom", "peak", "snapshot"]) {
      const m = (maps || []).find((x) => x.at === at);
      if (m) return m;
    }
    return null;
  }

  /** freeStats sums a map's free space: bytes and blocks outside allocations. */
  function freeStats(map) {
    let bytes = 0;
    let blocks = 0;
    for (const s of map.segments || []) {
      for (const b of s.blocks || []) {
        if (b.state === "inactive_split" || b.state === "free") {
          bytes += b.size;
          blocks += b.merged || 1;
        }
      }
    }
    return { bytes: bytes, blocks: blocks };
  }

  /**
   * summary is the map's headline in words; at an OOM it sets the failing
   * request beside the largest free block (fits is whether one could hold it).
   */
  function summary(map) {
    const free = freeStats(map);
    const out = {
      title: MOMENT_WORDS[map.at] || map.at,
      text: formatBytes(map.reserved) + " reserved in " + (map.segments || []).length + " segments, " +
        formatBytes(map.allocated) + " allocated, " + formatBytes(free.bytes) + " free in " + free.blocks +
        (free.blocks === 1 ? " block" : " blocks") + "; largest free block " + formatBytes(map.largest_free_block) +
        (map.omitted_segments ? " (the " + map.omitted_segments + " smallest segments are not drawn)" : ""),
    };
    if (map.request) {
      out.fits = map.largest_free_block >= map.request;
      out.request = "The failing request: " + formatBytes(map.request) + " on stream " + (map.stream || 0) +
        "; the largest free block: " + formatBytes(map.largest_free_block) +
        (out.fits ? "" : " (" + formatBytes(map.request - map.largest_free_block) + " short)") +
        (map.device_free ? "; the device had " + formatBytes(map.device_free) + " free outside the cache" : "");
    }
    return out;
  }

  // ---------------------------------------------------------------------------
  // Layout (pure): segments packed into rows on one scale

  const ROW_H = 22;
  const GAP = 6;
  const MIN_SEG_PX = 4;
  const MAX_ROWS = 16; // the scale shrinks until the segments fit in about this many rows

  /**
   * layout places every segment and block: {bytesPerPx, height, segs: [{x, y,
   * w, seg}], blocks: [{x, w, y, block, seg}]} with blocks in drawing order
   * (by row, then x). One scale for the whole map, so widths compare.
   */
  function layout(map, width) {
    const segs = map.segments || [];
    width = Math.max(40, width);
    let largest = 1;
    let total = 0;
    for (const s of segs) {
      largest = Math.max(largest, s.size);
      total += s.size;
    }
    let bytesPerPx = Math.max(largest / width, total / (width * MAX_ROWS));
    let placed = pack(segs, width, bytesPerPx);
    while (placed.rows > MAX_ROWS * 2 && bytesPerPx < total) {
      bytesPerPx *= 1.5; // many small segments: their minimum widths and gaps need more room
      placed = pack(segs, width, bytesPerPx);
    }
    const blocks = [];
    for (const p of placed.segs) {
      const s = p.seg;
      const scale = p.w / Math.max(1, s.size);
      for (const b of s.blocks || []) {
        blocks.push({ x: p.x + b.offset * scale, w: b.size * scale, y: p.y, block: b, seg: s });
      }
    }
    return { bytesPerPx: bytesPerPx, height: placed.rows * (ROW_H + GAP), segs: placed.segs, blocks: blocks };
  }

  function pack(segs, width, bytesPerPx) {
    const out = [];
    let x = 0;
    let row = 0;
    for (const s of segs) {
      const w = Math.min(width, Math.max(MIN_SEG_PX, s.size / bytesPerPx));
      if (x > 0 && x + w > width) {
        row++;
        x = 0;
      }
      out.push({ x: x, y: row * (ROW_H + GAP), w: w, seg: s });
      x += w + GAP;
    }
    return { segs: out, rows: segs.length ? row + 1 : 0 };
  }

  /** hitTest finds the block under (x, y), or null. Blocks narrower than a pixel count a pixel wide. */
  function hitTest(lay, x, y) {
    let best = null;
    for (const r of lay.blocks) {
      if (y < r.y || y >= r.y + ROW_H) continue;
      const x0 = r.x;
      const x1 = r.x + Math.max(r.w, 1);
      if (x >= x0 && x < x1 && (!best || r.w < best.w)) best = r; // the narrowest: small blocks beside big ones stay reachable
    }
    return best;
  }

  /** describe is a block's tooltip, line by line. */
  function describe(hit, map) {
    const b = hit.block;
    const s = hit.seg;
    const lines = [formatBytes(b.size) + " \u00b7 " + (STATE_WORDS[b.state] || b.state)];
    if (b.merged) lines.push(b.merged + " blocks" + (b.allocated ? ", " + formatBytes(b.allocated) + " of them allocated" : ""));
    if ((b.state === "allocated" || b.state === "pending_free") && b.requested) {
      const round = b.size - b.requested;
      lines.push("requested " + formatBytes(b.requested) + (round > 0 ? ", rounding " + formatBytes(round) : ""));
    }
    if (b.line && map.lines && map.lines[b.line - 1]) lines.push("allocated at " + map.lines[b.line - 1]);
    const kind = [];
    if (s.expandable) kind.push("expandable");
    if (s.pool && (s.pool[0] || s.pool[1])) kind.push("private pool " + s.pool.join(","));
    lines.push("segment 0x" + Number(s.address).toString(16) + " (" + formatBytes(s.size) +
      (kind.length ? ", " + kind.join(", ") : "") + ", stream " + (s.stream || 0) + ") + " + formatBytes(b.offset));
    return lines;
  }

  // ---------------------------------------------------------------------------
  // Colours: the same meaning in both themes

  const COLORS = {
    light: { allocated: "#3b7dd8", rounding: "#9cc0ee", pending_free: "#e39a2d", inactive_split: "#e5534b", free: "#d5dbe1", mixed: "#8c7bc8", edge: "#57606a", pool: "#8250df", expandable: "#1a7f37", request: "#cf222e" },
    dark: { allocated: "#4c8ee6", rounding: "#2a4f80", pending_free: "#c98a2a", inactive_split: "#d0453e", free: "#3a3f45", mixed: "#7b6bb8", edge: "#9aa4ae", pool: "#b58cf0", expandable: "#3fb950", request: "#f85149" },
  };

  // ---------------------------------------------------------------------------
  // DOM

  class AllocMapView {
    constructor(container, devices, options) {
      this.options = options || {};
      this.devices = (devices || []).filter((d) => d && Array.isArray(d.maps) && d.maps.length);
      this.root = el("div", "vm-root vc-view", container);
      this.root.tabIndex = 0;
      this.bar = el("div", "vm-toolbar", this.root);
      this.head = el("div", "vm-summary", this.root);
      this.oomBox = el("div", "vm-oom", this.root);
      this.canvas = el("canvas", "vm-canvas", this.root);
      this.legend = el("div", "vm-legend", this.root);
      this.tip = el("div", "vc-tooltip vm-tooltip", this.root);
      this.tip.hidden = true;
      this.listeners = new Listeners();
      if (!this.devices.length) {
        el("div", "vm-empty", this.head, "No allocator state in this snapshot.");
        return;
      }
      this.device = this.devices.find((d) => d.device === this.options.device) || this.devices[0];
      this.map = pickDefault(this.device.maps);
      this.buildToolbar();
      this.on(this.canvas, "mousemove", (e) => this.hover(e));
      this.on(this.canvas, "mouseleave", () => this.setHover(null));
      this.listeners.onResize(this.root, () => this.draw());
      this.watchTheme();
      this.show(this.map.at);
    }

    // watchTheme redraws when the theme changes: the OS scheme, or VS Code's
    // body classes and style variables.
    watchTheme() {
      const redraw = () => this.redraw();
      if (typeof matchMedia === "function") this.on(matchMedia("(prefers-color-scheme: dark)"), "change", redraw);
      this.listeners.onTheme(redraw);
    }

    redraw() {
      if (!this.map) return;
      this.drawLegend();
      this.draw();
    }

    on(target, type, fn) {
      this.listeners.on(target, type, fn);
    }

    buildToolbar() {
      this.buttons = {};
      for (const d of this.devices.length > 1 ? this.devices : []) {
        const b = el("button", "vm-btn vc-button vm-device", this.bar, "GPU " + d.device);
        this.on(b, "click", () => this.show(this.map.at, d.device));
      }
      for (const m of this.device.maps) {
        const b = el("button", "vm-btn vc-button", this.bar, MOMENT_WORDS[m.at] || m.at);
        b.dataset.at = m.at;
        this.buttons[m.at] = b;
        this.on(b, "click", () => this.show(m.at));
      }
    }

    /** show draws the map at a moment ("snapshot", "peak", "oom") of a device. */
    show(at, device) {
      if (!this.device) return null; // nothing to show: the snapshot has no segments
      if (device !== undefined) this.device = this.devices.find((d) => d.device === device) || this.device;
      this.map = this.device.maps.find((m) => m.at === at) || pickDefault(this.device.maps);
      for (const [k, b] of Object.entries(this.buttons)) b.classList.toggle("vm-selected", k === this.map.at);
      const s = summary(this.map);
      this.head.textContent = s.title + (this.map.reconstructed ? " (replayed back from the snapshot)" : "") + ": " + s.text;
      this.drawOOM(s);
      this.drawLegend();
      this.draw();
      return this.map;
    }

    // drawOOM sets the failing request and the largest free block side by side, to scale.
    drawOOM(s) {
      const m = this.map;
      this.oomBox.textContent = "";
      this.oomBox.hidden = !m.request;
      if (!m.request) return;
      el("div", "vm-oom-text", this.oomBox, s.request);
      const scale = Math.max(m.request, m.largest_free_block, 1);
      for (const [cls, label, bytes] of [["vm-bar-request", "request", m.request], ["vm-bar-largest", "largest free block", m.largest_free_block]]) {
        const row = el("div", "vm-bar-row " + cls, this.oomBox);
        el("span", "vm-bar-label", row, label + " " + formatBytes(bytes));
        const bar = el("span", "vm-bar", el("span", "vm-track", row));
        bar.style.width = (100 * bytes / scale).toFixed(2) + "%";
        row.dataset.bytes = String(bytes);
      }
    }

    drawLegend() {
      this.legend.textContent = "";
      const c = this.colors();
      for (const [k, label] of [["allocated", "allocated"], ["rounding", "rounding (allocated, not requested)"], ["pending_free", "pending free"],
        ["inactive_split", "free, split"], ["free", "free segment"], ["mixed", "merged small blocks"]]) {
        const key = el("span", "vm-key", this.legend);
        el("span", "vm-swatch", key).style.background = c[k];
        el("span", "", key, label);
      }
      const pool = el("span", "vm-key", this.legend);
      el("span", "vm-swatch vm-swatch-outline", pool).style.borderColor = c.pool;
      el("span", "", pool, "private pool (CUDA graphs)");
      const exp = el("span", "vm-key", this.legend);
      el("span", "vm-swatch vm-swatch-outline vm-dashed", exp).style.borderColor = c.expandable;
      el("span", "", exp, "expandable segment");
    }

    colors() {
      const bg = getComputedStyle(this.root).backgroundColor;
      return isDark(parseColor(bg)) ? COLORS.dark : COLORS.light;
    }

    draw() {
      if (!this.map) return;
      const w = Math.max(40, this.canvas.clientWidth || this.root.clientWidth || 600);
      this.lay = layout(this.map, w);
      const h = Math.max(ROW_H, this.lay.height);
      const dpr = (typeof window !== "undefined" && window.devicePixelRatio) || 1;
      this.canvas.style.height = h + "px";
      this.canvas.width = Math.round(w * dpr);
      this.canvas.height = Math.round(h * dpr);
      const ctx = this.canvas.getContext("2d");
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.clearRect(0, 0, w, h);
      const c = this.colors();
      for (const r of this.lay.blocks) this.paintBlock(ctx, r, c);
      for (const p of this.lay.segs) this.paintSegment(ctx, p, c);
      this.root.dataset.blocks = String(this.lay.blocks.length);
      this.root.dataset.at = this.map.at;
    }

    paintBlock(ctx, r, c) {
      const b = r.block;
      const w = Math.max(r.w, 0.5);
      ctx.fillStyle = c[b.state] || c.mixed;
      ctx.fillRect(r.x, r.y, w, ROW_H);
      if ((b.state === "allocated" || b.state === "pending_free") && b.requested && b.requested < b.size) {
        const rw = w * (1 - b.requested / b.size); // the rounding, at the block's end
        ctx.fillStyle = c.rounding;
        ctx.fillRect(r.x + w - rw, r.y, rw, ROW_H);
      }
      if (w >= 3) {
        ctx.fillStyle = "rgba(0,0,0,0.25)"; // block edges, where there is room for them
        ctx.fillRect(r.x + w - 0.5, r.y, 0.5, ROW_H);
      }
    }

    paintSegment(ctx, p, c) {
      const s = p.seg;
      const pool = s.pool && (s.pool[0] || s.pool[1]);
      ctx.lineWidth = pool || s.expandable ? 2 : 1;
      ctx.strokeStyle = pool ? c.pool : s.expandable ? c.expandable : c.edge;
      ctx.setLineDash(s.expandable ? [4, 3] : []);
      ctx.strokeRect(p.x + 0.5, p.y + 0.5, Math.max(p.w - 1, 1), ROW_H - 1);
      ctx.setLineDash([]);
    }

    hover(e) {
      const rect = this.canvas.getBoundingClientRect();
      const hit = this.lay ? hitTest(this.lay, e.clientX - rect.left, e.clientY - rect.top) : null;
      this.setHover(hit, e.clientX - rect.left, e.clientY - rect.top);
    }

    setHover(hit, x, y) {
      this.hit = hit;
      this.tip.hidden = !hit;
      if (!hit) return;
      this.tip.textContent = "";
      describe(hit, this.map).forEach((t, i) => el("div", i === 0 ? "vm-tt-head" : "vm-tt-line", this.tip, t));
      const maxX = Math.max(0, this.root.clientWidth - this.tip.offsetWidth - 4);
      this.tip.style.left = Math.min(x + 12, maxX) + "px";
      this.tip.style.top = this.canvas.offsetTop + y + 14 + "px";
    }

    destroy() {
      this.listeners.clear();
      this.root.remove();
    }
  }

  /**
   * render draws the allocator maps into container and returns a controller:
   * {show(at, device), current(), redraw(), hoverAt(x, y), destroy()}. options.device
   * picks the device shown first (default: the first with maps).
   */
  function render(container, maps, options) {
    const view = new AllocMapView(container, maps, options);
    return {
      show: (at, device) => view.show(at, device),
      current: () => view.map,
      redraw: () => view.redraw(),
      hoverAt: (x, y) => {
        view.setHover(view.lay ? hitTest(view.lay, x, y) : null, x, y);
        return view.hit ? describe(view.hit, view.map) : null;
      },
      destroy: () => view.destroy(),
    };
  }

  return {
    render: render,
    layout: layout,
    hitTest: hitTest,
    describe: describe,
    summary: summary,
    freeStats: freeStats,
    pickDefault: pickDefault,
    formatBytes: formatBytes,
    ROW_H: ROW_H,
  };
});
