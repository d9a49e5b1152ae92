// Unit tests of road.js's pure parts and of report.js's one-instant check
// (no DOM), on the road of a real run: testdata/road_report.json is the
// daemon's analysis.report of examples/oom/road_oom.py's OOM snapshot on the
// H200 (docs/road-to-oom.md). Run with node --test profiler/flame/web/
import test from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import road from "./road.js";
import rep from "./report.js";

const report = JSON.parse(readFileSync(new URL("./testdata/road_report.json", import.meta.url), "utf8"));

test("the road of a real OOM run spans the run and ends at the failing step", () => {
  const r = report.road;
  assert.ok(road.usable(r));
  const last = r.steps[r.steps.length - 1];
  assert.equal(last.oom, true);
  const e = road.extent(r);
  assert.equal(e.x0, r.steps[0].step);
  assert.equal(e.x1, last.step);
  assert.ok(e.top >= r.cap && e.top >= Math.max(...r.steps.map((s) => s.peak)));
  assert.match(road.describe(last), /^step \d+ · ran out of memory · inputs 16 × 1024/);
  assert.match(r.change.text, /16 × 1024 \(16,384 tokens\)/);
});

test("recorded windows are runs of steps", () => {
  const steps = [0, 1, 2, 3, 4, 5, 9, 10].map((n) => ({ step: n, recorded: n < 3 || n === 5 || n >= 9 }));
  assert.deepEqual(road.windowsOf(steps), [[0, 2], [5, 5], [9, 10]]);
  assert.deepEqual(road.windowsOf(report.road.steps).length > 0, report.road.steps.some((s) => s.recorded));
});

test("nearest finds the step drawn nearest a position", () => {
  const steps = [{ step: 0 }, { step: 10 }, { step: 20 }];
  assert.equal(road.nearest(steps, -5), 0);
  assert.equal(road.nearest(steps, 4), 0);
  assert.equal(road.nearest(steps, 6), 1);
  assert.equal(road.nearest(steps, 99), 2);
});

test("a report without a road or with an empty one draws none", () => {
  assert.equal(road.usable(undefined), false);
  assert.equal(road.usable({ steps: [] }), false);
});

test("an OOM snapshot of one instant has no time axis; a recorded trace has one", () => {
  assert.equal(rep.instant(report.device), report.device.timeline.points.every((p) => p.time_us === report.device.timeline.points[0].time_us));
  const base = JSON.parse(readFileSync(new URL("./testdata/report.json", import.meta.url), "utf8"));
  assert.equal(rep.instant(base.device), false);
  assert.equal(rep.instant({ timeline: { points: [{ time_us: 5 }, { time_us: 5 }] } }), true);
  assert.equal(rep.instant(undefined), false);
});

test("step labels are whole steps at least 60 px apart", () => {
  for (const [x0, x1, w] of [[0, 64, 722], [0, 1, 722], [0, 99_999, 300], [37, 40, 50], [0, 7, 2000], [5, 123_457, 1234]]) {
    const t = road.stepTicks(x0, x1, w, 60);
    assert.ok(t.length >= 1, `${x0}-${x1}: no label`);
    for (let i = 0; i < t.length; i++) {
      assert.ok(Number.isInteger(t[i]) && t[i] >= x0 && t[i] <= x1);
      if (i) assert.ok(((t[i] - t[i - 1]) / Math.max(1, x1 - x0)) * w >= 60, `${x0}-${x1} on ${w}px: ${t[i - 1]}, ${t[i]}`);
    }
  }
});

// A DOM just large enough for road.js: elements, a canvas that records what
// is drawn, one animation frame at once.
function fakeDOM() {
  const drawn = [];
  const ctx = new Proxy({}, {
    get: (o, k) => (k in o ? o[k] : (...a) => drawn.push([k, ...a])),
    set: (o, k, v) => ((o[k] = v), true),
  });
  const make = (tag) => ({
    tag, children: [], style: {}, dataset: {}, hidden: false, className: "", textContent: "",
    clientWidth: 800, clientHeight: 160, width: 0, height: 0,
    appendChild(c) { this.children.push(c); return c; },
    setAttribute(k, v) { this[k] = v; },
    addEventListener() {}, removeEventListener() {},
    remove() {}, getContext: () => ctx,
    getBoundingClientRect: () => ({ left: 0, top: 0 }),
  });
  Object.assign(globalThis, {
    document: { createElement: make },
    window: { devicePixelRatio: 1 },
    getComputedStyle: () => ({ getPropertyValue: () => "" }),
    requestAnimationFrame: (cb) => { cb(); return 0; },
    cancelAnimationFrame: () => {},
  });
  return { root: make("div"), drawn };
}

test("the road of the H200 run draws its steps, the cap, the OOM and the change", () => {
  const { root, drawn } = fakeDOM();
  const c = road.render(root, report.road);
  const view = c.view;
  assert.equal(view.drawn, 1);
  const texts = drawn.filter((d) => d[0] === "fillText").map((d) => d[1]);
  assert.ok(texts.includes("OOM"));
  const labels = drawn.filter((d) => d[0] === "fillText" && /^\d+$/.test(d[1]));
  assert.ok(labels.length >= 3, `${labels.length} step labels`);
  for (let i = 1; i < labels.length; i++) assert.ok(labels[i][2] - labels[i - 1][2] >= 60, "step labels overlap");
  const all = [];
  const walk = (e) => { all.push(e); e.children.forEach(walk); };
  walk(root);
  assert.ok(all.some((e) => e.className === "vr-road-change" && e.textContent === report.road.change.text));
  assert.ok(all.some((e) => e.className === "vr-road-title" && e.textContent === "The road: 65 steps"));
  assert.match(view.canvas["aria-label"], /ran out of memory/);
  c.destroy();
});
