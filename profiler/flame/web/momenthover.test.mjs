// Unit tests of hovering a moment (no DOM): moments.js's momentAt (the one
// answer per bucket that the click and the hover share) and timeline.js's
// hoverRequests (ask once the pointer rests 150 ms, at most one request in
// flight, the latest wins), on the report of a real snapshot:
// testdata/report.json is `vramscope analyze --report examples/snapshots/agent_oom.pickle`.
// The timers are a hand-driven clock, so nothing here waits for real time.
//
//   node --test profiler/flame/web/
import test from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import tl from "./timeline.js";
import moments from "./moments.js";

const report = JSON.parse(readFileSync(new URL("./testdata/report.json", import.meta.url), "utf8"));

// clock is a fake setTimeout/clearTimeout driven by advance(ms).
function clock() {
  let now = 0;
  let next = 0;
  const timers = new Map();
  return {
    setTimeout: (fn, ms) => {
      timers.set(++next, { at: now + ms, fn: fn });
      return next;
    },
    clearTimeout: (id) => timers.delete(id),
    advance(ms) {
      now += ms;
      for (const [id, t] of [...timers].sort((a, b) => a[1].at - b[1].at)) {
        if (t.at > now) continue;
        timers.delete(id);
        t.fn();
      }
    },
    pending: () => timers.size,
  };
}

// settle lets resolved promises run their callbacks.
const settle = () => new Promise((resolve) => setImmediate(resolve));

test("momentAt: the live set, its bytes and top lines of a bucket, cached", () => {
  const mo = moments.newMoments(report.moments);
  const b = moments.bucketOf(mo, report.device.peak.time_us);
  const a = moments.momentAt(mo, b);
  const live = moments.liveAt(mo, b);
  assert.deepEqual(Array.from(a.live), Array.from(live));
  assert.equal(a.bytes, moments.treeOf(mo, live, "t").root.v, "the bytes a click's flame graph shows");
  assert.deepEqual(a.lines, moments.topLinesOf(mo, live, 10));
  assert.ok(a.bytes > 0 && a.lines.length >= 3, `${a.bytes} bytes in ${a.lines.length} lines`);
  assert.ok(a.lines.slice(0, 3).reduce((s, l) => s + l.bytes, 0) <= a.bytes);
  assert.equal(moments.momentAt(mo, b), a, "asked again: the cached answer");
  // The cache holds the last `keep` buckets asked, the most recently used last.
  const n = report.moments.buckets.length;
  for (let i = 0; i < 10; i++) moments.momentAt(mo, Math.floor((i * n) / 10), 4);
  assert.equal(mo.answers.size, 4);
  assert.equal(moments.momentAt(mo, Math.floor((9 * n) / 10), 4).bucket, Math.floor((9 * n) / 10));
  assert.notEqual(moments.momentAt(mo, b, 4), a, "an answer evicted is computed again");
});

test("hoverRequests: a sweep asks nothing, a rest asks once", async () => {
  const c = clock();
  const mo = moments.newMoments(report.moments);
  const asked = [];
  const shown = [];
  const fetch = (t) => {
    asked.push(t);
    return moments.momentAt(mo, moments.bucketOf(mo, t)).lines.slice(0, 3);
  };
  const lane = tl.hoverRequests(fetch, (key, lines) => shown.push([key, lines]), c);
  const m = report.moments;
  // 300 moves 10 ms apart across the whole recording: never at rest.
  for (let i = 0; i < 300; i++) {
    const t = m.start_us + ((i / 300) * m.buckets.length + 0.5) * m.width_us;
    lane.move(moments.bucketOf(mo, t), t);
    c.advance(10);
  }
  await settle();
  assert.deepEqual(asked, [], "no request while the pointer moves");
  assert.equal(c.pending(), 1, "one wait, for the last moment");
  c.advance(139); // 149 ms since the last move
  assert.deepEqual(asked, []);
  c.advance(1);
  await settle();
  assert.equal(asked.length, 1);
  const last = moments.bucketOf(mo, asked[0]);
  assert.equal(shown.length, 1);
  assert.equal(shown[0][0], last);
  assert.deepEqual(shown[0][1], moments.momentAt(mo, last).lines.slice(0, 3));
  assert.deepEqual(lane.state(), { asked: 1, inFlight: false, waiting: false, shown: last });
  // Moves inside the same moment neither restart the wait nor ask again.
  lane.move(last, asked[0] + 1);
  c.advance(500);
  await settle();
  assert.equal(asked.length, 1);
  // Leaving cancels a wait.
  lane.move(last - 1, asked[0] - m.width_us);
  c.advance(100);
  lane.leave();
  c.advance(500);
  await settle();
  assert.equal(asked.length, 1);
  assert.equal(lane.state().shown, null);
});

test("hoverRequests: at most one in flight, the latest wins", async () => {
  const c = clock();
  const calls = [];
  const fetch = (t) =>
    new Promise((resolve) => {
      calls.push({ t: t, resolve: resolve });
    });
  const shown = [];
  const lane = tl.hoverRequests(fetch, (key, answer) => shown.push([key, answer]), c);
  const open = () => calls.filter((x) => !x.done).length;
  const answer = (i) => {
    calls[i].done = true;
    calls[i].resolve("lines of " + calls[i].t);
  };
  lane.move("A", 1);
  c.advance(150);
  assert.equal(calls.length, 1, "A asked");
  for (const [key, t] of [["B", 2], ["C", 3]]) {
    lane.move(key, t);
    c.advance(150);
    assert.equal(open(), 1, `resting on ${key} while A is in flight asks nothing yet`);
  }
  assert.deepEqual(lane.state(), { asked: 1, inFlight: true, waiting: true, shown: null });
  answer(0);
  await settle();
  assert.deepEqual(shown, [], "A's answer is dropped: the pointer is on C");
  assert.deepEqual(calls.map((x) => x.t), [1, 3], "then C is asked, not B");
  answer(1);
  await settle();
  assert.deepEqual(shown, [["C", "lines of 3"]]);
  // A failed request shows nothing and frees the lane.
  const errors = [];
  const lane2 = tl.hoverRequests(
    (t) => (t === 1 ? Promise.reject(new Error("gone")) : "lines of " + t),
    (key, a) => errors.push([key, a]),
    c,
  );
  const log = console.error;
  console.error = () => {};
  try {
    lane2.move("X", 1);
    c.advance(150);
    await settle();
  } finally {
    console.error = log;
  }
  lane2.move("Y", 2);
  c.advance(150);
  await settle();
  assert.deepEqual(errors, [["Y", "lines of 2"]]);
});
