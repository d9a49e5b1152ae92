// make bench-hosts: the linked report in its two other hosts, the notebook
// widget (JupyterLab 4, a real kernel) and the VS Code webview (code-server
// 4.100.3), on the large shared snapshots (1M and 5M trace entries), beside
// the CLI's page measured in the same run (bench/page.mjs's openPage).
// For each host and snapshot, in a fresh chromium (playwright-core):
//   - open -> report drawn: from the open action (the `%vramscope open` cell
//     run, or the "vramscope: Show Flame Graph" command's key) to the
//     performance mark vramscope-report-end that report.js sets once the
//     timeline and the flame graph are painted. The kernel's or the language
//     server's engine run is inside this time; the page's figure starts at
//     navigation, its engine run (analyze --html) is before it;
//   - the renderer processes' memory (Pss summed, as bench/page.mjs), before
//     the open (the bare JupyterLab / workbench) and once the report is drawn;
//   - click -> flame: 25 mouse clicks across the timeline, each timed in the
//     report's own document from the mouseup to the second animation frame.
// Writes its section of docs/page-bench.md (after make bench-page's table, which keeps it).
//
//   node bench/hosts.mjs [--out docs/page-bench.md] [--only widget|webview]
import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { openPage, rendererRSS, snapshot } from "./page.mjs";
import { waitFor } from "../vscode-ext/test/harness.mjs"; // the e2e tests' poll, whose errors name what they waited for

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const bin = path.join(repo, "bin", "vramscope");
const work = path.join(repo, ".bench");
const chromiumPath = process.env.VRAMSCOPE_CHROMIUM || "/usr/bin/chromium";
const codeServer = path.join(repo, "vscode-ext/test/code-server/node_modules/code-server/out/node/entry.js");
const arg = (name) => (process.argv.indexOf(name) > 0 ? process.argv[process.argv.indexOf(name) + 1] : null);
const outDoc = arg("--out") || path.join(repo, "docs", "page-bench.md");
const only = arg("--only");
const NAMES = (process.env.BENCH_HOSTS_NAMES || "gpt2_long_1000k,gpt2_long_5000k").split(",");
const MiB = 1024 * 1024;
const BROWSER_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--enable-precise-memory-info"];

// reportEnd is the epoch time (ms) of the first vramscope-report-end mark in
// frame, or null: timeOrigin + startTime compares documents (the webview's
// iframe has its own time origin).
const reportEnd = (frame) =>
  frame.evaluate(() => {
    const m = performance.getEntriesByName("vramscope-report-end", "mark")[0];
    return m ? performance.timeOrigin + m.startTime : null;
  });

// clickMoments clicks 25 moments across the timeline of the report in frame
// (api: an expression for its controller) with the mouse, as bench/page.mjs
// does; the page's coordinates are the canvas's box plus its offset in frame.
async function clickMoments(page, frame, api) {
  const canvas = frame.locator("canvas.vt-canvas").first();
  await canvas.scrollIntoViewIfNeeded();
  await frame.evaluate(() => {
    window.__clicks = [];
    document.querySelector("canvas.vt-canvas").addEventListener("mouseup", (e) => {
      const start = e.timeStamp;
      requestAnimationFrame(() => requestAnimationFrame(() => window.__clicks.push(performance.now() - start)));
    });
  });
  const box = await canvas.boundingBox();
  const left = await frame.evaluate(() => document.querySelector("canvas.vt-canvas").getBoundingClientRect().left);
  const full = await frame.evaluate(`(${api}).timeline.state().full`);
  for (let i = 0; i < 25; i++) {
    const t = full[0] + ((i + 0.5) / 25) * (full[1] - full[0]);
    const x = await frame.evaluate(`(${api}).timeline.xAt(${t})`);
    await page.mouse.click(box.x + (x - left), box.y + box.height / 2);
    await frame.waitForFunction((n) => window.__clicks.length >= n, i + 1, { timeout: 30_000 });
  }
  const ms = await frame.evaluate(() => window.__clicks.slice());
  if (!(await frame.evaluate(`(${api}).reportState().moment`))) throw new Error("the clicks picked no moment");
  ms.sort((a, b) => a - b);
  return { median: ms[Math.floor(ms.length / 2)], max: ms[ms.length - 1], n: ms.length };
}

