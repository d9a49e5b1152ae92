// The harness of the code-server tests (e2e.test.mjs, report.test.mjs): the
// packaged .vsix installed into a fresh code-server 4.100.3 (VS Code 1.100.3
// in a browser) on 127.0.0.1, driven by Debian's chromium through
// playwright-core, and the helpers every step uses.
//
// Determinism: no step acts on screen coordinates measured before the layout
// settles. The palette, Quick Open, Go to Line, the hover and the Settings
// editor come from keys bound to their command ids in keybindings.json, and
// each step first waits for the state it needs. attempt() may repeat an input
// once, only where the editor is known to drop input, and the output says so
// ("# retry: ..."); a second dropped input in the same step fails it.
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
export const ext = path.resolve(here, "..");
export const repoRoot = path.resolve(ext, "..");
export const shared = path.resolve(process.env.VRAMSCOPE_SHARED || path.join(repoRoot, "../shared"));
export const fixtures = path.join(shared, "fixtures");
export const codeServer = path.join(here, "code-server/node_modules/code-server/out/node/entry.js");
export const chromiumPath = process.env.VRAMSCOPE_CHROMIUM || "/usr/bin/chromium";
const artifactsRoot = process.env.VRAMSCOPE_ARTIFACTS ? path.resolve(process.env.VRAMSCOPE_ARTIFACTS) : path.join(repoRoot, "test-artifacts");
// In CI (CI, or VRAMSCOPE_CI=1) the opt-out is ignored: a missing code-server fails there.
const inCI = Boolean(process.env.CI) || process.env.VRAMSCOPE_CI === "1";
export const skip = process.env.VRAMSCOPE_SKIP_VSCODE === "1" && !inCI ? "VRAMSCOPE_SKIP_VSCODE=1" : false;

export const sha256 = (file) => createHash("sha256").update(readFileSync(file)).digest("hex");

export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** waitFor polls fn until it returns something truthy; the error names what it waited for. */
export async function waitFor(what, fn, timeoutMs = 30_000, everyMs = 200) {
  const end = Date.now() + timeoutMs;
  let last;
  while (Date.now() < end) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`timed out waiting for ${what}${last ? ": " + last.message : ""}`);
}

// The .vsix is packaged once per test process, by whichever test asks first.
let packaged;
export function packageVsix() {
  packaged ??= (() => {
    const version = JSON.parse(readFileSync(path.join(ext, "package.json"), "utf8")).version;
    execFileSync("npm", ["run", "package", "-w", "vscode-ext", "--silent"], { cwd: repoRoot, stdio: ["ignore", "ignore", "inherit"] });
    const vsix = path.join(ext, `vramscope-${version}.vsix`);
    assert.ok(existsSync(vsix), `npm run package wrote no ${vsix}`);
    return vsix;
  })();
  return packaged;
}

// The commands the tests run from the keyboard, each bound by its command id
// to a key nothing else uses: no step relies on a default shortcut reaching
// the part of the workbench that happens to have focus.
const keys = {
  palette: ["Control+Alt+Shift+F1", "workbench.action.showCommands"],
  quickOpen: ["Control+Alt+Shift+F2", "workbench.action.quickOpen"],
  goToLine: ["Control+Alt+Shift+F3", "workbench.action.gotoLine"],
  showHover: ["Control+Alt+Shift+F4", "editor.action.showHover"],
  settings: ["Control+Alt+Shift+F5", "workbench.action.openSettings2"],
  focusEditor: ["Control+Alt+Shift+F6", "workbench.action.focusActiveEditorGroup"],
  insertLineBefore: ["Control+Alt+Shift+F7", "editor.action.insertLineBefore"],
  undo: ["Control+Alt+Shift+F8", "undo"],
  // The fixtures open read-only (files.readonlyInclude below); the edit step
  // makes train_gpt2.py's editor writeable for a while (never saved: autoSave off).
  writeable: ["Control+Alt+Shift+F9", "workbench.action.files.setActiveEditorWriteableInSession"],
  readonly: ["Control+Alt+Shift+F10", "workbench.action.files.setActiveEditorReadonlyInSession"],
};

