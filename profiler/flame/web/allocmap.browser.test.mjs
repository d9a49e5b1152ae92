// Real-browser test of the allocator map (allocmap.js) in the linked report
// page: analyze --html of a real fragmentation OOM (frag_oom: 537 MiB free
// in 16 blocks, none large enough for the 256 MiB request), opened in
// Debian's chromium through playwright-core from a file:// URL. Checks the
// map is drawn, hovering a block names it, the OOM view sets the request
// beside the largest free block, the moments switch, and the dark theme.
//
//   node --test profiler/flame/web/
//
// Needs go (or $VRAMSCOPE_BIN), chromium and playwright-core, like
// browser.test.mjs; VRAMSCOPE_SKIP_BROWSER=1 skips it. Screenshots go to
// $VRAMSCOPE_ARTIFACTS (default test-artifacts/): allocmap*.png.
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
const launchArgs = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];
const snapshot = path.join(repoRoot, "examples", "snapshots", "findings", "frag_oom.pickle");

function engine(args) {
  const bin = process.env.VRAMSCOPE_BIN ? [path.resolve(process.env.VRAMSCOPE_BIN)] : ["go", "run", "./cmd/vramscope"];
  return execFileSync(bin[0], [...bin.slice(1), ...args], { cwd: repoRoot, stdio: ["ignore", "pipe", "inherit"], maxBuffer: 64 << 20 });
}

