// make bench-page: the linked report page (analyze --html) on the large
// shared snapshots (1M and 5M trace entries), in Debian's chromium through
// playwright-core. For each snapshot it prints, and writes to
// docs/page-bench.md:
//   - the engine: analyze --html's wall time and peak RSS (GNU time);
//   - the page's size, beside the same run's references: the old flame-only
//     page (flame --format html), the raw analysis JSON (analyze --json) and
//     the snapshot itself;
//   - in a fresh chromium per page: the time from navigation to the timeline
//     and flame graph drawn (the performance mark vramscope-report-end; both
//     are painted synchronously before it), the same for the flame-only page,
//     the renderer processes' memory (Pss, summed) and the JS heap;
//   - click -> flame: 25 real mouse clicks across the timeline, each timed in
//     the page from the click's event to the next painted frame (median, max).
// Goals (issue #15): page <= 5 MB, interactive <= 3 s, renderer <= 500 MiB,
// click -> flame <= 300 ms.
//
//   node bench/page.mjs [--out docs/page-bench.md]
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, renameSync, statSync, writeFileSync, readdirSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const bin = path.join(repo, "bin", "vramscope");
const fixtures = path.join(repo, "..", "shared", "fixtures", "snapshots", "large");
const work = path.join(repo, ".bench");
const chromiumPath = process.env.VRAMSCOPE_CHROMIUM || "/usr/bin/chromium";
const outArg = process.argv.indexOf("--out");
const outDoc = outArg > 0 ? process.argv[outArg + 1] : path.join(repo, "docs", "page-bench.md");
const NAMES = ["gpt2_long_1000k", "gpt2_long_5000k"];
const MiB = 1024 * 1024;

// snapshot decompresses NAME.pickle.xz into .bench/ (as make bench does) unless it is there.
export function snapshot(name) {
  mkdirSync(work, { recursive: true });
  const out = path.join(work, name + ".pickle");
  if (!existsSync(out)) {
    const tmp = out + ".tmp";
    execFileSync("sh", ["-c", 'xz -dc "$0" > "$1"', path.join(fixtures, name + ".pickle.xz"), tmp]);
    renameSync(tmp, out);
  }
  return out;
}

// timedRun runs bin/vramscope under GNU time: {seconds, rssMiB}.
function timedRun(args) {
  const stderrFile = path.join(work, "time.txt");
  execFileSync("sh", ["-c", '/usr/bin/time -f "%e %M" -o "$0" "$@" > /dev/null', stderrFile, bin, ...args]);
  const [s, kib] = readFileSync(stderrFile, "utf8").trim().split(/\s+/).map(Number);
  return { seconds: s, rssMiB: kib / 1024 };
}

function size(p) {
  return statSync(p).size;
}

// rendererRSS sums the proportional set size (Pss: shared pages split among
// the processes that map them, so libraries are not counted once per process)
// of the renderer processes under pid (this script: one browser at a time;
// Linux /proc).
export function rendererRSS(browserPid) {
  let total = 0;
  for (const pid of readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8");
      if (!cmd.includes("--type=renderer")) continue;
      const status = readFileSync(`/proc/${pid}/status`, "utf8");
      const ppid = Number(/PPid:\s+(\d+)/.exec(status)[1]);
      if (!isDescendant(ppid, browserPid)) continue;
      total += Number(/^Pss:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, "utf8"))[1]) * 1024;
    } catch {
      // the process ended while being read
    }
  }
  return total;
}

function isDescendant(pid, ancestor) {
  for (let i = 0; i < 8 && pid > 1; i++) {
    if (pid === ancestor) return true;
    try {
      pid = Number(/PPid:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))[1]);
    } catch {
      return false;
    }
  }
  return pid === ancestor;
}

