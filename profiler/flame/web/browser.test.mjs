// Real-browser test of the standalone page: generates the 100k-frame demo
// page with Go, opens it in Debian's chromium through playwright-core from a
// file:// URL, and checks drawing, hover, zoom, search, Escape and speed.
// The second test opens the linked report (analyze --html of a real OOM
// snapshot): timeline, moments, findings, keyboard zoom, both themes.
//
//   node --test profiler/flame/web/
//
// Needs go, chromium (/usr/bin/chromium, or $VRAMSCOPE_CHROMIUM) and
// playwright-core (npm ci). Missing pieces fail the test; set
// VRAMSCOPE_SKIP_BROWSER=1 to skip it on purpose. Screenshots go to
// $VRAMSCOPE_ARTIFACTS (default test-artifacts/): flame*.png, report*.png.
import test from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const repoRoot = path.resolve(here, "../../..");
const chromiumPath = process.env.VRAMSCOPE_CHROMIUM || "/usr/bin/chromium";
const artifacts = process.env.VRAMSCOPE_ARTIFACTS ? path.resolve(process.env.VRAMSCOPE_ARTIFACTS) : path.join(repoRoot, "test-artifacts");
// In CI (CI, or VRAMSCOPE_CI=1) the opt-out is ignored: a missing browser fails there.
const inCI = Boolean(process.env.CI) || process.env.VRAMSCOPE_CI === "1";
const skip = process.env.VRAMSCOPE_SKIP_BROWSER === "1" && !inCI ? "VRAMSCOPE_SKIP_BROWSER=1" : false;

// Render time is printed, not asserted: speed goals live in benchmarks
// (the 300 ms goal for 100k frames is checked by reading this figure).

async function loadPlaywright() {
  try {
    return await import("playwright-core");
  } catch (err) {
    throw new Error("playwright-core is not installed: run `npm ci` at the repository root (" + err.message + ")");
  }
}

function buildPage(dir) {
  const out = path.join(dir, "flame-100k.html");
  execFileSync("go", ["run", "./profiler/flame/internal/demo", out], { cwd: repoRoot, stdio: ["ignore", "inherit", "inherit"] });
  return out;
}