// measure times one open in a fresh browser: goto loads the host and waits
// until it is ready, open starts the report (returns the epoch ms it did so)
// and reportFrame finds the document that draws it.
async function measure(chromium, { goto, open, reportFrame, api }) {
  const browser = await chromium.launch({ executablePath: chromiumPath, args: BROWSER_ARGS });
  try {
    const page = await (await browser.newContext({ viewport: { width: 1400, height: 900 }, deviceScaleFactor: 1 })).newPage();
    const errors = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    await goto(page);
    const before = rendererRSS(process.pid);
    const navStart = await page.evaluate(() => performance.timeOrigin);
    const started = await open(page);
    const frame = await waitFor("the report's document", () => reportFrame(page), 180_000);
    const end = await waitFor("the mark vramscope-report-end", () => reportEnd(frame), 180_000);
    const rss = rendererRSS(process.pid);
    const heap = await frame.evaluate(() => (performance.memory ? performance.memory.usedJSHeapSize : 0));
    const clicks = await clickMoments(page, frame, api);
    return { openMs: end - started, loadMs: end - navStart, before, rss, heap, clicks, rssAfterClicks: rendererRSS(process.pid), errors };
  } catch (err) {
    for (const p of browser.contexts().flatMap((c) => c.pages())) await p.screenshot({ path: path.join(work, "hosts-failed.png") }).catch(() => {});
    throw err;
  } finally {
    await browser.close();
  }
}

// --- the notebook widget ---------------------------------------------------------

// lab starts JupyterLab through jupyter/tests/labserver.py (closing its stdin stops it).
async function lab(root) {
  const py = [
    "import json, os, pathlib, select, sys",
    `sys.path.insert(0, ${JSON.stringify(path.join(repo, "jupyter/tests"))})`,
    "from labserver import serve",
    "with serve(pathlib.Path(sys.argv[1])) as (url, token, root):",
    "    print(json.dumps([url, token, str(root)]), flush=True)",
    // Until stdin closes; select, as node may leave the pipe non-blocking.
    "    while select.select([0], [], [])[0] and os.read(0, 4096):",
    "        pass",
  ].join("\n");
  const p = spawn(path.join(repo, ".venv/bin/python"), ["-c", py, root], { stdio: ["pipe", "pipe", "inherit"] });
  let out = "";
  p.stdout.on("data", (d) => (out += d));
  const [url, token, labRoot] = await waitFor("JupyterLab", () => (out.includes("\n") ? JSON.parse(out.split("\n")[0]) : null), 90_000);
  return { url, token, labRoot, stop: () => new Promise((r) => (p.exitCode !== null || p.signalCode !== null ? r() : (p.once("exit", r), p.stdin.end()))) };
}

function writeNotebook(file, snap) {
  const cell = (src) => ({ cell_type: "code", execution_count: null, metadata: {}, outputs: [], source: src });
  const nb = {
    nbformat: 4, nbformat_minor: 5,
    metadata: { kernelspec: { name: "python3", display_name: "Python 3", language: "python" } },
    cells: [cell(`%load_ext vramscope\nimport os\nos.chdir(${JSON.stringify(repo)})`), cell(`%vramscope open ${snap}`)],
  };
  writeFileSync(file, JSON.stringify(nb));
}

// widgetRun starts a JupyterLab of its own (a second notebook in one
// workspace would open beside the first one's tab; no server runs beside the
// webview's), opens NAME.ipynb and runs `%vramscope open snap`.
async function widgetRun(chromium, name, snap) {
  const tmp = mkdtempSync(path.join(os.tmpdir(), "vramscope-bench-lab-"));
  const server = await lab(tmp);
  try {
    return await widgetMeasure(chromium, server, name, snap);
  } finally {
    await server.stop();
    rmSync(tmp, { recursive: true, force: true });
  }
}

