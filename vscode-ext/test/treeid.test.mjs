// The flame panel's refresh check (src/treeid.ts), run in node as it is, on
// the trees `vramscope flame --format json` writes for real snapshots: the
// same snapshot is the same tree (the panel keeps the user's zoom), another
// snapshot or weight is not.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const ext = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const repo = path.resolve(ext, "..");
const bin = process.env.VRAMSCOPE_BIN ? path.resolve(process.env.VRAMSCOPE_BIN) : path.join(repo, "bin", "vramscope");

async function load() {
  const out = path.join(mkdtempSync(path.join(os.tmpdir(), "vramscope-treeid-")), "treeid.cjs");
  await build({ entryPoints: [path.join(ext, "src/treeid.ts")], bundle: true, outfile: out, platform: "node", format: "cjs", logLevel: "warning" });
  return createRequire(out)(out);
}

const flame = (name, weight = "peak") =>
  JSON.parse(execFileSync(bin, ["flame", path.join(repo, "examples", "snapshots", name + ".pickle"), "--format", "json", "--weight", weight], { maxBuffer: 64 << 20 }).toString());

test("the same snapshot is the same tree; another snapshot or weight is not", async () => {
  const { sameTree } = await load();
  const a = flame("example_train");
  assert.equal(sameTree(a, flame("example_train")), true, "two reads of one snapshot");
  assert.equal(sameTree(a, flame("leak_steps")), false, "another snapshot");
  assert.equal(sameTree(a, flame("example_train", "alloc")), false, "another weight");
  assert.equal(sameTree(undefined, a), false, "nothing drawn yet");
});
