// Bundles src/extension.ts (and vscode-languageclient) into out/extension.js
// with esbuild: the .vsix then needs no node_modules (vsce --no-dependencies).
import { build } from "esbuild";

await build({
  entryPoints: ["src/extension.ts"],
  bundle: true,
  outfile: "out/extension.js",
  platform: "node",
  target: "node20",
  format: "cjs",
  external: ["vscode"],
  sourcemap: true,
  logLevel: "warning",
});
