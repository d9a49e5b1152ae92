// Unit tests of flame.js's pure parts (no DOM): run with
//   node --test profiler/flame/web/
import test from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import flame from "./flame.js";

const fixture = JSON.parse(readFileSync(new URL("./testdata/tree.json", import.meta.url), "utf8"));
const EPS = 1e-9;

// rects turns layout's parallel arrays into objects keyed by node name.
function rects(out) {
  const m = new Map();
  for (let k = 0; k < out.count; k++) {
    m.set(out.nodes[k].n, { k, node: out.nodes[k], x: out.x[k], w: out.w[k], depth: out.depth[k], parent: out.parent[k] });
  }
  return m;
}

const pathOf = (names) => flame.findPath(fixture, names);

test("layout visits the tree in preorder with parents and rows", () => {
  const out = flame.layout([fixture.root], 1000, 0);
  assert.equal(out.count, 9);
  assert.deepEqual(
    out.nodes.map((n) => n.n),
    ["all", "<module>", "forward", "linear", "attention", "at::empty_cuda", "backward", "_engine_run_backward", "<frozen runpy>"],
  );
  assert.deepEqual(out.depth, [0, 1, 2, 3, 3, 3, 2, 3, 1]);
  assert.deepEqual(out.parent, [-1, 0, 1, 2, 2, 2, 1, 6, 0]);
  assert.equal(out.ancestors, 0);
  assert.equal(out.maxDepth, 3);
  // Siblings are packed left to right from the parent's start.
  const r = rects(out);
  assert.equal(r.get("attention").x, 400);
  assert.equal(r.get("backward").x, 600);
  assert.equal(r.get("<frozen runpy>").x, 900);
  // A bare tree is taken as zoomed to its root.
  assert.equal(flame.layout(fixture, 1000, 0).count, 9);
});

test("layout widths are proportional to value", () => {
  for (const [name, rect] of rects(flame.layout([fixture.root], 1000, 0))) {
    assert.ok(Math.abs(rect.w - rect.node.v) < EPS, `${name}: width ${rect.w} for value ${rect.node.v}`);
  }
  const half = rects(flame.layout([fixture.root], 500, 0));
  assert.ok(Math.abs(half.get("forward").w - 300) < EPS);
});

test("layout keeps children within their parent's span, siblings apart", () => {
  const out = flame.layout([fixture.root], 777, 0);
  for (let k = 0; k < out.count; k++) {
    const p = out.parent[k];
    if (p < 0) continue;
    assert.ok(out.x[k] >= out.x[p] - EPS && out.x[k] + out.w[k] <= out.x[p] + out.w[p] + EPS, `${out.nodes[k].n} inside ${out.nodes[p].n}`);
    assert.equal(out.depth[k], out.depth[p] + 1);
    assert.ok(out.nodes[p].c.includes(out.nodes[k]));
  }
  for (let k = 1; k < out.count; k++) {
    for (let j = 0; j < k; j++) {
      if (out.depth[j] === out.depth[k]) assert.ok(out.x[j] + out.w[j] <= out.x[k] + EPS, "rows increase in x without overlap");
    }
  }
});

test("layout re-lays out on zoom: zoom node and ancestors full width, others gone", () => {
  const zoom = pathOf(["<module>", "forward"]);
  assert.deepEqual(zoom.map((n) => n.n), ["all", "<module>", "forward"]);
  const out = flame.layout(zoom, 1200, 0);
  const r = rects(out);
  assert.equal(out.ancestors, 2);
  assert.deepEqual(out.nodes.slice(0, 2).map((n) => n.n), ["all", "<module>"]);
  for (const name of ["all", "<module>", "forward"]) {
    assert.equal(r.get(name).x, 0, name);
    assert.equal(r.get(name).w, 1200, name);
  }
  assert.equal(r.get("forward").parent, r.get("<module>").k);
  assert.ok(Math.abs(r.get("linear").w - (400 / 600) * 1200) < EPS);
  assert.ok(Math.abs(r.get("attention").x - (400 / 600) * 1200) < EPS);
  assert.equal(r.has("backward"), false);
  assert.equal(r.has("<frozen runpy>"), false);
  assert.equal(out.maxDepth, 3);
  // Reusing the output object gives the same answer as a fresh one.
  const again = flame.layout([fixture.root], 1000, 0, out);
  assert.equal(again.count, 9);
  assert.equal(again.ancestors, 0);
});

