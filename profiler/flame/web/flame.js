/*
 * vramscope flame graph: the one renderer shared by the CLI's standalone page,
 * the VS Code webview and the Jupyter widget. It draws the JSON written by
 * profiler/flame (Tree{title, weight, unit, root}, nodes {n, f, l, t, v, s, k, c})
 * as an icicle on a <canvas>: root on top, children below, width proportional
 * to bytes.
 *
 * It loads three ways: as a classic script (defines globalThis.VramscopeFlame)
 * after view.js and palette.js, through require(), and through import from an ES module
 * (Node hands the CommonJS exports over as the default export). It needs no
 * network.
 *
 * The CLI inlines this file into an HTML script element, so it must never
 * contain the character sequences that close a script element or open an
 * HTML comment; html_test.go checks that.
 *
 * Speed: layout walks the JSON tree itself and skips any subtree narrower than
 * half a pixel, so a 100k-frame tree costs only its visible frames; paint
 * batches rectangles by color. Nothing indexes the whole tree up front.
 */
(function (root, factory) {
  "use strict";
  const viewBase = (root && root.VramscopeView) || (typeof require === "function" ? require("./view.js") : null);
  const palette = (root && root.VramscopePalette) || (typeof require === "function" ? require("./palette.js") : null);
  if (!viewBase || !palette) throw new Error("vramscope flame.js: load view.js and palette.js first (profiler/flame/web/files.json)");
  const api = factory(viewBase, palette);
  if (typeof module === "object" && module !== null && module.exports) module.exports = api;
  if (root) root.VramscopeFlame = api;
})(typeof globalThis !== "undefined" ? globalThis : this, function (viewBase, palette) {
  "use strict";

  // Formatting, colours and the DOM helpers every view shares (view.js);
  // the frames' fills (palette.js).
  const { formatBytes, formatPercent, formatCount, parseColor, isDark, el, mark, measure, Listeners, Redraw } = viewBase;
  const { SHADES, shadePalette, buildPalette } = palette;

  // ---------------------------------------------------------------------------
  // Frame kinds (pure)
  //
  // The engine decides whether a frame is the user's code (profiler.KindOfFile)
  // and puts the answer on the node ("t": "user" or "synthetic"; a library's
  // frame, the commonest kind, says none); the palette has one colour for
  // each. Nothing here looks at the file.

  const KIND_NAMES = ["user", "library", "synthetic"]; // palette.js's fills, in this order
  const KIND_LIBRARY = 1;
  const KIND_SYNTHETIC = 2;
  const KIND_CODES = new Map(KIND_NAMES.map((name, code) => [name, code]));

  function kindCode(node) {
    const k = KIND_CODES.get(node.t);
    return k === undefined ? KIND_LIBRARY : k;
  }

  /**
   * frameLabel is the text drawn for a frame: the engine's label where it has
   * one ("GPT2Attention.forward (model.transformer.h.*.attn)", "train:31"),
   * else the function name. Search, hover hooks and clicks keep the raw name.
   */
  function frameLabel(node) {
    return String(node.d || node.n || "");
  }

  /** frameKind is the kind a node is drawn as: "user", "library" or "synthetic". */
  function frameKind(node) {
    return KIND_NAMES[kindCode(node || {})];
  }

  // FNV-1a: a stable hash so a function keeps its shade across renders.
  function hashString(s) {
    let h = 0x811c9dc5;
    for (let i = 0; i < s.length; i++) {
      h ^= s.charCodeAt(i);
      h = Math.imul(h, 0x01000193);
    }
    return h >>> 0;
  }

  // ---------------------------------------------------------------------------
  // Layout (pure)
  //
  // Layout works on the JSON object tree directly and culls as it goes: a
  // frame narrower than minPx is skipped with its whole subtree (its
  // descendants are narrower still). The first paint of a 100k-frame tree so
  // touches only the ~10k frames that are visible; building an index of every
  // frame first would cost more than the paint itself.

  /** valueOf is a node's total bytes; bad values draw as nothing. */
  function valueOf(node) {
    const v = +node.v;
    return v > 0 ? v : 0;
  }

  /** rootOf accepts a Tree ({title, root}) or a bare root node. */
  function rootOf(tree) {
    const root = tree && typeof tree === "object" && tree.root ? tree.root : tree;
    if (!root || typeof root !== "object") throw new Error("vramscope flame: no root node");
    return root;
  }

  function newLayout() {
    return { count: 0, ancestors: 0, maxDepth: 0, nodes: [], parent: [], depth: [], x: [], w: [] };
  }

  function emit(out, node, parent, depth, x, w) {
    out.nodes.push(node);
    out.parent.push(parent);
    out.depth.push(depth);
    out.x.push(x);
    out.w.push(w);
    if (depth > out.maxDepth) out.maxDepth = depth;
  }

  /**
   * layout places the frames visible when zoomed into the last node of
   * zoomPath (the nodes from the root down to the zoom node) across width
   * pixels. The zoom node's ancestors (the rows above it) span the full width;
   * below it widths are value * width / zoomValue, children packed left to
   * right from their parent's start and the parent's self bytes on the right.
   * Output, parallel arrays in preorder with the ancestors first:
   * {count, ancestors, maxDepth, nodes, parent (output index, -1 for the
   * root), depth (row), x, w}. Within a row, x increases.
   */
  function layout(zoomPath, width, minPx, out) {
    if (minPx === undefined) minPx = 0.5;
    if (!Array.isArray(zoomPath)) zoomPath = [rootOf(zoomPath)];
    out = out || newLayout();
    for (const key of ["nodes", "parent", "depth", "x", "w"]) out[key].length = 0;
    out.maxDepth = 0;
    const za = zoomPath.length - 1;
    for (let d = 0; d < za; d++) emit(out, zoomPath[d], d - 1, d, 0, width);
    out.ancestors = za;
    const zoom = zoomPath[za];
    const zv = valueOf(zoom);
    const scale = zv > 0 ? width / zv : 0;
    // Explicit stacks rather than recursion: real stacks can be hundreds deep.
    const sNode = [zoom];
    const sX = [0];
    const sParent = [za - 1];
    const sDepth = [za];
    while (sNode.length) {
      const node = sNode.pop();
      const x = sX.pop();
      const d = sDepth.pop();
      const k = out.nodes.length;
      emit(out, node, sParent.pop(), d, x, valueOf(node) * scale);
      const c = node.c;
      if (!c || !c.length) continue;
      const base = sNode.length;
      let cx = x;
      for (let j = 0; j < c.length; j++) {
        const cw = valueOf(c[j]) * scale;
        if (cw >= minPx) {
          sNode.push(c[j]);
          sX.push(cx);
          sParent.push(k);
          sDepth.push(d + 1);
        }
        cx += cw;
      }
      // Reverse what was pushed so the first child pops first (preorder).
      for (let i = base, j = sNode.length - 1; i < j; i++, j--) {
        swap(sNode, i, j);
        swap(sX, i, j);
        swap(sParent, i, j);
      }
    }
    out.count = out.nodes.length;
    return out;
  }

  function swap(a, i, j) {
    const t = a[i];
    a[i] = a[j];
    a[j] = t;
  }

  /** hitTest finds the output index of the frame at pixel column px of row, or -1. */
  function hitTest(out, px, row) {
    for (let k = 0; k < out.count; k++) {
      if (out.depth[k] === row && px >= out.x[k] && px < out.x[k] + out.w[k]) return k;
    }
    return -1;
  }

  /**
   * stepFrame is where a key moves the keyboard's frame from output index k:
   * ArrowUp to the parent, ArrowDown to the first child, ArrowLeft and
   * ArrowRight to the neighbour on the same row; from none (k < 0), the
   * zoomed frame. k itself where there is nowhere to go.
   */
  function stepFrame(out, k, key) {
    if (k < 0 || k >= out.count) return out.count ? out.ancestors : -1;
    if (key === "ArrowUp") return out.parent[k] >= 0 ? out.parent[k] : k;
    if (key === "ArrowDown") return k + 1 < out.count && out.parent[k + 1] === k ? k + 1 : k;
    const dir = key === "ArrowRight" ? 1 : key === "ArrowLeft" ? -1 : 0;
    let best = k;
    for (let j = 0; dir && j < out.count; j++) {
      const dx = (out.x[j] - out.x[k]) * dir;
      if (out.depth[j] === out.depth[k] && dx > 0 && (best === k || dx < (out.x[best] - out.x[k]) * dir)) best = j;
    }
    return best;
  }

  /** pathTo lists the nodes from the root down to output index k. */
  function pathTo(out, k) {
    const path = [];
    for (let p = k; p >= 0; p = out.parent[p]) path.push(out.nodes[p]);
    return path.reverse();
  }

  /** frameOf is the {name, file, line} an editor needs to open a node. */
  function frameOf(node) {
    return { name: String(node.n || ""), file: node.f || "", line: node.l || 0 };
  }

  function segmentMatches(node, seg) {
    if (typeof seg === "string") return node.n === seg;
    if (!seg || typeof seg !== "object") return false;
    const name = seg.name !== undefined ? seg.name : seg.n;
    const file = seg.file !== undefined ? seg.file : seg.f;
    const line = seg.line !== undefined ? seg.line : seg.l;
    if (name !== undefined && node.n !== name) return false;
    if (file !== undefined && (node.f || "") !== file) return false;
    if (line !== undefined && (node.l || 0) !== line) return false;
    return true;
  }

  /**
   * findPath resolves a node path (an array of names or {name, file, line}
   * frames from the root's children down; a leading root name is allowed)
   * to the nodes from the root to its end, or null. The first matching child
   * is taken at each step.
   */
  function findPath(tree, path) {
    const root = rootOf(tree);
    if (typeof path === "string") path = [path];
    if (!Array.isArray(path)) return null;
    const nodes = [root];
    let k = path.length && segmentMatches(root, path[0]) ? 1 : 0;
    for (; k < path.length; k++) {
      const c = nodes[nodes.length - 1].c || [];
      const next = c.find((child) => segmentMatches(child, path[k]));
      if (!next) return null;
      nodes.push(next);
    }
    return nodes;
  }

  /** countNodes counts the frames of a tree, root included. */
  function countNodes(tree) {
    let n = 0;
    const stack = [rootOf(tree)];
    while (stack.length) {
      const c = stack.pop().c;
      n++;
      if (c) for (let i = 0; i < c.length; i++) stack.push(c[i]);
    }
    return n;
  }

  // ---------------------------------------------------------------------------
  // Search (pure)

  /**
   * makeMatcher compiles a search box query. "/re/flags" is a regular
   * expression; anything else a case-insensitive substring. Returns null for
   * an empty query, {error} for a bad regex, else {regex, test(string)}.
   */
  function makeMatcher(query) {
    const q = String(query === undefined || query === null ? "" : query).trim();
    if (!q) return null;
    const m = /^\/(.+)\/([a-z]*)$/.exec(q);
    if (m) {
      try {
        // g and y make test() stateful, which would skip matches.
        const re = new RegExp(m[1], m[2].replace(/[gy]/g, ""));
        return { regex: true, test: (s) => re.test(s) };
      } catch (e) {
        return { error: String(e && e.message ? e.message : e) };
      }
    }
    const needle = q.toLowerCase();
    return { regex: false, test: (s) => s.toLowerCase().includes(needle) };
  }

  /** matchFrame applies a matcher to a node's name and file. */
  function matchFrame(matcher, node) {
    if (matcher.node) return matcher.node(node); // selectFrames: a predicate on the node
    return matcher.test(String(node.n || "")) || (!!node.d && matcher.test(node.d)) || (!!node.f && matcher.test(node.f));
  }

  /**
   * searchTree finds the matching nodes: {matched (a Set of nodes), count,
   * value, share}. value counts each byte once: a match inside an already
   * matched subtree adds nothing, so share stays <= 1.
   */
  function searchTree(tree, matcher) {
    const root = rootOf(tree);
    const matched = new Set();
    let value = 0;
    const stack = [root];
    const covered = [false];
    while (stack.length) {
      const node = stack.pop();
      let cov = covered.pop();
      if (matchFrame(matcher, node)) {
        matched.add(node);
        if (!cov) value += valueOf(node);
        cov = true;
      }
      const c = node.c;
      if (c) {
        for (let i = 0; i < c.length; i++) {
          stack.push(c[i]);
          covered.push(cov);
        }
      }
    }
    const total = valueOf(root);
    return { matched: matched, count: matched.size, value: value, share: total > 0 ? value / total : 0 };
  }

  // ---------------------------------------------------------------------------
  // Labels (pure)

  /**
   * fitLabel truncates text so it fits avail pixels, given its full width and
   * the ellipsis width. Characters are assumed equally wide within one label,
   * which is exact for monospace editor fonts and close otherwise.
   */
  function fitLabel(text, textWidth, avail, ellipsisWidth) {
    if (textWidth <= avail) return text;
    if (!text.length || avail <= ellipsisWidth) return "";
    const per = textWidth / text.length;
    const k = Math.floor((avail - ellipsisWidth) / per);
    return k >= 2 ? text.slice(0, k) + "\u2026" : "";
  }

  // ---------------------------------------------------------------------------
  // DOM rendering

  const MIN_PX = 0.5; // narrower subtrees are not drawn
  const DIM_ALPHA = 0.32;
  const NORMAL_KEYS = 3 * SHADES;
  const KEY_HIGHLIGHT = 2 * NORMAL_KEYS;
  const NKEYS = KEY_HIGHLIGHT + 1;
  const KEY_HIDDEN = 255;

  function cssVar(style, name) {
    return style.getPropertyValue(name).trim();
  }

  /** FlameView owns the DOM of one rendered graph. */
  class FlameView {
    constructor(container, tree, options) {
      this.container = container;
      this.tree = tree;
      this.root = rootOf(tree);
      this.total = valueOf(this.root);
      this.options = options || {};
      this.zoomPath = [this.root];
      this.hover = -1; // output index in this.lay
      this.search = null; // searchTree's result, or null
      this.query = "";
      this.lay = newLayout();
      this.layoutKey = "";
      this.keys = new Uint8Array(0);
      this.order = new Int32Array(0);
      this.textWidths = new Map();
      this.shadeCache = new Map();
      this.nextDraw = new Redraw(() => this.draw());
      this.searchTimer = 0;
      this.listeners = new Listeners();
      this.buildDom();
      this.readTheme();
      this.attach();
    }

    get zoom() {
      return this.zoomPath[this.zoomPath.length - 1];
    }

    buildDom() {
      const root = el("div", "vf-root vc-view");
      root.tabIndex = 0;
      const bar = el("div", "vf-toolbar", root);
      this.resetBtn = el("button", "vf-reset", bar);
      this.resetBtn.type = "button";
      this.resetBtn.textContent = "Reset zoom";
      this.resetBtn.title = "Show the whole graph (Esc; on the graph, the arrows pick a frame and Enter zooms to it)";
      this.crumbs = el("nav", "vf-crumbs", bar);
      this.crumbs.setAttribute("aria-label", "Zoom path");
      this.input = el("input", "vf-search", bar);
      this.input.type = "search";
      this.input.placeholder = "Search name or file, /regex/";
      this.input.setAttribute("aria-label", "Search frames");
      this.summary = el("span", "vf-summary", bar);
      this.summary.setAttribute("aria-live", "polite");
      this.viewport = el("div", "vf-viewport", root);
      this.canvas = el("canvas", "vf-canvas", this.viewport);
      this.canvas.setAttribute("role", "img");
      this.canvas.setAttribute("aria-label", "Flame graph of GPU memory by call stack");
      this.spacer = el("div", "vf-spacer", this.viewport);
      this.tooltip = el("div", "vf-tooltip vc-tooltip", root);
      this.tooltip.hidden = true;
      this.el = root;
      // An auto-height host (a notebook output cell) would let the canvas size
      // itself; the viewport gets a fixed height there instead (see draw).
      this.fixedHeight = !!this.options.height || !(this.container.clientHeight > 0);
      if (this.fixedHeight) root.classList.add("vf-auto-height");
      this.container.appendChild(root);
      this.ctx = this.canvas.getContext("2d");
    }

    readTheme() {
      const style = getComputedStyle(this.el);
      const o = this.options.colors || {};
      const pick = (key, v) => o[key] || cssVar(style, v);
      this.bg = pick("background", "--vf-bg") || "#ffffff";
      this.fg = pick("foreground", "--vf-fg") || "#1b1b1b";
      const dark = isDark(parseColor(this.normalizeColor(this.bg)));
      this.palette = buildPalette(dark, {
        user: this.normalizeColor(pick("user", "--vf-user")),
        library: this.normalizeColor(pick("library", "--vf-library")),
        synthetic: this.normalizeColor(pick("synthetic", "--vf-synthetic")),
        highlight: pick("highlight", "--vf-highlight"),
        text: pick("text", "--vf-frame-text"),
        highlightText: pick("highlightText", "--vf-highlight-text"),
      });
      const size = parseFloat(o.fontSize || cssVar(style, "--vf-font-size")) || 12;
      const family = o.fontFamily || cssVar(style, "--vf-font-family") || "monospace";
      const font = size + "px " + family;
      if (font !== this.font) this.textWidths.clear();
      this.font = font;
      this.rowH = Math.max(16, Math.round(size * 1.55));
    }

    // Canvas normalizes any CSS color (names, hsl(), color-mix results) to
    // #rrggbb or rgba(), which parseColor reads.
    normalizeColor(css) {
      if (!css) return "";
      const ctx = this.ctx;
      ctx.fillStyle = "#000000";
      ctx.fillStyle = css;
      return String(ctx.fillStyle);
    }

    on(target, type, fn, opts) {
      this.listeners.on(target, type, fn, opts);
    }

    attach() {
      this.on(this.canvas, "mousemove", (e) => this.onMove(e));
      this.on(this.canvas, "mouseleave", () => this.setHover(-1, null));
      this.on(this.canvas, "click", (e) => this.onClick(e));
      this.on(this.viewport, "scroll", () => this.schedule(), { passive: true });
      this.on(this.resetBtn, "click", () => this.setZoom([this.root]));
      this.on(this.input, "input", () => this.onSearchInput());
      this.on(this.el, "keydown", (e) => this.onKey(e));
      this.on(this.crumbs, "click", (e) => {
        const depth = e.target && e.target.dataset ? e.target.dataset.depth : undefined;
        if (depth !== undefined) this.setZoom(this.zoomPath.slice(0, Number(depth) + 1));
      });
      this.listeners.onResize(this.viewport, () => this.schedule());
      this.on(window, "resize", () => this.schedule());
      this.watchPixelRatio();
      this.listeners.onTheme(() => this.retheme());
      this.updateCrumbs();
    }

    // Moving the window to a screen of another pixel ratio need not resize
    // anything, so watch the ratio itself; the query is re-armed on each change.
    watchPixelRatio() {
      if (typeof matchMedia !== "function") return;
      const mq = matchMedia("(resolution: " + (window.devicePixelRatio || 1) + "dppx)");
      const fn = () => {
        mq.removeEventListener("change", fn);
        this.schedule();
        if (!this.destroyed) this.watchPixelRatio();
      };
      mq.addEventListener("change", fn);
      this.ratioWatch = [mq, fn];
    }

    retheme() {
      this.readTheme();
      this.layoutKey = ""; // the row height may have changed with the font
      this.schedule();
    }

    schedule() {
      if (!this.destroyed) this.nextDraw.schedule();
    }

    /** draw lays out if zoom or width changed, sizes the canvas and paints the visible rows. */
    draw() {
      if (this.destroyed) return;
      const cssW = this.viewport.clientWidth;
      if (!(cssW > 0)) return;
      const key = this.zoomPath.length + ":" + cssW;
      if (key !== this.layoutKey || this.layoutZoom !== this.zoom) {
        layout(this.zoomPath, cssW, MIN_PX, this.lay);
        this.layoutKey = key;
        this.layoutZoom = this.zoom;
        this.hover = -1; // output indices changed
        this.tooltip.hidden = true;
        this.contentH = (this.lay.maxDepth + 1) * this.rowH;
        if (this.fixedHeight && !this.heightSet) {
          const h = this.options.height || Math.min(Math.max(this.contentH, 120), 560);
          this.viewport.style.height = h + "px";
          this.heightSet = true;
        }
      }
      const cssH = this.viewport.clientHeight;
      if (!(cssH > 0)) return;
      this.spacer.style.height = Math.max(0, this.contentH - cssH) + "px";
      const dpr = (typeof window !== "undefined" && window.devicePixelRatio) || 1;
      this.sizeCanvas(cssW, cssH, dpr);
      this.paint(cssW, cssH, dpr);
    }

    sizeCanvas(cssW, cssH, dpr) {
      const w = Math.round(cssW * dpr);
      const h = Math.round(cssH * dpr);
      if (this.canvas.width !== w || this.canvas.height !== h) {
        this.canvas.width = w;
        this.canvas.height = h;
        this.canvas.style.width = cssW + "px";
        this.canvas.style.height = cssH + "px";
      }
    }

    paint(cssW, cssH, dpr) {
      const ctx = this.ctx;
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.globalAlpha = 1;
      ctx.fillStyle = this.bg;
      ctx.fillRect(0, 0, cssW, cssH);
      if (!(this.total > 0)) {
        this.paintEmpty(cssW);
        return;
      }
      const top = this.viewport.scrollTop;
      this.sortByColor(Math.floor(top / this.rowH), Math.ceil((top + cssH) / this.rowH));
      this.paintRects(top);
      this.paintLabels(top);
      this.paintHover(top);
    }

    paintEmpty(cssW) {
      const ctx = this.ctx;
      ctx.font = this.font;
      ctx.fillStyle = this.fg;
      ctx.textBaseline = "middle";
      ctx.textAlign = "center";
      ctx.fillText("No memory recorded in this profile", cssW / 2, this.rowH);
      ctx.textAlign = "left";
    }

    // normalKey is a frame's undimmed color bucket: its kind (user, library,
    // synthetic; the top row, the total, always synthetic) times a shade
    // hashed from its name, cached per name.
    normalKey(node, k) {
      const kind = this.lay.parent[k] < 0 ? KIND_SYNTHETIC : kindCode(node);
      const name = String(node.n || "");
      let shade = this.shadeCache.get(name);
      if (shade === undefined) {
        shade = hashString(name) % SHADES;
        this.shadeCache.set(name, shade);
      }
      return kind * SHADES + shade;
    }

    // colorKey picks a fill bucket: ancestors of the zoom node and search
    // misses are dimmed, search hits highlighted, everything else normal.
    colorKey(k) {
      const node = this.lay.nodes[k];
      if (this.search && this.search.matched.has(node)) return KEY_HIGHLIGHT;
      const normal = this.normalKey(node, k);
      return this.search || k < this.lay.ancestors ? NORMAL_KEYS + normal : normal;
    }

    // Counting sort of the visible rects by color, so each color is one path
    // and one fill call instead of a fillStyle change per rect.
    sortByColor(r0, r1) {
      const L = this.lay;
      if (this.keys.length < L.count) {
        this.keys = new Uint8Array(L.count);
        this.order = new Int32Array(L.count);
      }
      const starts = new Int32Array(NKEYS + 1);
      for (let k = 0; k < L.count; k++) {
        const d = L.depth[k];
        if (d < r0 || d > r1) {
          this.keys[k] = KEY_HIDDEN;
          continue;
        }
        const key = this.colorKey(k);
        this.keys[k] = key;
        starts[key + 1]++;
      }
      for (let c = 0; c < NKEYS; c++) starts[c + 1] += starts[c];
      this.keyStarts = starts.slice();
      for (let k = 0; k < L.count; k++) {
        const key = this.keys[k];
        if (key !== KEY_HIDDEN) this.order[starts[key]++] = k;
      }
    }

    fillFor(key) {
      if (key === KEY_HIGHLIGHT) return this.palette.highlight;
      const normal = key % NORMAL_KEYS;
      return this.palette.fills[Math.floor(normal / SHADES)][normal % SHADES];
    }

    paintRects(top) {
      const ctx = this.ctx;
      const L = this.lay;
      const rowH = this.rowH;
      for (let key = 0; key < NKEYS; key++) {
        const a = this.keyStarts[key];
        const b = this.keyStarts[key + 1];
        if (a === b) continue;
        ctx.globalAlpha = key >= NORMAL_KEYS && key !== KEY_HIGHLIGHT ? DIM_ALPHA : 1;
        ctx.fillStyle = this.fillFor(key);
        ctx.beginPath();
        for (let j = a; j < b; j++) {
          const k = this.order[j];
          const x0 = Math.round(L.x[k]);
          const x1 = Math.round(L.x[k] + L.w[k]);
          // A 1px gap separates siblings once they are wide enough to spare it.
          const w = Math.max(1, x1 - x0 - (x1 - x0 >= 3 ? 1 : 0));
          ctx.rect(x0, L.depth[k] * rowH - top, w, rowH - 1);
        }
        ctx.fill();
      }
      ctx.globalAlpha = 1;
    }

    labelOf(k) {
      const name = frameLabel(this.lay.nodes[k]);
      return this.lay.parent[k] < 0 ? name + " \u00b7 " + formatBytes(this.total) : name;
    }

    textWidth(s) {
      let w = this.textWidths.get(s);
      if (w === undefined) {
        w = this.ctx.measureText(s).width;
        this.textWidths.set(s, w);
      }
      return w;
    }

    paintLabels(top) {
      const ctx = this.ctx;
      const L = this.lay;
      ctx.font = this.font;
      ctx.textBaseline = "middle";
      const ell = this.textWidth("\u2026");
      const minW = ell * 3 + 8;
      let current = "";
      for (let k = 0; k < L.count; k++) {
        const key = this.keys[k];
        if (key === KEY_HIDDEN || L.w[k] < minW) continue;
        const text = this.labelOf(k);
        const label = fitLabel(text, this.textWidth(text), L.w[k] - 8, ell);
        if (!label) continue;
        const dim = key >= NORMAL_KEYS && key !== KEY_HIGHLIGHT;
        const color = dim ? this.fg : key === KEY_HIGHLIGHT ? this.palette.highlightText : this.palette.text;
        if (color !== current) {
          ctx.fillStyle = color;
          current = color;
        }
        ctx.globalAlpha = dim ? 0.65 : 1;
        ctx.fillText(label, Math.round(L.x[k]) + 4, L.depth[k] * this.rowH - top + (this.rowH - 1) / 2);
      }
      ctx.globalAlpha = 1;
    }

    paintHover(top) {
      const k = this.hover;
      if (k < 0 || k >= this.lay.count) return;
      const L = this.lay;
      const ctx = this.ctx;
      ctx.strokeStyle = this.fg;
      ctx.lineWidth = 1.5;
      ctx.strokeRect(Math.round(L.x[k]) + 0.75, L.depth[k] * this.rowH - top + 0.75, Math.max(1, Math.round(L.w[k]) - 2.5), this.rowH - 2.5);
    }

    indexAt(clientX, clientY) {
      const r = this.canvas.getBoundingClientRect();
      const py = clientY - r.top;
      if (py < 0 || py >= r.height) return -1;
      return hitTest(this.lay, clientX - r.left, Math.floor((py + this.viewport.scrollTop) / this.rowH));
    }

    onMove(e) {
      this.setHover(this.indexAt(e.clientX, e.clientY), e);
    }

    setHover(k, e) {
      if (k !== this.hover) {
        this.hover = k;
        this.canvas.style.cursor = k >= 0 ? "pointer" : "default";
        if (k >= 0) this.fillTooltip(k);
        this.schedule();
      }
      this.tooltip.hidden = k < 0;
      if (k >= 0 && e) this.placeTooltip(e.clientX, e.clientY);
    }

    fillTooltip(k) {
      const L = this.lay;
      const node = L.nodes[k];
      const t = this.tooltip;
      t.textContent = "";
      // textContent only: frame names come from the profiled program.
      const line = (cls, text) => {
        el("div", cls, t).textContent = text;
      };
      line("vf-tt-name", frameLabel(node));
      if (node.d && node.q !== node.n) line("vf-tt-func", "function " + String(node.n || ""));
      if (node.m) line("vf-tt-module", "module " + node.m);
      if (node.f) line("vf-tt-file", node.f + (node.l ? ":" + node.l : ""));
      const v = valueOf(node);
      line("vf-tt-bytes", formatBytes(v) + " \u00b7 " + formatPercent(v, this.total) + " of total");
      const zoom = this.zoom;
      if (zoom !== this.root && k > L.ancestors) {
        line("vf-tt-rel", formatPercent(v, valueOf(zoom)) + " of zoomed frame " + String(zoom.n || ""));
      }
      const p = L.parent[k];
      if (p >= 0) line("vf-tt-rel", formatPercent(v, valueOf(L.nodes[p])) + " of parent " + String(L.nodes[p].n || ""));
      if (node.s) line("vf-tt-self", "self " + formatBytes(node.s));
      if (node.k) line("vf-tt-count", formatCount(node.k) + (node.k === 1 ? " allocation" : " allocations"));
      if (node.f && this.options.onFrameClick) line("vf-tt-hint", "click to zoom and open the source");
    }

    // Keep the tooltip inside the widget: flip it left/up near the edges.
    placeTooltip(clientX, clientY) {
      const r = this.el.getBoundingClientRect();
      const t = this.tooltip;
      const tw = t.offsetWidth;
      const th = t.offsetHeight;
      let x = clientX - r.left + 14;
      let y = clientY - r.top + 16;
      if (x + tw > r.width - 4) x = Math.max(4, clientX - r.left - tw - 14);
      if (y + th > r.height - 4) y = Math.max(4, clientY - r.top - th - 12);
      t.style.transform = "translate(" + Math.round(x) + "px, " + Math.round(y) + "px)";
    }

    onClick(e) {
      const k = this.indexAt(e.clientX, e.clientY);
      this.el.focus({ preventScroll: true });
      if (k < 0) return;
      const node = this.lay.nodes[k];
      this.setZoom(pathTo(this.lay, k));
      if (node.f && typeof this.options.onFrameClick === "function") {
        try {
          this.options.onFrameClick(frameOf(node));
        } catch (err) {
          console.error("vramscope: onFrameClick failed", err);
        }
      }
    }

    // onKey: Escape clears the search (in its box) or resets the zoom; on the
    // graph itself the arrows move a frame outline (as a hover does) and Enter
    // zooms to the outlined frame.
    onKey(e) {
      const onGraph = e.target === this.el;
      if (e.key === "Escape") {
        if (e.target === this.input && this.input.value) this.runSearch("");
        else this.setZoom([this.root]);
      } else if (onGraph && e.key === "Enter" && this.hover >= 0) {
        this.setZoom(pathTo(this.lay, this.hover));
      } else if (onGraph && /^Arrow(Up|Down|Left|Right)$/.test(e.key)) {
        this.settle();
        this.moveCursor(stepFrame(this.lay, this.hover, e.key));
      } else {
        return;
      }
      e.preventDefault();
    }

    // moveCursor outlines frame k for the keyboard, scrolled into view, with
    // its tooltip beside it.
    moveCursor(k) {
      if (k < 0) return;
      const L = this.lay;
      const vp = this.viewport;
      const y = L.depth[k] * this.rowH;
      if (y < vp.scrollTop || y + this.rowH > vp.scrollTop + vp.clientHeight) vp.scrollTop = Math.max(0, y - vp.clientHeight / 2);
      const r = this.canvas.getBoundingClientRect();
      this.setHover(k, { clientX: r.left + L.x[k] + Math.min(L.w[k], 40) / 2, clientY: r.top + y - vp.scrollTop + this.rowH / 2 });
    }

    // settle paints now when a paint is pending: a new tree or zoom is laid
    // out at the next paint, and the keys and frameAt act on what it shows.
    settle() {
      this.nextDraw.settle();
    }

    onSearchInput() {
      clearTimeout(this.searchTimer);
      // Debounced: a search walks every frame, no need to on each keystroke.
      this.searchTimer = setTimeout(() => this.runSearch(this.input.value), 120);
    }

    runSearch(text) {
      clearTimeout(this.searchTimer);
      this.query = String(text || "");
      this.frameSel = null;
      if (this.input.value !== this.query) this.input.value = this.query;
      const matcher = makeMatcher(this.query);
      let result = { count: 0, value: 0, share: 0 };
      this.search = null;
      if (!matcher) {
        this.summary.textContent = "";
      } else if (matcher.error) {
        this.summary.textContent = "invalid regex: " + matcher.error;
        result.error = matcher.error;
      } else {
        const s = searchTree(this.root, matcher);
        this.search = s;
        this.summary.textContent = s.count
          ? formatCount(s.count) + (s.count === 1 ? " match" : " matches") + " \u00b7 " + formatBytes(s.value) + " \u00b7 " + formatPercent(s.value, this.total) + " of total"
          : "no matches";
        result = { count: s.count, value: s.value, share: s.share };
      }
      this.summary.classList.toggle("vf-summary-error", !!result.error);
      this.schedule();
      return result;
    }

    setZoom(path) {
      if (!path || !path.length) return false;
      const same = path.length === this.zoomPath.length && path[path.length - 1] === this.zoom;
      if (!same) {
        this.zoomPath = path;
        this.viewport.scrollTop = 0;
        this.setHover(-1, null);
        this.updateCrumbs();
        this.schedule();
      }
      return true;
    }

    // setTree shows another tree (the live set of a moment) in the same view;
    // the search stays and is run on the new tree.
    setTree(tree) {
      if (typeof tree === "string") tree = JSON.parse(tree);
      this.tree = tree;
      this.root = rootOf(tree);
      this.total = valueOf(this.root);
      this.nodeCount = undefined;
      this.zoomPath = [this.root];
      this.viewport.scrollTop = 0;
      this.setHover(-1, null);
      this.updateCrumbs();
      if (this.frameSel) this.selectFrames(this.frameSel[0], this.frameSel[1]);
      else if (this.query) this.runSearch(this.query);
      this.schedule();
    }

    // selectFrames highlights the frames at the given {file, line} places as a
    // search does, under label (a finding's title), e.g. a finding's lines.
    selectFrames(frames, label) {
      const want = new Set((frames || []).map((f) => f.file + ":" + (f.line || 0)));
      const s = searchTree(this.root, { node: (n) => want.has(n.f + ":" + (n.l || 0)) });
      this.search = s;
      this.frameSel = [frames, label];
      this.query = String(label || "");
      this.input.value = "";
      this.summary.classList.remove("vf-summary-error");
      this.summary.textContent = (label ? label + ": " : "") + formatCount(s.count) + (s.count === 1 ? " frame" : " frames") + " \u00b7 " + formatBytes(s.value);
      this.schedule();
      return { count: s.count, value: s.value, share: s.share };
    }

    updateCrumbs() {
      const path = this.zoomPath;
      // Deep stacks: keep the root and the last few levels.
      const shown = path.length > 8 ? [0, -1, ...[5, 4, 3, 2, 1, 0].map((b) => path.length - 1 - b)] : path.map((_, d) => d);
      this.crumbs.textContent = "";
      shown.forEach((d, j) => {
        if (j > 0) el("span", "vf-crumb-sep", this.crumbs).textContent = "\u203a";
        if (d < 0) {
          el("span", "vf-crumb-gap", this.crumbs).textContent = "\u2026";
          return;
        }
        const b = el("button", "vf-crumb", this.crumbs);
        b.type = "button";
        b.textContent = frameLabel(path[d]);
        b.dataset.depth = String(d);
        b.title = formatBytes(valueOf(path[d]));
        if (d === path.length - 1) b.setAttribute("aria-current", "true");
      });
      this.resetBtn.disabled = path.length === 1;
    }

    controller() {
      return {
        zoomTo: (path) => this.setZoom(findPath(this.root, path)),
        search: (text) => this.runSearch(text),
        reset: () => this.setZoom([this.root]),
        destroy: () => this.destroy(),
        // Beyond the core API: for tests and hosts that mirror the state.
        state: () => ({
          zoomPath: this.zoomPath.map((n) => String(n.n || "")),
          query: this.query,
          matches: this.search ? this.search.count : 0,
          nodes: this.nodeCount === undefined ? (this.nodeCount = countNodes(this.root)) : this.nodeCount,
          rowHeight: this.rowH,
          renderMs: this.renderMs,
        }),
        frameAt: (clientX, clientY) => {
          this.settle(); // the frame a click there would hit, after a new tree or zoom
          const k = this.indexAt(clientX, clientY);
          return k < 0 ? null : frameOf(this.lay.nodes[k]);
        },
        refreshTheme: () => this.retheme(),
        setTree: (tree) => this.setTree(tree),
        selectFrames: (frames, label) => this.selectFrames(frames, label),
      };
    }

    destroy() {
      if (this.destroyed) return;
      this.destroyed = true;
      this.nextDraw.cancel();
      clearTimeout(this.searchTimer);
      this.listeners.clear();
      if (this.ratioWatch) this.ratioWatch[0].removeEventListener("change", this.ratioWatch[1]);
      if (this.el.parentNode) this.el.parentNode.removeChild(this.el);
    }
  }

  /**
   * render draws tree (a Tree object, a bare root node, or JSON text of
   * either) into container and returns a controller {zoomTo(path),
   * search(text), reset(), destroy(), state(), frameAt(x, y), refreshTheme()}.
   * zoomTo takes names or {name, file, line} frames from the root's children
   * down; reset() zooms back out to the root (the search stays).
   * options: {onFrameClick({name, file, line}), colors: {background,
   * foreground, user, library, synthetic, highlight, text, highlightText,
   * fontFamily, fontSize}, height (px, for hosts without a height)}.
   * The first layout and paint run synchronously and are measured as the
   * performance entry "vramscope-flame-render".
   */
  function render(container, tree, options) {
    if (!container || typeof container.appendChild !== "function") throw new Error("vramscope flame: container element required");
    mark("vramscope-flame-render-start");
    if (typeof tree === "string") tree = JSON.parse(tree);
    const view = new FlameView(container, tree, options);
    mark("vramscope-flame-dom-end");
    view.draw();
    mark("vramscope-flame-render-end");
    // The parts are measured too, to tell where a slow render goes.
    measure("vramscope-flame-dom", "vramscope-flame-render-start", "vramscope-flame-dom-end");
    measure("vramscope-flame-draw", "vramscope-flame-dom-end", "vramscope-flame-render-end");
    view.renderMs = measure("vramscope-flame-render", "vramscope-flame-render-start", "vramscope-flame-render-end");
    return view.controller();
  }

  return {
    render: render,
    // Pure helpers, exported for unit tests and for hosts that format the same way.
    layout: layout,
    hitTest: hitTest,
    pathTo: pathTo,
    stepFrame: stepFrame,
    findPath: findPath,
    frameOf: frameOf,
    countNodes: countNodes,
    formatBytes: formatBytes,
    formatPercent: formatPercent,
    formatCount: formatCount,
    frameKind: frameKind,
    frameLabel: frameLabel,
    makeMatcher: makeMatcher,
    matchFrame: matchFrame,
    searchTree: searchTree,
    fitLabel: fitLabel,
    parseColor: parseColor,
    isDark: isDark,
    shadePalette: shadePalette,
    buildPalette: buildPalette,
  };
});
