// Which language server the extension starts (src/config.ts serverCommand and
// missingServer), run in node with a stand-in for the vscode module: the
// bundled engine only when bin/target is this platform, else vramscope on
// PATH, and a message saying what to install when there is neither.
import assert from "node:assert/strict";
import { chmodSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import Module from "node:module";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const ext = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const here = `${process.platform}-${process.arch}`;
const other = here === "darwin-arm64" ? "linux-x64" : "darwin-arm64";

async function loadConfig(settings) {
  const dir = mkdtempSync(path.join(os.tmpdir(), "vramscope-config-"));
  const out = path.join(dir, "config.cjs");
  await build({ entryPoints: [path.join(ext, "src/config.ts")], bundle: true, outfile: out, platform: "node", format: "cjs", external: ["vscode"], logLevel: "warning" });
  const stub = { workspace: { getConfiguration: () => ({ get: (k, d) => settings[k] ?? d }), workspaceFolders: [] } };
  const resolve = Module._resolveFilename;
  Module._resolveFilename = function (request, ...rest) {
    return request === "vscode" ? "vscode" : resolve.call(this, request, ...rest);
  };
  Module._cache.vscode = { id: "vscode", filename: "vscode", loaded: true, exports: stub };
  try {
    return new (createRequire(out)(out).Config)();
  } finally {
    Module._resolveFilename = resolve;
  }
}

function extensionDir(target) {
  const dir = mkdtempSync(path.join(os.tmpdir(), "vramscope-ext-"));
  if (target !== undefined) {
    mkdirSync(path.join(dir, "bin"));
    writeFileSync(path.join(dir, "bin", "vramscope"), "#!/bin/sh\n");
    chmodSync(path.join(dir, "bin", "vramscope"), 0o755);
    if (target) writeFileSync(path.join(dir, "bin", "target"), target + "\n");
  }
  return dir;
}

function withPath(p, f) {
  const saved = process.env.PATH;
  process.env.PATH = p;
  try {
    return f();
  } finally {
    process.env.PATH = saved;
  }
}

test("the server the extension starts", async (t) => {
  const config = await loadConfig({});
  const emptyPath = mkdtempSync(path.join(os.tmpdir(), "vramscope-path-"));
  const withEngine = mkdtempSync(path.join(os.tmpdir(), "vramscope-path-"));
  writeFileSync(path.join(withEngine, "vramscope"), "#!/bin/sh\n");
  chmodSync(path.join(withEngine, "vramscope"), 0o755);

  await t.test("the bundled engine when bin/target is this platform", () => {
    const dir = extensionDir(here);
    assert.equal(config.serverCommand(dir), path.join(dir, "bin", "vramscope"));
    assert.equal(withPath(emptyPath, () => config.missingServer(dir)), undefined);
  });
  await t.test("another platform's engine is not run: vramscope on PATH instead", () => {
    const dir = extensionDir(other);
    assert.equal(config.serverCommand(dir), "vramscope");
    assert.equal(withPath(withEngine, () => config.missingServer(dir)), undefined);
    const msg = withPath(emptyPath, () => config.missingServer(dir));
    assert.match(msg, new RegExp(`carries the engine for ${other}, not ${here}`));
    assert.match(msg, /not on PATH/);
    assert.match(msg, /make dist/);
    assert.match(msg, /go install \.\/cmd\/vramscope/);
    assert.doesNotMatch(msg, /@latest|pip install vramscope/); // no release is published: only routes that work
    assert.match(msg, /vramscope\.path/);
  });
  await t.test("no engine bundled and none on PATH", () => {
    const dir = extensionDir(undefined);
    assert.equal(config.serverCommand(dir), "vramscope");
    assert.match(withPath(emptyPath, () => config.missingServer(dir)), /carries no engine/);
  });
  await t.test("vramscope.path wins and is never second-guessed", async () => {
    const pinned = await loadConfig({ path: "/opt/vramscope" });
    assert.equal(pinned.serverCommand(extensionDir(other)), "/opt/vramscope");
    assert.equal(withPath(emptyPath, () => pinned.missingServer(extensionDir(undefined))), undefined);
  });
});
