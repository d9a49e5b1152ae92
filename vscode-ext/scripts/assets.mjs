// Copies what the extension ships from the rest of the repository:
//   profiler/flame/web/files.json and the files it lists -> media/ (the one flame-graph
//     renderer and the linked report; src/webfiles.ts reads the list to load them;
//     test/e2e.test.mjs's .vsix test fails when the copies differ from the originals)
//   bin/vramscope -> bin/vramscope (the language server for linux-x64; `make build`
//     makes it, and this script builds it with go when it is missing), and bin/target
//     saying which platform it is for (deploy/dist/dist.py packages one .vsix per
//     target, each with its engine and its bin/target)
import { execFileSync } from "node:child_process";
import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const ext = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const repo = path.resolve(ext, "..");

const web = path.join(repo, "profiler/flame/web");
const core = JSON.parse(readFileSync(path.join(web, "files.json"), "utf8"));
mkdirSync(path.join(ext, "media"), { recursive: true });
for (const f of ["files.json", ...core.scripts.map((s) => s.file), ...core.styles.map((s) => s.file)]) {
  copyFileSync(path.join(web, f), path.join(ext, "media", f));
}

const server = path.join(repo, "bin/vramscope");
if (!existsSync(server)) {
  console.log("bin/vramscope is missing: go build ./cmd/vramscope");
  execFileSync("go", ["build", "-o", server, "./cmd/vramscope"], { cwd: repo, stdio: "inherit" });
}
mkdirSync(path.join(ext, "bin"), { recursive: true });
copyFileSync(server, path.join(ext, "bin/vramscope"));
chmodSync(path.join(ext, "bin/vramscope"), 0o755);
// bin/vramscope is built for this machine (make build), so that is its target.
writeFileSync(path.join(ext, "bin/target"), `${process.platform}-${process.arch}\n`);
