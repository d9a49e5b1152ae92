// Unit tests of timeline.js's, moments.js's and report.js's pure parts (no DOM), on the
// report of a real snapshot: testdata/report.json is
//   vramscope analyze --report examples/snapshots/agent_oom.pickle
// (an OOM, findings with time ranges, 561 moment buckets). Run with
//   node --test profiler/flame/web/
import test from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import tl from "./timeline.js";
import moments from "./moments.js";
import rep from "./report.js";

const report = JSON.parse(readFileSync(new URL("./testdata/report.json", import.meta.url), "utf8"));
const device = report.device;

test("columns keep each pixel's highest and lowest level", () => {
  const s = tl.seriesOf(device.timeline);
  assert.ok(s.n > 100 && s.hasCats, `${s.n} points`);
  const [t0, t1] = [s.t[0], s.t[s.n - 1] + 1];
  let top = 0;
  let bottom = Infinity;
  for (let i = 0; i < s.n; i++) {
    top = Math.max(top, s.alloc[i]);
    bottom = Math.min(bottom, s.low[i]);
    assert.ok(s.low[i] <= s.alloc[i]);
  }
  for (const px of [1, 7, 120, 999, 5000]) {
    const c = tl.columns(s, t0, t1, px);
    assert.equal(Math.max(...c.max), top, `${px} columns lose the highest point`);
    assert.equal(Math.min(...c.min.filter((_, x) => c.at[x] >= 0)), bottom, `${px} columns lose the lowest point`);
    for (let x = 0; x < px; x++) {
      if (c.at[x] < 0) continue;
      assert.ok(c.min[x] <= c.max[x] && c.max[x] === s.alloc[c.at[x]]);
    }
  }
  // Zoomed into one point's span: every column holds that point's range.
  const mid = s.n >> 1;
  const c = tl.columns(s, s.t[mid], s.t[mid] + (s.t[mid + 1] - s.t[mid]) / 2, 50);
  assert.ok(c.max.every((v) => v === s.alloc[mid]) && c.min.every((v) => v === s.low[mid]));
  // The engine's lows make bands: some point swings inside its bucket.
  assert.ok(s.low.some((v, i) => v < s.alloc[i]), "no point has a low below its high");
});

test("markers: steps, the peak and the OOM", () => {
  const ms = tl.markersOf(device, report);
  assert.equal(ms.filter((m) => m.kind === "peak").length, 1);
  assert.equal(ms.filter((m) => m.kind === "oom").length, report.ooms.length);
  assert.ok(ms.filter((m) => m.kind === "step").length >= report.steps.length);
  for (let i = 1; i < ms.length; i++) assert.ok(ms[i - 1].t <= ms[i].t, "sorted by time");
});

// naiveLive sums the base and every bucket up to b without checkpoints.
function naiveLive(m, b) {
  const live = new Float64Array(m.origins.length);
  for (let i = 0; i < m.base.length; i += 2) live[m.base[i]] += m.base[i + 1];
  for (let i = 0; i <= b; i++) for (let j = 0; j < m.buckets[i].length; j += 2) live[m.buckets[i][j]] += m.buckets[i][j + 1] * m.unit;
  return live;
}

test("the live set of any bucket, in any order, equals the plain sum", () => {
  const mo = moments.newMoments(report.moments);
  const n = report.moments.buckets.length;
  for (const b of [n - 1, 0, -1, 31, 32, 33, 200, 64, n >> 1, n - 2]) {
    assert.deepEqual(Array.from(moments.liveAt(mo, b)), Array.from(naiveLive(report.moments, b)), `bucket ${b}`);
  }
  // No origin is ever below zero; no moment holds more than the peak.
  let most = 0;
  for (let b = -1; b < n; b++) {
    const live = moments.liveAt(mo, b);
    let sum = 0;
    for (const v of live) {
      assert.ok(v >= 0);
      sum += v;
    }
    most = Math.max(most, sum);
  }
  assert.ok(most <= device.peak.bytes, `${most} live, peak ${device.peak.bytes}`);
  assert.ok(most >= device.peak.bytes * 0.5, `the fullest moment holds ${most} of a ${device.peak.bytes} peak`);
});

test("bucketOf maps times onto the grid", () => {
  const mo = moments.newMoments(report.moments);
  const m = report.moments;
  assert.equal(moments.bucketOf(mo, m.start_us - 1), -1);
  assert.equal(moments.bucketOf(mo, m.start_us), 0);
  assert.equal(moments.bucketOf(mo, m.start_us + m.width_us), 1);
  assert.equal(moments.bucketOf(mo, m.start_us + 1e15), m.buckets.length - 1);
});