async function widgetMeasure(chromium, server, name, snap) {
  writeNotebook(path.join(server.labRoot, name + ".ipynb"), snap);
  const kernelIdle = () => {
    const w = window.jupyterapp.shell.currentWidget;
    const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
    return k && k.status === "idle";
  };
  return measure(chromium, {
    async goto(page) {
      await page.goto(`${server.url}lab/tree/${name}.ipynb?token=${server.token}`);
      await page.waitForFunction(() => window.jupyterapp && document.querySelector(".jp-Notebook"), null, { timeout: 90_000 });
      await page.waitForFunction(kernelIdle, null, { timeout: 90_000 });
      // The first cell (load the extension) runs before the clock starts.
      await page.evaluate(() => {
        const nb = window.jupyterapp.shell.currentWidget.content;
        nb.activeCellIndex = 0;
        return window.jupyterapp.commands.execute("notebook:run-cell");
      });
      await page.waitForFunction(() => window.jupyterapp.shell.currentWidget.content.widgets[0].model.executionCount > 0, null, { timeout: 60_000 });
      await page.waitForFunction(kernelIdle, null, { timeout: 60_000 });
    },
    open: (page) =>
      page.evaluate(() => {
        const nb = window.jupyterapp.shell.currentWidget.content;
        nb.activeCellIndex = 1;
        const t = performance.timeOrigin + performance.now();
        window.jupyterapp.commands.execute("notebook:run-cell");
        return t;
      }),
    reportFrame: async (page) => ((await page.locator(".vs-widget canvas.vt-canvas").count()) ? page.mainFrame() : null),
    api: 'document.querySelector(".vs-widget").__vramscope',
  });
}

// --- the VS Code webview ---------------------------------------------------------

const SHOW_KEY = "Control+Alt+Shift+F7";

// codeServer installs the freshly packaged .vsix into a private code-server
// whose vramscope.snapshot is snap (daemon "off"), and starts it.
async function startCodeServer(vsix, snap) {
  const dir = mkdtempSync(path.join(os.tmpdir(), "vramscope-bench-vscode-"));
  const userData = path.join(dir, "user-data");
  mkdirSync(path.join(userData, "User"), { recursive: true });
  writeFileSync(path.join(userData, "User/settings.json"), JSON.stringify({
    "vramscope.snapshot": snap, "vramscope.daemon": "off", "workbench.startupEditor": "none", "workbench.tips.enabled": false,
    "workbench.enableExperiments": false, "security.workspace.trust.enabled": false, "telemetry.telemetryLevel": "off",
    "extensions.autoCheckUpdates": false, "extensions.autoUpdate": false, "update.mode": "none", "files.autoSave": "off",
  }));
  // The command by its id on a key nothing else uses (as e2e.test.mjs binds its commands).
  writeFileSync(path.join(userData, "User/keybindings.json"), JSON.stringify([{ key: SHOW_KEY.toLowerCase().replace("control", "ctrl"), command: "vramscope.showFlameGraph" }]));
  const env = { ...process.env, XDG_CONFIG_HOME: path.join(dir, "config"), XDG_DATA_HOME: path.join(dir, "data"), XDG_CACHE_HOME: path.join(dir, "cache") };
  delete env.VRAMSCOPE_SOCKET;
  const csArgs = ["--user-data-dir", userData, "--extensions-dir", path.join(dir, "extensions"), "--config", path.join(dir, "config.yaml")];
  execFileSync(process.execPath, [codeServer, ...csArgs, "--install-extension", vsix], { env, stdio: "ignore" });
  const port = 20000 + Math.floor(Math.random() * 20000);
  const cs = spawn(process.execPath, [codeServer, ...csArgs, "--bind-addr", `127.0.0.1:${port}`, "--auth", "none", "--disable-telemetry",
    "--disable-update-check", "--disable-workspace-trust", "--disable-getting-started-override", "--ignore-last-opened"], { env, detached: true, stdio: "ignore" });
  const base = `http://127.0.0.1:${port}`;
  await waitFor("code-server to listen", async () => (await fetch(`${base}/healthz`)).ok, 60_000, 250);
  const stop = async () => {
    try {
      process.kill(-cs.pid, "SIGTERM"); // code-server, its extension host and vramscope lsp
    } catch {
      return;
    }
    await new Promise((r) => (cs.exitCode !== null ? r() : cs.once("exit", r)));
    rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
  };
  return { base, stop };
}