export async function openPage(chromium, file, isReport) {
  const browser = await chromium.launch({ executablePath: chromiumPath, args: ["--headless", "--no-sandbox", "--disable-gpu", "--enable-precise-memory-info"] });
  try {
    const page = await (await browser.newContext({ viewport: { width: 1400, height: 900 } })).newPage();
    const errors = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    await page.goto(pathToFileURL(file).href, { timeout: 120_000 });
    await page.waitForFunction(() => window.vramscope && window.vramscope.state, null, { timeout: 120_000 });
    const mark = isReport ? "vramscope-report-end" : "vramscope-flame-render-end";
    const t = await page.evaluate((m) => performance.getEntriesByName(m, "mark")[0].startTime, mark);
    const heap = await page.evaluate(() => (performance.memory ? performance.memory.usedJSHeapSize : 0));
    const rss = rendererRSS(process.pid);
    const clicks = isReport ? await clickMoments(page) : null;
    if (errors.length) throw new Error(`${file}: page errors: ${errors.join("; ")}`);
    return { interactiveMs: t, heap, rss, clicks, rssAfterClicks: isReport ? rendererRSS(process.pid) : rss };
  } finally {
    await browser.close();
  }
}

// clickMoments clicks 25 moments across the timeline with the mouse; each is
// timed in the page from the mouseup event to the frame painted after it.
async function clickMoments(page) {
  await page.evaluate(() => {
    window.__clicks = [];
    document.querySelector("canvas.vt-canvas").addEventListener("mouseup", (e) => {
      const start = e.timeStamp;
      requestAnimationFrame(() => requestAnimationFrame(() => window.__clicks.push(performance.now() - start)));
    });
  });
  const box = await page.locator("canvas.vt-canvas").boundingBox();
  const full = await page.evaluate(() => window.vramscope.timeline.state().full);
  for (let i = 0; i < 25; i++) {
    const t = full[0] + ((i + 0.5) / 25) * (full[1] - full[0]);
    const x = await page.evaluate((t) => window.vramscope.timeline.xAt(t), t);
    await page.mouse.click(x, box.y + box.height / 2);
    await page.waitForFunction((n) => window.__clicks.length >= n, i + 1);
  }
  const ms = await page.evaluate(() => window.__clicks.slice());
  const moments = await page.evaluate(() => window.vramscope.reportState().moment);
  if (!moments) throw new Error("the clicks picked no moment");
  ms.sort((a, b) => a - b);
  return { median: ms[Math.floor(ms.length / 2)], max: ms[ms.length - 1], n: ms.length };
}

function fmtMB(n) {
  return (n / 1e6).toFixed(2) + " MB";
}

async function main() {
  if (!existsSync(bin)) throw new Error("bin/vramscope is missing: make build");
  const { chromium } = await import("playwright-core");
  const rows = [];
  for (const name of NAMES) {
    const snap = snapshot(name);
    const report = path.join(work, name + ".report.html");
    const flameOnly = path.join(work, name + ".flame.html");
    const json = path.join(work, name + ".analysis.json");
    const engine = timedRun(["analyze", "--html", report, snap]);
    execFileSync(bin, ["flame", "--format", "html", "-o", flameOnly, snap]);
    execFileSync("sh", ["-c", '"$0" analyze --json "$1" > "$2"', bin, snap, json]);
    const pageRun = await openPage(chromium, report, true);
    const flameRun = await openPage(chromium, flameOnly, false);
    const row = { name, snapBytes: size(snap), page: size(report), flamePage: size(flameOnly), json: size(json), engine, pageRun, flameRun };
    rows.push(row);
    console.log(
      `${name}: page ${fmtMB(row.page)} (flame-only page ${fmtMB(row.flamePage)}, analyze --json ${fmtMB(row.json)}, snapshot ${fmtMB(row.snapBytes)}); ` +
        `engine ${engine.seconds.toFixed(2)} s ${engine.rssMiB.toFixed(0)} MiB; interactive ${pageRun.interactiveMs.toFixed(0)} ms ` +
        `(flame-only ${flameRun.interactiveMs.toFixed(0)} ms); renderer ${(pageRun.rss / MiB).toFixed(0)} MiB Pss ` +
        `(${(pageRun.rssAfterClicks / MiB).toFixed(0)} after the clicks; flame-only ${(flameRun.rss / MiB).toFixed(0)}), JS heap ${(pageRun.heap / MiB).toFixed(1)} MiB; ` +
        `click -> flame median ${pageRun.clicks.median.toFixed(1)} ms, max ${pageRun.clicks.max.toFixed(1)} ms (${pageRun.clicks.n} clicks)`,
    );
  }
  writeDoc(rows);
  console.log(`wrote ${path.relative(repo, outDoc)}`);
}