test("allocator map in a real browser", { skip, timeout: 120_000 }, async (t) => {
  assert.ok(existsSync(chromiumPath), `chromium not found at ${chromiumPath}`);
  const { chromium } = await import("playwright-core");
  const work = mkdtempSync(path.join(tmpdir(), "vramscope-allocmap-"));
  t.after(() => rmSync(work, { recursive: true, force: true }));
  const pagePath = path.join(work, "report.html");
  engine(["analyze", "--html", pagePath, snapshot]);
  const analysis = JSON.parse(engine(["analyze", "--json", snapshot]).toString());
  const oomMap = analysis.allocator_maps[0].maps.find((m) => m.at === "oom");
  assert.ok(oomMap, "frag_oom has an OOM map");

  const browser = await chromium.launch({ executablePath: chromiumPath, args: launchArgs });
  t.after(() => browser.close());
  const page = await (await browser.newContext({ viewport: { width: 1280, height: 1000 }, deviceScaleFactor: 1 })).newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
  await page.goto(pathToFileURL(pagePath).href);
  await page.waitForSelector(".vm-root[data-blocks]");
  await page.locator(".vm-root").scrollIntoViewIfNeeded();
  mkdirSync(artifacts, { recursive: true });

  await t.test("the OOM map is drawn, with the request beside the largest free block", async () => {
    assert.equal(await page.getAttribute(".vm-root", "data-at"), "oom");
    assert.equal(Number(await page.getAttribute(".vm-root", "data-blocks")), oomMap.segments.reduce((n, s) => n + s.blocks.length, 0));
    const req = await page.locator(".vm-bar-request");
    const big = await page.locator(".vm-bar-largest");
    assert.equal(Number(await req.getAttribute("data-bytes")), analysis.ooms[0].requested);
    assert.equal(Number(await big.getAttribute("data-bytes")), oomMap.largest_free_block);
    const wReq = (await req.locator(".vm-bar").boundingBox()).width;
    const wBig = (await big.locator(".vm-bar").boundingBox()).width;
    assert.ok(Math.abs(wBig / wReq - oomMap.largest_free_block / oomMap.request) < 0.02, `bars to scale: ${wBig} / ${wReq}`);
    assert.match(await page.textContent(".vm-oom-text"), /short\)/);
    const painted = await page.evaluate(() => {
      const c = document.querySelector(".vm-canvas");
      const px = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
      const colors = new Set();
      for (let i = 0; i < px.length; i += 4 * 7) colors.add((px[i] << 16) | (px[i + 1] << 8) | px[i + 2]);
      return colors.size;
    });
    assert.ok(painted >= 4, `${painted} colours painted`);
    await page.locator(".vm-root").screenshot({ path: path.join(artifacts, "allocmap-oom.png") });
  });

  await t.test("hovering a block names its size, state and line", async () => {
    // The largest free block, found in the map's own layout at the canvas's width.
    const target = await page.evaluate(() => {
      const c = document.querySelector(".vm-canvas");
      const map = window.vramscope.allocmap.current();
      const lay = window.VramAllocMap.layout(map, c.clientWidth);
      const r = lay.blocks.filter((b) => b.block.state !== "allocated").sort((a, b) => b.block.size - a.block.size)[0];
      const box = c.getBoundingClientRect();
      return { x: box.left + r.x + r.w / 2, y: box.top + r.y + 8, size: r.block.size };
    });
    assert.equal(target.size, oomMap.largest_free_block);
    await page.mouse.move(target.x, target.y);
    await page.waitForSelector(".vm-tooltip:not([hidden])");
    const tip = await page.textContent(".vm-tooltip");
    assert.match(tip, /52\.00 MiB · free, split off inside a used segment/);
    const alloc = await page.evaluate(() => {
      const c = document.querySelector(".vm-canvas");
      const lay = window.VramAllocMap.layout(window.vramscope.allocmap.current(), c.clientWidth);
      const r = lay.blocks.filter((b) => b.block.state === "allocated" && b.block.line).sort((a, b) => b.w - a.w)[0];
      const box = c.getBoundingClientRect();
      return { x: box.left + r.x + r.w / 2, y: box.top + r.y + 8 };
    });
    await page.mouse.move(alloc.x, alloc.y);
    await page.waitForFunction(() => /allocated at record_findings\.py:\d+/.test(document.querySelector(".vm-tooltip").textContent));
  });

  await t.test("the peak and the snapshot", async () => {
    await page.click(".vm-btn[data-at=peak]");
    assert.equal(await page.getAttribute(".vm-root", "data-at"), "peak");
    assert.match(await page.textContent(".vm-summary"), /^At the peak \(replayed back from the snapshot\)/);
    assert.equal(await page.isVisible(".vm-oom"), false);
    await page.click(".vm-btn[data-at=snapshot]");
    assert.match(await page.textContent(".vm-summary"), /^At the snapshot: 1\.06 GiB reserved in 4 segments/);
  });

  await t.test("no segments: the map says so", async () => {
    const got = await page.evaluate(() => {
      const box = document.body.appendChild(document.createElement("div"));
      const c = window.VramAllocMap.render(box, [{ device: 0, maps: [] }]);
      const text = box.textContent;
      const shown = c.show("peak");
      c.destroy();
      box.remove();
      return { text, shown };
    });
    assert.equal(got.text, "No allocator state in this snapshot.");
    assert.equal(got.shown, null);
  });

  await t.test("dark theme", async () => {
    await page.emulateMedia({ colorScheme: "dark" });
    await page.waitForFunction(() => {
      const bg = getComputedStyle(document.querySelector(".vm-root")).backgroundColor;
      return /rgb\((\d+), (\d+), (\d+)\)/.test(bg) && Number(bg.match(/\d+/)[0]) < 60;
    });
    await page.evaluate(() => window.vramscope.allocmap.redraw());
    // A free segment's fill is dark in the dark theme.
    const px = await page.evaluate(() => {
      const c = document.querySelector(".vm-canvas");
      const lay = window.VramAllocMap.layout(window.vramscope.allocmap.current(), c.clientWidth);
      const r = lay.blocks.find((b) => b.block.state !== "allocated" && b.w > 6);
      return Array.from(c.getContext("2d").getImageData(Math.round(r.x + r.w / 2), r.y + 8, 1, 1).data);
    });
    assert.ok(px[0] < 120 || px[1] < 120, `free block painted ${px} in the dark theme`);
    await page.locator(".vm-root").screenshot({ path: path.join(artifacts, "allocmap-dark.png") });
  });
  assert.deepEqual(errors, []);
});