async function webviewRun(chromium, vsix, snap) {
  const server = await startCodeServer(vsix, snap);
  try {
    return await measure(chromium, {
      async goto(page) {
        await page.goto(`${server.base}/?folder=${encodeURIComponent(work)}`);
        await page.waitForSelector(".monaco-workbench .part.editor", { timeout: 90_000 });
        // The extension is active (and its server started) once the status bar shows it.
        await waitFor("the vramscope status bar item", async () => /vramscope:/.test((await page.textContent(".part.statusbar")) || ""), 90_000);
        await page.locator(".monaco-workbench .part.editor").click();
      },
      // One press: while the language server is still analysing
      // vramscope.snapshot (it starts when the editor does), the command waits
      // for that analysis and the tab opens once it is done.
      async open(page) {
        const t = await page.evaluate(() => performance.timeOrigin + performance.now());
        const tab = page.locator('.tabs-container .tab[aria-label*="flame graph" i]');
        await page.keyboard.press(SHOW_KEY);
        await waitFor("the flame graph's tab", async () => (await tab.count()) > 0, 180_000);
        return t;
      },
      async reportFrame(page) {
        for (const f of page.frames()) {
          if (await f.evaluate(() => !!(window.vramscope && window.vramscope.reportState && document.querySelector("canvas.vt-canvas"))).catch(() => false)) return f;
        }
        return null;
      },
      api: "window.vramscope",
    });
  } finally {
    await server.stop();
  }
}

// --- main ------------------------------------------------------------------------

const fmt = (r) =>
  `open -> report drawn ${(r.openMs ?? r.interactiveMs).toFixed(0)} ms` +
  (r.loadMs !== undefined ? ` (host page load -> report drawn ${r.loadMs.toFixed(0)} ms)` : "") +
  `; renderer ${(r.rss / MiB).toFixed(0)} MiB Pss` +
  (r.before !== undefined ? ` (host alone ${(r.before / MiB).toFixed(0)})` : "") +
  `, ${(r.rssAfterClicks / MiB).toFixed(0)} after the clicks; JS heap ${(r.heap / MiB).toFixed(1)} MiB; click -> flame median ${r.clicks.median.toFixed(1)} ms, max ${r.clicks.max.toFixed(1)} ms`;

async function main() {
  if (!existsSync(bin)) throw new Error("bin/vramscope is missing: make build");
  const { chromium } = await import("playwright-core");
  const rows = [];
  const vsix = only === "widget" ? null : packageVsix();
  for (const name of NAMES) {
    {
      const snap = snapshot(name);
      const report = path.join(work, name + ".report.html");
      execFileSync(bin, ["analyze", "--html", report, snap], { stdio: "ignore" });
      const page = await openPage(chromium, report, true);
      rows.push({ name, host: "page (reference)", r: page });
      console.log(`${name} page (reference): ${fmt(page)}`);
      for (const [host, run] of [["widget", () => widgetRun(chromium, name, snap)], ["webview", () => webviewRun(chromium, vsix, snap)]]) {
        if (only && only !== host) continue;
        const r = await run();
        rows.push({ name, host, r });
        console.log(`${name} ${host}: ${fmt(r)}${r.errors.length ? "; page errors: " + r.errors.join("; ") : ""}`);
      }
    }
  }
  writeDoc(rows);
  console.log(`appended to ${path.relative(repo, outDoc)}`);
}

