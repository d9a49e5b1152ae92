// The shared cases of what Go, JavaScript, TypeScript and Python print alike,
// and the kinds of frames: profiler/flame/testdata/format_vectors.json. Here
// view.js's formatting answers them, and flame.js and moments.js draw the kind
// the engine put on each node, never one guessed from the file. Run with
//   node --test profiler/flame/web/
import test from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import view from "./view.js";
import flame from "./flame.js";
import moments from "./moments.js";

const vectors = JSON.parse(readFileSync(new URL("../testdata/format_vectors.json", import.meta.url), "utf8"));
const report = JSON.parse(readFileSync(new URL("./testdata/report.json", import.meta.url), "utf8"));

test("formatBytes, formatPercent and formatCount answer the shared vectors", () => {
  assert.ok(vectors.bytes.length && vectors.percent.length && vectors.counts.length);
  for (const [n, want] of vectors.bytes) assert.equal(view.formatBytes(n), want, `formatBytes(${n})`);
  for (const [part, whole, want] of vectors.percent) assert.equal(view.formatPercent(part, whole), want, `formatPercent(${part}, ${whole})`);
  for (const [n, want] of vectors.counts) assert.equal(view.formatCount(n), want, `formatCount(${n})`);
});

test("frameKind is the engine's kind on the node, whatever the file looks like", () => {
  assert.ok(vectors.kinds.length);
  for (const [file, kind] of vectors.kinds) {
    assert.equal(flame.frameKind({ n: "f", f: file, t: kind }), kind, file);
    // The file alone decides nothing: the same node with another kind reads as that kind.
    const other = kind === "user" ? "library" : "user";
    assert.equal(flame.frameKind({ n: "f", f: file, t: other }), other, file);
  }
  assert.equal(flame.frameKind({ n: "f", f: "train.py" }), "library", "no kind said: a library's");
  assert.equal(flame.frameKind({ n: "f", t: "toString" }), "library", "an unknown kind");
});

test("a moment's flame tree carries the kinds of the engine's moment frames", () => {
  const mo = moments.newMoments(report.moments);
  const live = moments.liveAt(mo, moments.bucketOf(mo, report.device.peak.time_us));
  const tree = moments.treeOf(mo, live, "peak");
  assert.equal(tree.root.t, "synthetic");
  // A library's frame leaves its kind unsaid (the commonest kind, so the JSON stays small).
  const kindOf = new Map(report.moments.frames.map((f) => [f.n + "\u0000" + (f.f || "") + "\u0000" + (f.l || 0), f.t || "library"]));
  const seen = new Set();
  const stack = [...tree.root.c];
  while (stack.length) {
    const n = stack.pop();
    const want = kindOf.get(n.n + "\u0000" + (n.f || "") + "\u0000" + (n.l || 0));
    assert.ok(want, `${n.n}: a moment frame`);
    assert.equal(flame.frameKind(n), want, `${n.n} (${n.f})`);
    seen.add(want);
    stack.push(...(n.c || []));
  }
  assert.ok(seen.has("user") && seen.has("library"), `a real OOM's moment holds user and library frames: ${[...seen]}`);
});