// The user settings every run starts from; a test adds its own.
const baseSettings = {
  "vramscope.daemon": "off",
  "workbench.startupEditor": "none",
  "workbench.tips.enabled": false,
  "workbench.enableExperiments": false,
  "security.workspace.trust.enabled": false,
  "telemetry.telemetryLevel": "off",
  "extensions.autoCheckUpdates": false,
  "extensions.autoUpdate": false,
  "update.mode": "none",
  "editor.hover.delay": 200,
  // The fixtures are shared: nothing a test types may reach them (VS Code
  // for the web saves after a delay by default).
  "files.autoSave": "off",
  "files.readonlyInclude": { [`${fixtures}/**`]: true },
};

/**
 * openCodeServer installs the .vsix into a fresh code-server whose user
 * settings are the base ones plus `settings`, opens `folder` (default: the
 * shared fixtures) in chromium and returns the page with the helpers below.
 * Screenshots and logs go to $VRAMSCOPE_ARTIFACTS/<name> (default
 * test-artifacts/<name>), emptied first. Everything stops when t ends.
 */
export async function openCodeServer(t, { name, settings = {}, folder = fixtures }) {
  const started = Date.now();
  assert.ok(existsSync(codeServer), `code-server is not installed at ${codeServer}: run make setup`);
  assert.ok(existsSync(chromiumPath), `chromium not found at ${chromiumPath}: apt-get install chromium`);
  assert.ok(existsSync(fixtures), `the shared fixtures are not at ${fixtures} (set VRAMSCOPE_SHARED)`);
  const { chromium } = await import("playwright-core");
  // Only this run's screenshots and logs: nothing left from an earlier one.
  const artifacts = path.join(artifactsRoot, name);
  rmSync(artifacts, { recursive: true, force: true });
  mkdirSync(artifacts, { recursive: true });
  const shot = async (page, file) => {
    const out = path.join(artifacts, file);
    await page.screenshot({ path: out });
    t.diagnostic(`screenshot: ${path.relative(repoRoot, out)}`);
  };
  const vsix = packageVsix();

  const work = mkdtempSync(path.join(tmpdir(), "vramscope-vscode-"));
  const server = await startServer(t, work, vsix, artifacts);
  const userData = server.userData;
  const writeSettings = (extra = {}) =>
    writeFileSync(path.join(userData, "User/settings.json"), JSON.stringify({ ...baseSettings, ...settings, ...extra }, null, 2));
  writeSettings();
  await server.listen();

  const browser = await chromium.launch({
    executablePath: chromiumPath,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  t.after(() => browser.close());
  const context = await browser.newContext({ viewport: { width: 1500, height: 900 }, deviceScaleFactor: 1 });
  const page = await context.newPage();
  // Only loopback: anything else the page asks for is recorded and fails the test.
  const foreign = [];
  await context.route("**/*", (route) => {
    const u = new URL(route.request().url());
    if (u.protocol === "data:" || u.protocol === "blob:" || u.hostname === "127.0.0.1" || u.hostname === "localhost" || u.hostname.endsWith(".localhost")) {
      return route.continue();
    }
    foreign.push(route.request().url());
    return route.abort();
  });
  const cspErrors = [];
  page.on("console", (m) => {
    if (/Content Security Policy|Refused to (load|execute|apply)/.test(m.text())) cspErrors.push(m.text());
  });
  await page.goto(`${server.base}/?folder=${encodeURIComponent(folder)}`);
  await page.waitForSelector(".monaco-workbench .part.editor", { timeout: 90_000 });
  t.diagnostic(`workbench up after ${((Date.now() - started) / 1000).toFixed(1)} s`);

  const h = { t, page, context, work, userData, socket: server.socket, artifacts, shot, writeSettings, foreign, cspErrors, started };
  Object.assign(h, workbenchHelpers(h));
  return h;
}

// startServer writes the keybindings, installs the .vsix and starts
// code-server on a free loopback port (listen() waits for it); the after
// hooks stop it (its extension host and language server with it), keep its
// log and remove `work`.
async function startServer(t, work, vsix, artifacts) {
  // Removed once code-server has exited (after hooks run in the order they
  // are added: this one stops it first); the retries cover its children
  // (extension host, language server) still closing files in it.
  let stop = async () => {};
  t.after(async () => {
    await stop();
    rmSync(work, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
  });
  const userData = path.join(work, "user-data");
  mkdirSync(path.join(userData, "User"), { recursive: true });
  writeFileSync(
    path.join(userData, "User/keybindings.json"),
    JSON.stringify(Object.values(keys).map(([key, command]) => ({ key: key.toLowerCase().replace("control", "ctrl"), command })), null, 2),
  );
  // The daemon's socket (the server reads $VRAMSCOPE_SOCKET); with
  // vramscope.daemon "off" nothing looks at it.
  const socket = path.join(work, "d.sock");
  const env = {
    ...process.env,
    VRAMSCOPE_SOCKET: socket,
    XDG_CONFIG_HOME: path.join(work, "config"),
    XDG_DATA_HOME: path.join(work, "data"),
    XDG_CACHE_HOME: path.join(work, "cache"),
  };
  const csArgs = ["--user-data-dir", userData, "--extensions-dir", path.join(work, "extensions"), "--config", path.join(work, "config.yaml")];
  const installOut = execFileSync(process.execPath, [codeServer, ...csArgs, "--install-extension", vsix], { env, encoding: "utf8" });
  assert.match(installOut, /successfully installed/, installOut);

  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const log = [];
  const flags = ["--auth", "none", "--disable-telemetry", "--disable-update-check", "--disable-workspace-trust", "--disable-getting-started-override", "--ignore-last-opened"];
  const listen = async () => {
    const cs = spawn(process.execPath, [codeServer, ...csArgs, "--bind-addr", `127.0.0.1:${port}`, ...flags], { env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    cs.stdout.on("data", (d) => log.push(String(d)));
    cs.stderr.on("data", (d) => log.push(String(d)));
    const exited = new Promise((resolve) => cs.once("exit", resolve));
    stop = async () => {
      if (cs.exitCode !== null || cs.signalCode !== null) return;
      try {
        process.kill(-cs.pid, "SIGTERM"); // code-server, its extension host and vramscope lsp
      } catch {
        return; // already gone
      }
      let timer;
      const late = new Promise((resolve) => (timer = setTimeout(() => resolve("late"), 15_000)));
      if ((await Promise.race([exited, late])) === "late") {
        try {
          process.kill(-cs.pid, "SIGKILL");
        } catch {
          // gone meanwhile
        }
      }
      clearTimeout(timer);
    };
    t.after(() => writeFileSync(path.join(artifacts, "code-server.log"), log.join("")));
    await waitFor("code-server to listen", async () => (await fetch(`${base}/healthz`)).ok, 60_000, 250);
  };
  return { userData, socket, base, listen };
}

// workbenchHelpers are the step and input helpers over h.page.
function workbenchHelpers(h) {
  const { t, page } = h;
  // step is a subtest that leaves a screenshot behind when it fails.
  // retried names the step that has used its one retry (attempt, below).
  let retried = null;
  let current = "the set-up before the steps";
  const step = (name, fn) =>
    t.test(name, async () => {
      current = name;
      try {
        await fn();
      } catch (err) {
        const file = path.join(h.artifacts, `failed-${name.replace(/[^A-Za-z0-9]+/g, "-").slice(0, 60)}.png`);
        await page.screenshot({ path: file }).catch(() => {});
        t.diagnostic(`failure screenshot: ${path.relative(repoRoot, file)}`);
        throw err;
      }
    });
  // attempt does act, then waits until done() holds. Where the editor is known
  // to drop input (a key pressed or a click made while the workbench is busy
  // moving focus), it does act once more, and says so in the test output.
  // At most one retry in a step: a second dropped input fails the step.
  const attempt = async (what, act, done, timeoutMs = 10_000) => {
    await act();
    try {
      return await waitFor(what, done, timeoutMs);
    } catch (err) {
      if (retried === current) throw new Error(`${err.message}; the step "${current}" has used its one retry`);
      retried = current;
      t.diagnostic(`retry: no ${what} ${timeoutMs / 1000} s after the input; giving it once more (step "${current}")`);
      await act();
      return waitFor(`${what} (after one retry)`, done, 2 * timeoutMs);
    }
  };
  const press = (name) => () => page.keyboard.press(keys[name][0]);
  const quickInput = page.locator(".quick-input-widget input");
  const quickInputOpen = () => quickInput.isVisible().catch(() => false);
  // closeQuickInput leaves no quick input open from an earlier step.
  const closeQuickInput = async () => {
    if (await quickInputOpen()) {
      await page.keyboard.press("Escape");
      await waitFor("the quick input to close", async () => !(await quickInputOpen()), 10_000);
    }
  };
  // editorFocused: the keyboard is in the active editor and its tab is name's.
  const editorFocused = (name) =>
    page.evaluate((name) => {
      const a = document.activeElement;
      const tab = document.querySelector(".editor-group-container.active .tab.active");
      return !!(a && a.closest(".editor-group-container.active .monaco-editor")) && (tab?.getAttribute("aria-label") || "").includes(name);
    }, name);
  // focusEditor brings the keyboard back to name's editor (out of a webview,
  // the Settings editor or a quick input): its tab, then the editor group.
  const focusEditor = async (name) => {
    await closeQuickInput();
    await page.locator(`.tabs-container .tab[aria-label*="${name}"]`).first().click();
    await attempt(`keyboard focus in ${name}'s editor`, press("focusEditor"), () => editorFocused(name));
  };
  // quickPick opens a quick input with `key` (unless one is open), types
  // `text` and waits until done() holds. A quick input closes when the
  // workbench moves focus while it opens (a soak run saw the palette open
  // and close before the text went in): that counts as one dropped input.
  const quickPick = (what, key, text, done) =>
    attempt(what, async () => {
      if (!(await quickInputOpen())) await press(key)();
      await quickInput.fill(text, { timeout: 5_000 }).catch(() => {});
    }, async () => (await quickInputOpen()) && (await done()));
  // palette runs a command by its title from the command palette; Enter only
  // once the title is the palette's focused row.
  const palette = async (title) => {
    await closeQuickInput();
    const row = page.locator(`.quick-input-list .monaco-list-row.focused[aria-label*="${title}"]`);
    await quickPick(`"${title}" as the command palette's focused row`, "palette", `>${title}`, async () => (await row.count()) > 0);
    await page.keyboard.press("Enter");
  };
  // goToLine puts the cursor on line:col with Go to Line, and waits for the
  // status bar to say so.
  const goToLine = async (line, col) => {
    await closeQuickInput();
    await quickPick(`Go to Line holding :${line}:${col}`, "goToLine", `:${line}:${col}`, async () => (await quickInput.inputValue()) === `:${line}:${col}`);
    await page.keyboard.press("Enter");
    await waitFor(`the cursor at Ln ${line}, Col ${col}`, async () => new RegExp(`Ln ${line}, Col ${col}\\b`).test((await page.textContent(".part.statusbar")) || ""), 10_000);
  };
  // openFile opens rel (a path under the folder) with Quick Open.
  const openFile = async (rel) => {
    const base = path.basename(rel);
    const fileRow = page.locator(`.quick-input-list .monaco-list-row.focused[aria-label*="${base}"]`);
    await quickPick(`${base} as Quick Open's focused row`, "quickOpen", rel, async () => (await fileRow.count()) > 0);
    await page.keyboard.press("Enter");
    await page.waitForSelector(`.tabs-container .tab.active[aria-label*="${base}"]`, { timeout: 30_000 });
  };
  // editSetting changes one setting in the Settings editor and waits until
  // settings.json holds it (the default value removes the key instead);
  // `from` names the editor the Settings editor opens over.
  const editSetting = async (key, change, value, defaultValue, from = "train_gpt2.py") => {
    await focusEditor(from);
    const box = page.locator(".settings-editor .settings-header .monaco-editor textarea").first();
    await attempt("Settings editor", press("settings"), async () => (await box.count()) > 0);
    const count = async () => (await page.textContent(".settings-editor .settings-count-widget").catch(() => "")) || "";
    // "@id:" filters by the exact setting id: a plain search is fuzzy and,
    // now and then, also lists settings that merely mention a word of it.
    await attempt(
      `"1 Setting Found" for @id:${key}`,
      async () => {
        await box.focus();
        await page.keyboard.press("Control+A");
        await page.keyboard.type(`@id:${key}`);
      },
      async () => /^1 Setting Found/.test(await count()),
    );
    await change();
    await waitFor(`settings.json to hold ${key} = ${value}`, () => {
      const json = JSON.parse(readFileSync(path.join(h.userData, "User/settings.json"), "utf8"));
      return String(json[key] ?? defaultValue) === value;
    }, 10_000);
  };
  // flameFrame is the flame-graph webview's frame (flame.js loaded and drawn).
  const flameFrame = async () =>
    waitFor(
      "the flame-graph webview",
      async () => {
        for (const f of page.frames()) {
          const ok = await f.evaluate(() => !!(window.vramscope && window.vramscope.state && document.querySelector("canvas.vf-canvas"))).catch(() => false);
          if (ok) return f;
        }
        return null;
      },
      30_000,
    );
  // assertClean: no error notification, no CSP violation, no request beyond loopback.
  const assertClean = async () => {
    const toasts = (await page.locator(".notifications-toasts .notification-list-item-message").allTextContents()).join("\n");
    assert.doesNotMatch(toasts, /failed|error/i, "no error notifications");
    assert.deepEqual(h.cspErrors, [], "Content-Security-Policy violations");
    assert.deepEqual(h.foreign, [], "requests beyond loopback");
  };
  return { step, attempt, press, quickInput, quickInputOpen, closeQuickInput, focusEditor, quickPick, palette, goToLine, openFile, editSetting, flameFrame, assertClean };
}

/**
 * frameRuns scans the flame graph in frame (a webview's document) row by row
 * through the renderer's own hit-testing (window.vramscope.frameAt), every
 * stepPx pixels, and lists each run of one frame: {name, file, line, x, y, w},
 * x and y its middle in canvas coordinates, w its width.
 */
export function frameRuns(frame, stepPx) {
  return frame.evaluate((stepPx) => {
    const c = document.querySelector("canvas.vf-canvas");
    const r = c.getBoundingClientRect();
    const rowH = window.vramscope.state().rowHeight;
    const runs = [];
    for (let row = 0; (row + 0.5) * rowH < r.height; row++) {
      let runStart = -1;
      let prev = null;
      for (let x = 0; x <= r.width; x += stepPx) {
        const f = x < r.width ? window.vramscope.frameAt(r.left + x, r.top + (row + 0.5) * rowH) : null;
        const same = f && prev && f.name === prev.name && f.file === prev.file && f.line === prev.line;
        if (!same) {
          if (prev) runs.push({ ...prev, x: (runStart + x) / 2, y: (row + 0.5) * rowH, w: x - runStart });
          runStart = x;
        }
        prev = f;
      }
    }
    return runs;
  }, stepPx);
}
