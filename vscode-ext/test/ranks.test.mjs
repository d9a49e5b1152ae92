// The rank picker's logic (src/rankpick.ts), run in node as it is: which
// processes are one launch (Take Snapshot offers "whole job" only then),
// and what the quick pick and the status bar say for the server's RankPick.
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const ext = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

async function load() {
  const out = path.join(mkdtempSync(path.join(os.tmpdir(), "vramscope-ranks-")), "rankpick.cjs");
  await build({ entryPoints: [path.join(ext, "src/rankpick.ts")], bundle: true, outfile: out, platform: "node", format: "cjs", logLevel: "warning" });
  return createRequire(out)(out);
}

const proc = (pid, rank, job, agent = true) => ({ pid, rank, job, agent, local_rank: rank, world_size: 2, device: 0, recording: true });

test("a launch's ranks are the attached processes with its job", async () => {
  const { jobOf } = await load();
  const procs = [proc(12, 1, "run:a"), proc(11, 0, "run:a"), proc(20, 0, "run:b"), proc(13, 2, "run:a", false), proc(30, 0, undefined)];
  assert.deepEqual(jobOf(procs, procs[0]).map((p) => p.pid), [11, 12]);
  assert.deepEqual(jobOf(procs, procs[2]).map((p) => p.pid), [20]);
  assert.deepEqual(jobOf(procs, procs[4]).map((p) => p.pid), [30]); // no job: itself alone, no "whole job" offered
});

test("the quick pick marks the shown rank, the heaviest and the outliers", async () => {
  const { rankItems, rankStatus } = await load();
  const pick = {
    group: "job-20261201T203001.123Z-0001", job: "run:a", skew_ms: 1.3, imbalance: 1.63, median_rank: 0, max_rank: 1, shown: 1,
    ranks: [
      { rank: 0, path: "/s/a.pickle", id: "a", peak_bytes: 3308257280, peak_vs_median: 1, outlier: false, device: 0, top_line: "train.py:31" },
      { rank: 1, path: "/s/b.pickle", id: "b", peak_bytes: 5401114112, peak_vs_median: 1.6326, outlier: true, device: 1 },
    ],
  };
  const items = rankItems(pick);
  assert.equal(items.length, 2);
  assert.equal(items[0].label, "rank 0");
  assert.equal(items[1].label, "$(eye) rank 1 (heaviest)");
  assert.match(items[1].description, /^5\.03 GiB · ×1\.63 of the median · outlier$/);
  assert.equal(items[0].detail, "top line train.py:31 · GPU 0 · a.pickle");
  assert.equal(items[1].rank.path, "/s/b.pickle");
  assert.equal(rankStatus(pick), "$(layers) rank 1 of 2 · ×1.63 $(warning)");
  assert.equal(rankStatus({ ...pick, shown: -1 }), "$(layers) 2 ranks");
});