test("flame page in a real browser", { skip, timeout: 120_000 }, async (t) => {
  assert.ok(existsSync(chromiumPath), `chromium not found at ${chromiumPath}: apt-get install chromium, or set VRAMSCOPE_SKIP_BROWSER=1`);
  const { chromium } = await loadPlaywright();
  const work = mkdtempSync(path.join(tmpdir(), "vramscope-browser-"));
  t.after(() => rmSync(work, { recursive: true, force: true }));
  const pagePath = buildPage(work);

  // Playwright gives every launch a fresh temporary profile directory.
  const browser = await chromium.launch({
    executablePath: chromiumPath,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  t.after(() => browser.close());
  const context = await browser.newContext({ viewport: { width: 1280, height: 760 }, deviceScaleFactor: 1 });
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
  // The page must be self-contained: anything but the file itself is a failure.
  const foreign = [];
  page.on("request", (r) => r.url() !== pathToFileURL(pagePath).href && !r.url().startsWith("data:") && foreign.push(r.url()));

  await page.goto(pathToFileURL(pagePath).href);
  await page.waitForFunction(() => window.vramscope && window.vramscope.state);
  assert.deepEqual(errors, []);
  assert.deepEqual(foreign, []);

  const timing = await page.evaluate(() => {
    const get = (n) => performance.getEntriesByName(n, "measure")[0]?.duration;
    return { render: get("vramscope-flame-render"), parse: get("vramscope-flame-parse"), nodes: window.vramscope.state().nodes };
  });
  console.log(
    `vramscope flame: ${timing.nodes} nodes, first render (layout+paint) ${timing.render.toFixed(1)} ms, JSON.parse ${timing.parse.toFixed(1)} ms`,
  );
  assert.ok(timing.nodes > 90_000, `demo tree has ${timing.nodes} nodes`);
  assert.ok(timing.render > 0, "the render performance mark was recorded");

  await t.test("canvas is drawn", async () => {
    const box = await page.locator("canvas.vf-canvas").boundingBox();
    assert.ok(box && box.width > 100 && box.height > 100, JSON.stringify(box));
    const painted = await page.evaluate(() => {
      const c = document.querySelector("canvas.vf-canvas");
      const px = c.getContext("2d").getImageData(0, 0, c.width, Math.min(c.height, 200)).data;
      const colors = new Set();
      for (let i = 0; i < px.length; i += 4 * 97) colors.add((px[i] << 16) | (px[i + 1] << 8) | px[i + 2]);
      return colors.size;
    });
    assert.ok(painted > 5, `canvas shows ${painted} colors`);
  });

  const canvasBox = await page.locator("canvas.vf-canvas").boundingBox();
  const rowH = await page.evaluate(() => window.vramscope.state().rowHeight);
  const top = await page.evaluate(([x, y]) => window.vramscope.frameAt(x, y), [canvasBox.x + 5, canvasBox.y + 2]);
  assert.equal(top && top.name, "all", "the root frame is on top");

  await t.test("search summarises matches", async () => {
    await page.fill("input.vf-search", "attention");
    await page.waitForFunction(() => /match/.test(document.querySelector(".vf-summary").textContent));
    const summary = await page.textContent(".vf-summary");
    assert.match(summary, /^[\d,]+ match(es)? · \d+\.\d\d [KMGT]iB · \d+\.\d\d% of total$/);
    const viaApi = await page.evaluate(() => window.vramscope.search("/^no such frame$/"));
    assert.equal(viaApi.count, 0);
    assert.equal(await page.textContent(".vf-summary"), "no matches");
    await page.evaluate(() => window.vramscope.search(""));
    await page.fill("input.vf-search", "");
  });

  await t.test("click zooms, breadcrumb follows, Escape resets", async () => {
    // Row 5 is below the fixed training-loop prefix, where siblings split the width.
    const y = canvasBox.y + 5.5 * rowH;
    const x = canvasBox.x + canvasBox.width * 0.1;
    const target = await page.evaluate(([x, y]) => window.vramscope.frameAt(x, y), [x, y]);
    assert.ok(target, "a frame under the cursor");
    await page.mouse.click(x, y);
    const zoomed = await page.evaluate(() => window.vramscope.state().zoomPath);
    assert.equal(zoomed.length, 6);
    assert.equal(zoomed[5], target.name);
    const crumbs = await page.textContent(".vf-crumbs");
    assert.ok(crumbs.includes(target.name), crumbs);
    assert.equal(await page.isDisabled("button.vf-reset"), false);
    await page.keyboard.press("Escape");
    assert.deepEqual(await page.evaluate(() => window.vramscope.state().zoomPath), ["all"]);
    assert.equal(await page.isDisabled("button.vf-reset"), true);
    // zoomTo through the controller, by names from the root.
    assert.equal(await page.evaluate((p) => window.vramscope.zoomTo(p), zoomed), true);
    assert.deepEqual(await page.evaluate(() => window.vramscope.state().zoomPath), zoomed);
    await page.click("button.vf-reset");
    assert.deepEqual(await page.evaluate(() => window.vramscope.state().zoomPath), ["all"]);
  });

  await t.test("hover shows a tooltip with bytes and percent; screenshot", async () => {
    const y = canvasBox.y + 6.5 * rowH;
    const x = canvasBox.x + canvasBox.width * 0.12;
    await page.mouse.move(x - 20, y);
    await page.mouse.move(x, y);
    await page.waitForSelector(".vf-tooltip:not([hidden])");
    const text = await page.textContent(".vf-tooltip");
    assert.match(text, /\d+(\.\d\d)? (B|KiB|MiB|GiB|TiB)/);
    assert.match(text, /\d+\.\d\d% of total/);
    assert.match(text, /allocation/);
    mkdirSync(artifacts, { recursive: true });
    await page.screenshot({ path: path.join(artifacts, "flame.png") });
    console.log(`screenshot: ${path.join(artifacts, "flame.png")}`);
  });

  await t.test("dark theme and search highlight render", async () => {
    await page.emulateMedia({ colorScheme: "dark" });
    await page.evaluate(() => window.vramscope.refreshTheme());
    const bg = await page.evaluate(() => getComputedStyle(document.querySelector(".vf-root")).getPropertyValue("--vf-bg").trim());
    assert.equal(bg, "#1e1e1e");
    await page.waitForTimeout(50); // one animation frame to repaint
    await page.screenshot({ path: path.join(artifacts, "flame-dark.png") });
    await page.fill("input.vf-search", "/forward|attention/");
    await page.waitForFunction(() => /match/.test(document.querySelector(".vf-summary").textContent));
    await page.mouse.move(canvasBox.x + 2, canvasBox.y + canvasBox.height + 50);
    await page.waitForTimeout(50);
    await page.screenshot({ path: path.join(artifacts, "flame-dark-search.png") });
  });

  assert.deepEqual(errors, []);
});

const launchArgs = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];

function buildReport(dir) {
  const out = path.join(dir, "report.html");
  const snap = path.join(repoRoot, "examples", "snapshots", "agent_oom.pickle");
  // $VRAMSCOPE_BIN: an engine built already (else go run builds this tree's).
  const bin = process.env.VRAMSCOPE_BIN ? [path.resolve(process.env.VRAMSCOPE_BIN)] : ["go", "run", "./cmd/vramscope"];
  execFileSync(bin[0], [...bin.slice(1), "analyze", "--html", out, snap], { cwd: repoRoot, stdio: ["ignore", "ignore", "inherit"] });
  return out;
}

// timelineColors counts the colours painted on the timeline's canvas.
const timelineColors = () => {
  const c = document.querySelector("canvas.vt-canvas");
  const px = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
  const colors = new Set();
  for (let i = 0; i < px.length; i += 4 * 31) colors.add((px[i] << 16) | (px[i + 1] << 8) | px[i + 2]);
  return colors.size;
};

test("linked report page in a real browser", { skip, timeout: 120_000 }, async (t) => {
  assert.ok(existsSync(chromiumPath), `chromium not found at ${chromiumPath}`);
  const { chromium } = await loadPlaywright();
  const work = mkdtempSync(path.join(tmpdir(), "vramscope-report-"));
  t.after(() => rmSync(work, { recursive: true, force: true }));
  const pagePath = buildReport(work);
  const browser = await chromium.launch({ executablePath: chromiumPath, args: launchArgs });
  t.after(() => browser.close());
  const context = await browser.newContext({ viewport: { width: 1280, height: 820 }, deviceScaleFactor: 1 });
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
  const foreign = [];
  page.on("request", (r) => r.url() !== pathToFileURL(pagePath).href && !r.url().startsWith("data:") && foreign.push(r.url()));
  await page.goto(pathToFileURL(pagePath).href);
  await page.waitForFunction(() => window.vramscope && window.vramscope.reportState && window.vramscope.reportState().timeline.drawn > 0);
  assert.deepEqual(errors, []);
  assert.deepEqual(foreign, []);
  const report = await page.evaluate(() => JSON.parse(document.getElementById("vramscope-report").textContent));
  const st0 = await page.evaluate(() => window.vramscope.reportState());
  mkdirSync(artifacts, { recursive: true });

  await t.test("every view is rendered", async () => {
    assert.ok((await page.evaluate(timelineColors)) > 5, "the timeline is painted");
    assert.ok(st0.flame.nodes > 10 && st0.timeline.points > 100, JSON.stringify(st0));
    assert.ok(st0.lines.length > 0, "top lines listed");
    // An OOM's report opens its flame graph at the failure, not at the earlier peak.
    assert.ok(report.ooms.length > 0 && st0.moment && st0.moment.t === report.ooms[0].time_us, JSON.stringify(st0.moment));
    assert.match(await page.textContent(".vr-showing"), /^At the OOM/);
    assert.equal(await page.locator(".vr-findings .vr-link").count(), report.findings.length);
    assert.ok((await page.locator(".vr-cat").count()) > 0, "categories listed");
    const ms = await page.evaluate(() => performance.getEntriesByName("vramscope-report-render", "measure")[0]?.duration);
    console.log(`vramscope report: first render ${ms.toFixed(1)} ms`);
    await page.screenshot({ path: path.join(artifacts, "report.png") });
  });

  const tlBox = await page.locator("canvas.vt-canvas").boundingBox();
  const midY = tlBox.y + tlBox.height / 2;

  let hoverLines = null;
  await t.test("hover on the timeline shows a tooltip; resting names the lines live then", async () => {
    const x = await page.evaluate((t) => window.vramscope.timeline.xAt(t), report.device.peak.time_us);
    const asked = (await page.evaluate(() => window.vramscope.timeline.state().hover)).asked;
    await page.mouse.move(x - 30, midY);
    await page.mouse.move(x, midY);
    await page.waitForSelector(".vt-tooltip:not([hidden])");
    assert.match(await page.textContent(".vt-tooltip"), /allocated \d+\.\d\d [KMG]iB · reserved/);
    // After ~150 ms at rest the tooltip lists the top 3 lines live then, from
    // the moment's answer (the one a click draws).
    await page.waitForSelector(".vt-tooltip .vt-tt-line");
    const tip = await page.textContent(".vt-tooltip");
    hoverLines = await page.$$eval(".vt-tooltip .vt-tt-line", (rows) => rows.map((r) => ({ bytes: Number(r.dataset.bytes), text: r.textContent })));
    assert.ok(hoverLines.length >= 1 && hoverLines.length <= 3, JSON.stringify(hoverLines));
    for (const l of hoverLines) assert.match(l.text, /^\d+(\.\d\d)? (B|KiB|MiB|GiB) \S+/);
    // The peak's top line among them.
    assert.ok(tip.includes(`${path.basename(report.sites[0].file)}:${report.sites[0].line}`), tip);
    const hover = await page.evaluate(() => window.vramscope.timeline.state().hover);
    // Two pointer positions: one or two rests (a slow machine may rest on the first).
    assert.ok(hover.asked > asked && hover.asked <= asked + 2, `${hover.asked - asked} requests for two positions`);
    assert.equal(hover.inFlight, false);
    await page.screenshot({ path: path.join(artifacts, "report-hover-moment.png") });
  });

  await t.test("click a moment: the flame graph and top lines of then", async () => {
    const x = await page.evaluate((t) => window.vramscope.timeline.xAt(t), report.device.peak.time_us);
    await page.mouse.click(x, midY);
    await page.waitForFunction(() => window.vramscope.reportState().moment !== null);
    const st = await page.evaluate(() => window.vramscope.reportState());
    assert.match(await page.textContent(".vr-showing"), /^Live at .+: \d+\.\d\d [KMG]iB$/);
    assert.ok(st.moment.bytes > 0 && st.moment.bytes <= report.device.peak.bytes, JSON.stringify(st.moment));
    assert.equal(await page.isVisible("button.vr-peak"), true);
    console.log(`vramscope report: click -> flame ${st.momentMs.toFixed(1)} ms`);
    // The hover named this moment's top lines: they hold no more than it.
    const sum = hoverLines.reduce((a, l) => a + l.bytes, 0);
    assert.ok(sum > 0 && sum <= st.moment.bytes, `hovered lines ${sum} > the moment's ${st.moment.bytes}`);
    assert.deepEqual(hoverLines.map((l) => l.text.replace(/^\S+ \S+ /, "")), st.lines.slice(0, hoverLines.length), "the hover's lines are the click's top lines");
    // A moment before the memory grew holds less.
    const early = await page.evaluate(() => window.vramscope.showMoment(window.vramscope.timeline.state().full[0]));
    assert.ok(early.bytes < st.moment.bytes, `${early.bytes} early, ${st.moment.bytes} at the peak`);
    await page.click("button.vr-peak");
    assert.equal((await page.evaluate(() => window.vramscope.reportState())).moment, null);
  });

  await t.test("keyboard zoom, pan and reset; drag zooms to a range", async () => {
    const state = () => page.evaluate(() => window.vramscope.timeline.state());
    await page.focus(".vt-root");
    const full = (await state()).full;
    await page.keyboard.press("+");
    const z = (await state()).range;
    assert.ok(z[1] - z[0] < (full[1] - full[0]) * 0.6, `+ zoomed to ${z}`);
    await page.keyboard.press("ArrowLeft");
    const p = (await state()).range;
    assert.ok(p[0] < z[0] || p[0] === full[0], "ArrowLeft pans");
    await page.keyboard.press("0");
    assert.deepEqual((await state()).range, full);
    const x0 = await page.evaluate((t) => window.vramscope.timeline.xAt(t), full[0] + (full[1] - full[0]) * 0.2);
    const x1 = await page.evaluate((t) => window.vramscope.timeline.xAt(t), full[0] + (full[1] - full[0]) * 0.4);
    await page.mouse.move(x0, midY);
    await page.mouse.down();
    await page.mouse.move((x0 + x1) / 2, midY);
    await page.mouse.move(x1, midY);
    await page.mouse.up();
    const r = (await state()).range;
    const span = full[1] - full[0];
    assert.ok(Math.abs(r[0] - (full[0] + span * 0.2)) < span * 0.01 && Math.abs(r[1] - (full[0] + span * 0.4)) < span * 0.01, `dragged to ${r}`);
    assert.equal((await page.evaluate(() => window.vramscope.reportState())).moment, null, "a drag picks no moment");
    await page.click("button.vt-reset");
    assert.deepEqual((await state()).range, full);
  });

  await t.test("a finding selects its time range and its frames", async () => {
    const i = report.findings.findIndex((f) => f.evidence && f.evidence.start_us > 0 && f.file);
    assert.ok(i >= 0, "a finding with a time range and a line");
    const f = report.findings[i];
    await page.click(`.vr-findings .vr-link[data-finding="${i}"]`);
    const st = await page.evaluate(() => window.vramscope.reportState());
    assert.deepEqual(st.timeline.band, [f.evidence.start_us, Math.max(f.evidence.end_us, f.evidence.start_us + 1)]);
    assert.ok(st.timeline.range[0] <= f.evidence.start_us && st.timeline.range[1] >= f.evidence.end_us, "the range is in view");
    assert.ok(st.flame.matches > 0, `${f.file}:${f.line} selects frames`);
    assert.match(await page.textContent(".vf-summary"), /\d+ frames? · /);
    await page.screenshot({ path: path.join(artifacts, "report-finding.png") });
  });

  await t.test("a top line selects its frames", async () => {
    await page.evaluate(() => window.vramscope.showPeak());
    await page.click(".vr-lines .vr-link >> nth=0");
    assert.ok((await page.evaluate(() => window.vramscope.reportState())).flame.matches > 0);
  });

  await t.test("dark theme", async () => {
    await page.emulateMedia({ colorScheme: "dark" });
    await page.evaluate(() => window.vramscope.refreshTheme());
    await page.waitForFunction(() => {
      const c = document.querySelector("canvas.vt-canvas");
      const px = c.getContext("2d").getImageData(2, 2, 1, 1).data;
      return px[0] < 60 && px[1] < 60 && px[2] < 60;
    });
    await page.screenshot({ path: path.join(artifacts, "report-dark.png") });
  });
  assert.deepEqual(errors, []);
});

test("diff page: both timelines overlaid, the change by category and line", { skip, timeout: 120_000 }, async (t) => {
  const { chromium } = await loadPlaywright();
  const work = mkdtempSync(path.join(tmpdir(), "vramscope-diff-"));
  t.after(() => rmSync(work, { recursive: true, force: true }));
  const out = path.join(work, "diff.html");
  const snaps = ["example_train", "leak_steps"].map((n) => path.join(repoRoot, "examples", "snapshots", n + ".pickle"));
  const bin = process.env.VRAMSCOPE_BIN ? [path.resolve(process.env.VRAMSCOPE_BIN)] : ["go", "run", "./cmd/vramscope"];
  execFileSync(bin[0], [...bin.slice(1), "diff", "--html", out, ...snaps], { cwd: repoRoot, stdio: ["ignore", "ignore", "inherit"] });
  const browser = await chromium.launch({ executablePath: chromiumPath, args: launchArgs });
  t.after(() => browser.close());
  const page = await (await browser.newContext({ viewport: { width: 1280, height: 820 }, deviceScaleFactor: 1 })).newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(pathToFileURL(out).href);
  await page.waitForFunction(() => window.vramscope && window.vramscope.reportState().timeline.drawn > 0);
  const st = await page.evaluate(() => window.vramscope.reportState().timeline);
  assert.ok(st.points > 100 && st.overlayPoints > 100, JSON.stringify(st));
  assert.match(await page.textContent(".vt-legend"), /before: example_train\.pickle/);
  assert.match(await page.textContent(".vr-change .vr-note"), /^Peak 1\.54 GiB → \d+\.\d\d MiB \(-1\.\d\d GiB\), from example_train\.pickle$/);
  assert.ok((await page.locator(".vr-change .vr-cat-delta").count()) >= 3, "categories before and after");
  await page.click(".vr-change .vr-link:has-text(\"record_examples.py:87\")");
  assert.ok((await page.evaluate(() => window.vramscope.reportState().flame.matches)) > 0, "a changed line selects its frames");
  mkdirSync(artifacts, { recursive: true });
  await page.screenshot({ path: path.join(artifacts, "report-diff.png") });
  // The overlaid timelines zoom and reset from the keyboard together.
  const tl = () => page.evaluate(() => window.vramscope.timeline.state());
  await page.focus(".vt-root");
  const full = (await tl()).full;
  await page.keyboard.press("+");
  const z = await tl();
  assert.ok(z.range[1] - z.range[0] < (full[1] - full[0]) * 0.6 && z.overlayPoints > 0, `+ zoomed to ${z.range}, overlay ${z.overlayPoints} points`);
  await page.keyboard.press("0");
  assert.deepEqual((await tl()).range, full);
  // Dark theme: the timeline repaints on a dark background, the change table's text stays readable.
  await page.emulateMedia({ colorScheme: "dark" });
  await page.evaluate(() => window.vramscope.refreshTheme());
  await page.waitForFunction(() => {
    const px = document.querySelector("canvas.vt-canvas").getContext("2d").getImageData(2, 2, 1, 1).data;
    return px[0] < 60 && px[1] < 60 && px[2] < 60;
  });
  const contrast = await page.evaluate(() => {
    const rgb = (c) => c.match(/[\d.]+/g).slice(0, 3).map(Number);
    const lum = ([r, g, b]) => [r, g, b].map((v) => (v /= 255) <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4).reduce((a, v, i) => a + v * [0.2126, 0.7152, 0.0722][i], 0);
    const note = document.querySelector(".vr-change .vr-note");
    let bgEl = note;
    while (bgEl && getComputedStyle(bgEl).backgroundColor.match(/rgba\(0, 0, 0, 0\)|transparent/)) bgEl = bgEl.parentElement;
    const a = lum(rgb(getComputedStyle(note).color));
    const b = lum(rgb(getComputedStyle(bgEl || document.body).backgroundColor));
    return { ratio: (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05), bgLum: b };
  });
  assert.ok(contrast.ratio >= 4.5 && contrast.bgLum < 0.2, `dark diff page: ${JSON.stringify(contrast)}`);
  await page.screenshot({ path: path.join(artifacts, "report-diff-dark.png") });
  assert.deepEqual(errors, []);
});