test("layout drops subtrees narrower than minPx", () => {
  const r = rects(flame.layout([fixture.root], 1000, 2));
  assert.equal(r.has("at::empty_cuda"), false); // 1 byte = 1px
  assert.equal(r.has("linear"), true);
  const tiny = rects(flame.layout([fixture.root], 10, 2));
  assert.equal(tiny.has("<frozen runpy>"), false, "1px wide");
  assert.equal(tiny.has("_engine_run_backward"), true, "2px wide");
});

test("layout handles deep chains without recursion", () => {
  let node = { n: "leaf", v: 1 };
  for (let d = 0; d < 20000; d++) node = { n: "f" + d, v: 1, c: [node] };
  const out = flame.layout([node], 100, 0.5);
  assert.equal(out.count, 20001);
  assert.equal(out.maxDepth, 20000);
  assert.equal(flame.countNodes(node), 20001);
});

test("hitTest agrees with layout", () => {
  const out = flame.layout([fixture.root], 1000, 0.5);
  const at = (px, row) => {
    const k = flame.hitTest(out, px, row);
    return k < 0 ? null : out.nodes[k].n;
  };
  assert.equal(at(10, 0), "all");
  assert.equal(at(10, 3), "linear");
  assert.equal(at(450, 3), "attention");
  assert.equal(at(580, 3), null); // forward's self bytes
  assert.equal(at(950, 1), "<frozen runpy>");
  assert.equal(at(950, 2), null);
  assert.equal(at(10, 9), null);
  assert.equal(at(-1, 0), null);
  const zoomed = flame.layout(pathOf(["<module>", "forward"]), 600, 0.5);
  assert.equal(zoomed.nodes[flame.hitTest(zoomed, 10, 0)].n, "all"); // ancestor rows span the width
  assert.equal(zoomed.nodes[flame.hitTest(zoomed, 500, 3)].n, "attention");
});

test("stepFrame moves the keyboard's frame: parent, first child, row neighbours", () => {
  const out = flame.layout([fixture.root], 1000, 0);
  const name = (k) => out.nodes[k].n;
  const k = (n) => out.nodes.findIndex((x) => x.n === n);
  const step = (from, ...keys) => keys.reduce((at, key) => flame.stepFrame(out, at, key), from);
  assert.equal(name(step(-1, "ArrowDown")), "all"); // from none: the zoomed frame
  assert.equal(name(step(-1, "ArrowDown", "ArrowDown", "ArrowDown")), "forward");
  assert.equal(name(step(k("linear"), "ArrowRight")), "attention");
  assert.equal(name(step(k("attention"), "ArrowRight")), "at::empty_cuda");
  assert.equal(name(step(k("at::empty_cuda"), "ArrowRight")), "_engine_run_backward"); // the next on the row, another parent
  assert.equal(name(step(k("_engine_run_backward"), "ArrowRight")), "_engine_run_backward"); // the row's end
  assert.equal(name(step(k("attention"), "ArrowLeft", "ArrowLeft")), "linear");
  assert.equal(name(step(k("linear"), "ArrowUp", "ArrowUp")), "<module>");
  assert.equal(name(step(k("all"), "ArrowUp")), "all");
  assert.equal(name(step(k("linear"), "ArrowDown")), "linear"); // a leaf
  assert.equal(step(k("linear"), "Enter"), k("linear"));
  // Zoomed: from none, the zoomed frame (after its ancestors); up reaches the ancestors.
  const zoomed = flame.layout(pathOf(["<module>", "forward"]), 600, 0);
  assert.equal(zoomed.nodes[flame.stepFrame(zoomed, -1, "ArrowLeft")].n, "forward");
  assert.equal(zoomed.nodes[flame.stepFrame(zoomed, flame.stepFrame(zoomed, -1, "ArrowUp"), "ArrowUp")].n, "<module>");
  assert.equal(flame.stepFrame(flame.layout([{ n: "empty", v: 0 }], 100, 0.5), -1, "ArrowDown"), 0);
});

