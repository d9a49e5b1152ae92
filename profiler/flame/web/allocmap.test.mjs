// Unit tests of allocmap.js's pure parts on real snapshots' allocator maps
// (testdata/allocmaps.json: the allocator maps, OOMs and allocator state of
// analyze --json of frag_oom, expandable and cuda_graph; the view is described
// in docs/frontend-notes.md). Run with: node --test profiler/flame/web/
import test from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import A from "./allocmap.js";

const data = JSON.parse(readFileSync(new URL("./testdata/allocmaps.json", import.meta.url), "utf8"));
const mapAt = (name, at) => data[name].allocator_maps[0].maps.find((m) => m.at === at);

test("the OOM map is shown first, and sets the request beside the largest free block", () => {
  const maps = data.frag_oom.allocator_maps[0].maps;
  const m = A.pickDefault(maps);
  assert.equal(m.at, "oom");
  const oom = data.frag_oom.ooms[0];
  assert.equal(m.request, oom.requested);
  const s = A.summary(m);
  assert.equal(s.fits, false, "frag_oom failed for lack of a large enough free block");
  assert.match(s.request, new RegExp("request: " + A.formatBytes(oom.requested).replace(".", "\\.")));
  assert.match(s.request, new RegExp("largest free block: " + A.formatBytes(m.largest_free_block).replace(".", "\\.")));
  assert.ok(m.largest_free_block < m.request);
});

test("free space adds up to the allocator state's external free at the snapshot", () => {
  for (const name of Object.keys(data)) {
    const m = mapAt(name, "snapshot");
    const f = A.freeStats(m);
    assert.equal(f.bytes, data[name].allocator.external_free, name);
    assert.equal(f.blocks, data[name].allocator.free_blocks, name);
    assert.equal(m.reserved, data[name].allocator.reserved, name);
  }
});

test("layout draws every segment on one scale, blocks inside their segment", () => {
  for (const name of Object.keys(data)) {
    for (const m of data[name].allocator_maps[0].maps) {
      const lay = A.layout(m, 800);
      assert.equal(lay.segs.length, m.segments.length);
      for (const p of lay.segs) {
        assert.ok(p.x >= 0 && p.x + p.w <= 800 + 1e-6, `${name} ${m.at}: segment inside the width`);
        if (p.w > 4) assert.ok(Math.abs(p.w - p.seg.size / lay.bytesPerPx) < 1e-6 || p.w === 800, "to scale");
      }
      for (const r of lay.blocks) {
        const seg = lay.segs.find((p) => p.seg === r.seg);
        assert.ok(r.x >= seg.x - 1e-6 && r.x + r.w <= seg.x + seg.w + 1e-6, `${name} ${m.at}: block inside its segment`);
      }
    }
  }
});

test("hit testing finds the block under the pointer and describes it", () => {
  const m = mapAt("frag_oom", "snapshot");
  const lay = A.layout(m, 1000);
  const big = lay.blocks.filter((r) => r.block.state === "allocated").sort((a, b) => b.w - a.w)[0];
  const hit = A.hitTest(lay, big.x + big.w / 2, big.y + 5);
  assert.equal(hit.block, big.block);
  const words = A.describe(hit, m);
  assert.match(words[0], new RegExp("^" + A.formatBytes(big.block.size).replace(".", "\\.") + " \u00b7 allocated"));
  if (big.block.line) assert.ok(words.some((w) => w === "allocated at " + m.lines[big.block.line - 1]));
  assert.equal(A.hitTest(lay, -5, -5), null);
});

test("private pools and expandable segments are marked in the words", () => {
  const pool = mapAt("cuda_graph", "snapshot").segments.find((s) => s.pool[0] || s.pool[1]);
  assert.ok(pool, "cuda_graph has a private pool segment");
  const lay = A.layout({ segments: [pool], lines: [] }, 600);
  assert.match(A.describe(lay.blocks[0], { lines: [] }).at(-1), /private pool/);
  const exp = mapAt("expandable", "snapshot").segments.find((s) => s.expandable);
  assert.ok(exp, "expandable has an expandable segment");
  const lay2 = A.layout({ segments: [exp], lines: [] }, 600);
  assert.match(A.describe(lay2.blocks[0], { lines: [] }).at(-1), /expandable/);
});

test("a snapshot without segments draws nothing and says so", () => {
  assert.equal(A.pickDefault([]), null);
  const lay = A.layout({ segments: [], lines: [] }, 500);
  assert.equal(lay.blocks.length, 0);
  assert.equal(lay.height, 0);
  assert.equal(A.hitTest(lay, 10, 10), null);
  assert.match(A.summary({ at: "snapshot", reserved: 0, allocated: 0, largest_free_block: 0, segments: [] }).text, /^0 B reserved in 0 segments/);
});