test("the tree and the top lines of a moment add up", () => {
  const mo = moments.newMoments(report.moments);
  const b = moments.bucketOf(mo, device.peak.time_us);
  const live = moments.liveAt(mo, b);
  const total = live.reduce((a, v) => a + v, 0);
  const tree = moments.treeOf(mo, live, "t");
  assert.equal(tree.root.v, total);
  const check = (node) => {
    const kids = (node.c || []).reduce((a, c) => a + c.v, 0);
    assert.equal(kids + (node.s || 0), node.v, `node ${node.n}`);
    for (let i = 1; i < (node.c || []).length; i++) assert.ok(node.c[i - 1].v >= node.c[i].v, "children sorted");
    (node.c || []).forEach(check);
  };
  check(tree.root);
  const lines = moments.topLinesOf(mo, live, 100);
  assert.equal(lines.reduce((a, l) => a + l.bytes, 0), total);
  for (let i = 1; i < lines.length; i++) assert.ok(lines[i - 1].bytes >= lines[i].bytes);
  // The peak's top line is among the moment's (the bucket ends after the peak, so bytes may differ).
  const top = report.sites[0];
  assert.ok(lines.some((l) => l.file === top.file && l.line === top.line), `${top.file}:${top.line} not live at the peak's moment`);
});

test("a finding's range and frames", () => {
  for (const f of report.findings) {
    const r = rep.findingRange(f, report);
    if (f.evidence.start_us) assert.deepEqual(r, [f.evidence.start_us, Math.max(f.evidence.end_us, f.evidence.start_us + 1)]);
    const frames = rep.findingFrames(f);
    if (f.file) assert.deepEqual(frames[0], { file: f.file, line: f.line });
  }
  assert.equal(rep.findingRange({ evidence: {} }, { ooms: [] }), null);
});

test("formatTime and niceStep", () => {
  assert.equal(tl.formatTime(812), "812 \u00b5s");
  assert.equal(tl.formatTime(4200), "4.20 ms");
  assert.equal(tl.formatTime(12345678), "12.346 s");
  assert.equal(tl.niceStep(1000, 4), 200);
  assert.equal(tl.niceStep(7, 1), 5);
  assert.equal(tl.axisBytes(953.67 * 2 ** 20), "954 MiB");
  assert.equal(tl.axisBytes(1.4 * 2 ** 30), "1.40 GiB");
  assert.equal(tl.axisBytes(0), "0 B");
});

// testdata/diff_oom.json: the diff page's data for a run whose trace ends at
// 0.92 s by an OOM (before) against a 3.07 s run (after), the shared fixtures.
const diff = JSON.parse(readFileSync(new URL("./testdata/diff_oom.json", import.meta.url), "utf8"));

test("an overlay is not drawn past the end of its own trace", () => {
  const o = tl.seriesOf(diff.before.device.timeline, diff.before.device.end_us);
  const warp = tl.stepWarp(diff.steps, diff.before.steps, diff.device.timeline.points[0].time_us, o.t[0]);
  const last = warp.from(diff.before.device.end_us); // the OOM run's end, on the other run's clock
  const [t0, t1] = [diff.device.start_us, Math.max(diff.device.end_us, last + (last - diff.device.start_us) / 4)];
  const c = tl.columns(o, t0, t1, 1000, warp.to);
  for (let x = 0; x < c.px; x++) {
    const start = t0 + (x * (t1 - t0)) / c.px;
    if (start > last) assert.equal(c.at[x], -1, `column ${x} at ${start} is past the OOM run's end ${last}`);
  }
  assert.ok(c.at.some((i) => i >= 0) && c.at[c.px - 1] === -1);
  assert.equal(tl.indexAt(o, diff.before.device.end_us + 1), -1);
});

test("diff timelines line up step by step", () => {
  const [a, b] = [diff.steps, diff.before.steps];
  assert.ok(a.length >= 2 && b.length >= 2);
  const warp = tl.stepWarp(a, b, 0, 0);
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    assert.equal(warp.to(a[i].end_us), b[i].end_us, `step ${i}'s end`);
    assert.equal(warp.from(b[i].start_us), a[i].start_us, `step ${i}'s start`);
  }
  // Without steps on one side: aligned at the first events.
  const plain = tl.stepWarp([], b, 100, 5000);
  assert.equal(plain.to(150), 5050);
});
