// The static fallback of a report in a real browser: test_lab.py converts an
// executed notebook (no widget state saved, as JupyterLab saves by default)
// with nbconvert and runs this script on the HTML file:
//
//   FALLBACK_HTML  the converted notebook
//   VRAMSCOPE_ARTIFACTS, VRAMSCOPE_CHROMIUM  as in lab_browser.mjs
//
// Every request that is not the file itself is aborted (nbconvert's own
// template asks CDNs for require.js and MathJax; the report needs nothing),
// and the report must still draw: the text/html fallback inlines flame.js.
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const file = process.env.FALLBACK_HTML;
const artifacts = path.resolve(process.env.VRAMSCOPE_ARTIFACTS || "test-artifacts");
const chromiumPath = process.env.VRAMSCOPE_CHROMIUM || "/usr/bin/chromium";
mkdirSync(artifacts, { recursive: true });

const { chromium } = await import("playwright-core");
const browser = await chromium.launch({ executablePath: chromiumPath, args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"] });
try {
  const page = await (await browser.newContext({ viewport: { width: 1280, height: 900 }, deviceScaleFactor: 1 })).newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  const href = pathToFileURL(file).href;
  await page.route("**/*", (route) => (route.request().url() === href ? route.continue() : route.abort()));
  await page.goto(href);

  const report = page.locator(".vramscope-static").first();
  await report.waitFor({ timeout: 10_000 });
  assert.match(await report.locator(".vs-title").textContent(), /example_train\.pickle/);
  assert.ok((await report.locator(".vs-table tbody tr").count()) >= 3, "the top lines are plain HTML");
  const canvas = report.locator("canvas.vf-canvas");
  await canvas.waitFor({ timeout: 10_000 });
  await canvas.scrollIntoViewIfNeeded();
  const painted = await canvas.evaluate((c) => {
    const px = c.getContext("2d").getImageData(0, 0, c.width, Math.min(c.height, 120)).data;
    const colors = new Set();
    for (let i = 0; i < px.length; i += 4 * 53) colors.add((px[i] << 16) | (px[i + 1] << 8) | px[i + 2]);
    return colors.size;
  });
  assert.ok(painted > 4, `the flame graph is drawn (${painted} colors)`);
  const box = await canvas.boundingBox();
  await page.mouse.move(box.x + box.width * 0.2 - 20, box.y + 45);
  await page.mouse.move(box.x + box.width * 0.2, box.y + 45);
  const tip = report.locator(".vf-tooltip:not([hidden])");
  await tip.waitFor({ timeout: 5_000 });
  assert.match(await tip.textContent(), /\d+(\.\d\d)? (B|KiB|MiB|GiB) · \d+\.\d\d% of total/);
  await page.screenshot({ path: path.join(artifacts, "notebook-fallback.png") });
  assert.deepEqual(errors, [], "no page errors");
  console.log("fallback: drawn without network, tooltip " + (await tip.textContent()).replace(/\s+/g, " ").slice(0, 80));
} finally {
  await browser.close();
}