function packageVsix() {
  const version = JSON.parse(readFileSync(path.join(repo, "vscode-ext/package.json"), "utf8")).version;
  execFileSync("npm", ["run", "package", "-w", "vscode-ext", "--silent"], { cwd: repo, stdio: ["ignore", "ignore", "inherit"] });
  return path.join(repo, "vscode-ext", `vramscope-${version}.vsix`);
}

function writeDoc(rows) {
  const now = new Date().toISOString().replace("T", " ").slice(0, 16) + " UTC";
  const chromium = execFileSync(chromiumPath, ["--version"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
  const head = "## The widget and the webview (`make bench-hosts`)";
  const old = existsSync(outDoc) ? readFileSync(outDoc, "utf8") : "";
  const md = [
    head,
    "",
    `Run ${now} on ${os.hostname()} (${os.cpus().length} cores, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB; load average ${os.loadavg().map((x) => x.toFixed(2)).join(" ")}), ${chromium} headless through playwright-core, ` +
      "a fresh browser per run, viewport 1400x900 (bench/hosts.mjs). Widget: JupyterLab 4 (jupyter/tests/labserver.py), a real kernel; the clock starts when the `%vramscope open SNAPSHOT` cell is run " +
      "(the kernel runs the engine, then the widget draws). Webview: code-server 4.100.3 with the freshly packaged .vsix, `vramscope.snapshot` set to the snapshot, daemon off; the clock starts at the key bound to " +
      '"vramscope: Show Flame Graph" (the language server answers the tree and the report, the webview draws). Both stop at the mark `vramscope-report-end` in the report\'s document. ' +
      "The language server starts analysing `vramscope.snapshot` in the background when the editor starts it; the key is pressed as soon as the extension's status bar item shows, " +
      "and the command waits for that analysis, so the time holds what is left of it (a 5M-entry snapshot is still being read then). " +
      "'host page load -> report drawn' is from the JupyterLab or workbench page's navigation (for the widget it also holds the kernel's start and the `%load_ext` cell). " +
      "The page (reference, same run) is bench/page.mjs's measure: navigation to the mark, the engine run before it. Renderer: Pss of all renderer processes, summed (so for the hosts it includes JupyterLab or the workbench; 'host alone' is the same sum before the open). " +
      "Click -> flame: 25 mouse clicks across the timeline, mouseup to the second animation frame, in the report's document.",
    "",
    "| snapshot | host | open -> report drawn | host page load -> report drawn | renderer Pss (host alone; after clicks) | JS heap (report's document) | click -> flame (median / max) |",
    "|---|---|---|---|---|---|---|",
    ...rows.map(({ name, host, r }) =>
      `| ${name} | ${host} | ${(r.openMs ?? r.interactiveMs).toFixed(0)} ms | ${r.loadMs !== undefined ? r.loadMs.toFixed(0) + " ms" : "-"} | ${(r.rss / MiB).toFixed(0)} MiB (${r.before !== undefined ? (r.before / MiB).toFixed(0) : "-"}; ${(r.rssAfterClicks / MiB).toFixed(0)}) | ` +
        `${(r.heap / MiB).toFixed(1)} MiB | ${r.clicks.median.toFixed(1)} / ${r.clicks.max.toFixed(1)} ms |`),
    "",
    "Goals (issue #15): interactive <= 3 s in the page, the webview and the widget; renderer <= 500 MiB; click -> flame <= 300 ms.",
    "",
  ];
  const kept = old.includes(head) ? old.slice(0, old.indexOf(head)) : old + (old.endsWith("\n") ? "\n" : "\n\n");
  writeFileSync(outDoc, kept + md.join("\n"));
}

main().catch((err) => {
  console.error(err && err.stack ? err.stack : err);
  process.exit(1);
});
