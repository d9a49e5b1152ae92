// The extension's byte formatting (src/format.ts, run in node as it is)
// answers the shared cases every front end answers:
// profiler/flame/testdata/format_vectors.json.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const ext = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const vectors = JSON.parse(readFileSync(path.join(ext, "..", "profiler", "flame", "testdata", "format_vectors.json"), "utf8"));

test("formatBytes and formatDelta answer the shared vectors", async () => {
  const out = path.join(mkdtempSync(path.join(os.tmpdir(), "vramscope-format-")), "format.cjs");
  await build({ entryPoints: [path.join(ext, "src/format.ts")], bundle: true, outfile: out, platform: "node", format: "cjs", logLevel: "warning" });
  const { formatBytes, formatDelta } = createRequire(out)(out);
  assert.ok(vectors.bytes.length > 10);
  for (const [n, want] of vectors.bytes) {
    assert.equal(formatBytes(n), want, `formatBytes(${n})`);
    assert.equal(formatDelta(n), n > 0 ? "+" + want : want, `formatDelta(${n})`);
  }
});
