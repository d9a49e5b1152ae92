// Exported notebooks in a real browser with no network: test_export.py runs
// nbclient on a notebook with every report magic (widget state saved), converts
// it with nbconvert and runs this script on the HTML files:
//
//   EXPORT_PAGES  "NAME=FILE ..." (lab: what JupyterLab's "Export as HTML" writes; classic;
//                 lab-nostate: lab, from a notebook saved without widget state)
//   VRAMSCOPE_ARTIFACTS, VRAMSCOPE_CHROMIUM  as in lab_browser.mjs
//
// Every request but the file itself is aborted: nbconvert's page asks CDNs for
// require.js, MathJax and the widget manager, none of which the reports may
// need. Each report's static copy must show its summary, and the flame graph
// (or the live chart) as a drawn image; the open report its top lines and a
// finding. Then the same in print media, which is what webpdf prints; the lab
// page is printed to PDF. Screenshots: export-NAME.png, export-lab-report.png.
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const pages = (process.env.EXPORT_PAGES || "").split(" ").filter(Boolean).map((s) => s.split("="));
const artifacts = path.resolve(process.env.VRAMSCOPE_ARTIFACTS || "test-artifacts");
const chromiumPath = process.env.VRAMSCOPE_CHROMIUM || "/usr/bin/chromium";
mkdirSync(artifacts, { recursive: true });
assert.ok(pages.length, "EXPORT_PAGES is empty");

const TITLES = [/oom_batch\.pickle/, /diff gpt2_train\.pickle → oom_batch\.pickle/, /cell \[5\]/, /this kernel's GPU memory/, /vramscope · live/];

// How many colours an image paints (sampled): a blank or broken image has one or none.
function colours(img) {
  const c = document.createElement("canvas");
  c.width = img.naturalWidth;
  c.height = img.naturalHeight;
  const ctx = c.getContext("2d");
  ctx.drawImage(img, 0, 0);
  const px = ctx.getImageData(0, 0, c.width, c.height).data;
  const seen = new Set();
  for (let i = 0; i < px.length; i += 4 * 37) if (px[i + 3] > 0) seen.add((px[i] << 16) | (px[i + 1] << 8) | px[i + 2]);
  return seen.size;
}

async function checkImage(report, cls, what) {
  const img = report.locator("img." + cls);
  assert.equal(await img.count(), 1, `${what}: one ${cls} image`);
  assert.ok(await img.isVisible(), `${what}: the image is visible`);
  await img.evaluate((el) => el.decode());
  const info = { w: await img.evaluate((el) => el.naturalWidth), painted: await img.evaluate(colours) };
  const box = await img.boundingBox();
  assert.ok(info.w > 0 && box.width > 300 && box.height > 50, `${what}: image ${JSON.stringify({ ...info, box })}`);
  assert.ok(info.painted > 3, `${what}: the image is drawn (${info.painted} colours)`);
  return info.painted;
}

async function checkReports(page, label) {
  const reports = page.locator(".vramscope-static");
  assert.equal(await reports.count(), TITLES.length, `${label}: one static copy per report`);
  for (let i = 0; i < TITLES.length; i++) {
    const r = reports.nth(i);
    assert.ok(await r.isVisible(), `${label}: report ${i} is visible`);
    const text = await r.innerText();
    assert.match(text, TITLES[i], `${label}: report ${i} title`);
    if (i === TITLES.length - 1) {
      assert.match(text, /stopped · \d+ samples/);
      await checkImage(r, "vs-live-chart", `${label} live`);
    } else await checkImage(r, "vs-flame", `${label} report ${i}`);
  }
  // The open report: its top lines and findings as rendered text.
  const open = reports.nth(0);
  const rows = await open.locator("table tbody tr").allInnerTexts();
  assert.ok(rows.length >= 3 && /train_gpt2\.py:22 \(train_step\)/.test(rows[0]), `${label}: top lines ${rows[0]}`);
  assert.ok(await open.getByText("Top lines at the peak").isVisible());
  const finding = open.locator("li", { hasText: "CUDA out of memory: 1.53 GiB requested" });
  assert.ok(await finding.isVisible(), `${label}: the finding is visible`);
  // The diff's rows, the cell's own line.
  assert.ok((await reports.nth(1).locator("table tbody tr").count()) >= 3, `${label}: diff rows`);
  assert.match(await reports.nth(2).innerText(), /cell \[4\], line 2 \(make\)/);
}

const { chromium } = await import("playwright-core");
const browser = await chromium.launch({ executablePath: chromiumPath, args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"] });
try {
  for (const [name, file] of pages) {
    const page = await (await browser.newContext({ viewport: { width: 1280, height: 900 }, deviceScaleFactor: 1 })).newPage();
    const href = pathToFileURL(file).href;
    const aborted = [];
    await page.route("**/*", (route) => {
      const u = route.request().url();
      if (u === href || u.startsWith("data:")) return route.continue();
      aborted.push(u);
      return route.abort();
    });
    await page.goto(href);
    await checkReports(page, name);
    await page.screenshot({ path: path.join(artifacts, `export-${name}.png`), fullPage: true });
    if (name === "lab") await page.locator(".vramscope-static").first().screenshot({ path: path.join(artifacts, "export-lab-report.png") });
    await page.emulateMedia({ media: "print" });
    await checkReports(page, name + " print");
    if (name === "lab") await page.pdf({ path: path.join(artifacts, "export-lab.pdf"), printBackground: true });
    console.log(`${name}: ${TITLES.length} reports drawn with no network (${aborted.length} requests of nbconvert's page aborted)`);
    await page.context().close();
  }
} finally {
  await browser.close();
}