function writeDoc(rows) {
  const now = new Date().toISOString().replace("T", " ").slice(0, 16) + " UTC";
  const cpu = (os.cpus()[0] || {}).model || "?";
  const chromium = execFileSync(chromiumPath, ["--version"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
  const md = [
    "# Report page benchmark (`make bench-page`)",
    "",
    `Run ${now} on ${os.hostname()} (${os.cpus().length} cores, ${cpu}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB; load average ${os.loadavg().map((x) => x.toFixed(2)).join(" ")}), ` +
      `${chromium} headless through playwright-core, a fresh browser per page, viewport 1400x900. ` +
      "What ran: `vramscope analyze --html` on the shared large snapshots (bench/page.mjs); the references come from the same run: " +
      "the flame-only page (`vramscope flame --format html`, what `analyze --html` wrote before the report) and the raw analysis (`analyze --json`). " +
      "PyTorch's memory_viz is not runnable here; on the H200 host its `trace_plot` page for the 5M snapshot is 590 MB (issue #15).",
    "",
    "Interactive: navigation start to the performance mark `vramscope-report-end` (the timeline and the flame graph are painted synchronously before it). " +
      "Renderer: the proportional set size (Pss, /proc/PID/smaps_rollup: shared pages split among the processes mapping them) of the browser's renderer processes, summed, once the page is drawn and again after the clicks. " +
      "Click -> flame: 25 mouse clicks across the timeline, each timed in the page from the click's mouseup event to the second animation frame after it (the moment's flame graph and top lines painted).",
    "",
    "| snapshot | page | flame-only page | analyze --json | snapshot | engine (analyze --html) | interactive | flame-only interactive | renderer Pss | JS heap | click -> flame (median / max) |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
  ];
  for (const r of rows) {
    md.push(
      `| ${r.name} | ${fmtMB(r.page)} | ${fmtMB(r.flamePage)} | ${fmtMB(r.json)} | ${fmtMB(r.snapBytes)} | ${r.engine.seconds.toFixed(2)} s, ${r.engine.rssMiB.toFixed(0)} MiB | ` +
        `${r.pageRun.interactiveMs.toFixed(0)} ms | ${r.flameRun.interactiveMs.toFixed(0)} ms | ${(r.pageRun.rss / MiB).toFixed(0)} MiB (${(r.pageRun.rssAfterClicks / MiB).toFixed(0)} after clicks; flame-only ${(r.flameRun.rss / MiB).toFixed(0)}) | ` +
        `${(r.pageRun.heap / MiB).toFixed(1)} MiB | ${r.pageRun.clicks.median.toFixed(1)} / ${r.pageRun.clicks.max.toFixed(1)} ms |`,
    );
  }
  md.push("", "Goals (issue #15): page <= 5 MB, interactive <= 3 s, renderer <= 500 MiB, click -> flame <= 300 ms.", "");
  // make bench-hosts's section (bench/hosts.mjs) stays, after this table.
  const old = existsSync(outDoc) ? readFileSync(outDoc, "utf8") : "";
  const hosts = old.indexOf("## The widget and the webview");
  writeFileSync(outDoc, md.join("\n") + (hosts >= 0 ? "\n" + old.slice(hosts) : ""));
}

// Run as a script (make bench-page); bench/hosts.mjs imports the helpers above.
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((err) => {
    console.error(err && err.stack ? err.stack : err);
    process.exit(1);
  });
}