test("findPath, pathTo and frameOf", () => {
  const p = pathOf(["<module>", "backward", "_engine_run_backward"]);
  assert.deepEqual(p.map((n) => n.n), ["all", "<module>", "backward", "_engine_run_backward"]);
  assert.deepEqual(pathOf(["all", "<module>"]).map((n) => n.n), ["all", "<module>"]);
  assert.equal(pathOf([{ name: "<module>", file: "train.py", line: 10 }, "forward"]).length, 3);
  assert.equal(pathOf([{ name: "<module>", line: 11 }]), null);
  assert.equal(pathOf(["nope"]), null);
  assert.deepEqual(pathOf([]), [fixture.root]);
  const out = flame.layout(p.slice(0, 3), 100, 0);
  const k = out.nodes.indexOf(p[3]);
  assert.deepEqual(flame.pathTo(out, k), p);
  assert.deepEqual(flame.frameOf(p[2]), { name: "backward", file: "train.py", line: 20 });
  assert.deepEqual(flame.frameOf(fixture.root), { name: "all", file: "", line: 0 });
});

test("makeMatcher: substring is case-insensitive, /re/ is a regex", () => {
  const sub = flame.makeMatcher("  Attn ");
  assert.equal(sub.test("flash_attn_func"), true);
  assert.equal(sub.test("linear"), false);
  const re = flame.makeMatcher("/^lin.*r$/");
  assert.equal(re.regex, true);
  assert.equal(re.test("linear"), true);
  assert.equal(re.test("nonlinear"), false);
  const flags = flame.makeMatcher("/LINEAR/ig");
  assert.equal(flags.test("linear"), true);
  assert.equal(flags.test("linear"), true, "g flag dropped: test() stays stateless");
  assert.equal(flame.makeMatcher(""), null);
  assert.equal(flame.makeMatcher("   "), null);
  assert.ok(flame.makeMatcher("/(/").error);
  // A lone slash is a substring, not an empty regex.
  assert.equal(flame.makeMatcher("/").test("a/b"), true);
});

test("searchTree matches name and file and counts each byte once", () => {
  const byName = flame.searchTree(fixture, flame.makeMatcher("forward"));
  assert.equal(byName.count, 1);
  assert.equal(byName.value, 600);
  assert.equal(byName.share, 0.6);
  const byFile = flame.searchTree(fixture, flame.makeMatcher("train.py"));
  assert.equal(byFile.count, 2); // <module> and backward, both in train.py
  assert.equal(byFile.value, 900, "backward lies inside <module>: not counted twice");
  const re = flame.searchTree(fixture.root, flame.makeMatcher("/torch\\//"));
  assert.deepEqual([...re.matched].map((n) => n.n).sort(), ["_engine_run_backward", "linear"]);
  assert.equal(re.value, 600);
  assert.equal(flame.searchTree(fixture, flame.makeMatcher("zzz")).count, 0);
});

test("fitLabel truncates with an ellipsis", () => {
  assert.equal(flame.fitLabel("forward", 70, 100, 10), "forward");
  assert.equal(flame.fitLabel("forward", 70, 50, 10), "forw\u2026");
  assert.equal(flame.fitLabel("forward", 70, 25, 10), "", "one char and an ellipsis is not a label");
  assert.equal(flame.fitLabel("forward", 70, 5, 10), "");
  assert.equal(flame.fitLabel("", 0, 50, 10), "");
});

test("parseColor, isDark and palettes", () => {
  assert.deepEqual(flame.parseColor("#1e1e1e"), [30, 30, 30, 1]);
  assert.deepEqual(flame.parseColor("#fff"), [255, 255, 255, 1]);
  assert.deepEqual(flame.parseColor("rgba(10, 20, 30, 0.5)"), [10, 20, 30, 0.5]);
  assert.deepEqual(flame.parseColor("rgb(10 20 30 / 50%)"), [10, 20, 30, 0.5]);
  assert.equal(flame.parseColor("tomato"), null);
  assert.equal(flame.isDark(flame.parseColor("#1e1e1e")), true);
  assert.equal(flame.isDark(flame.parseColor("#ffffff")), false);
  const p = flame.buildPalette(true, { user: "#ff0000" });
  assert.equal(p.fills.length, 3);
  assert.equal(new Set(p.fills[0]).size, p.fills[0].length, "shades are distinct");
  assert.match(p.fills[0][0], /^hsl\(/);
  assert.equal(flame.shadePalette([0, 0, 50], 4).every((c) => c.startsWith("hsl(0.0, 0.0%")), true, "grey stays grey");
});

test("the script can be inlined in an HTML script element", () => {
  const src = readFileSync(new URL("./flame.js", import.meta.url), "utf8").toLowerCase();
  assert.equal(src.includes("</" + "script"), false);
  assert.equal(src.includes("<" + "!--"), false);
});
