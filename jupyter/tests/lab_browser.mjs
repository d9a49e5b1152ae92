// The notebook widget in a real JupyterLab and a real browser: Debian's
// chromium driven by playwright-core (the repository's node_modules).
// test_lab.py starts JupyterLab on loopback and runs this script with:
//
//   LAB_URL       http://127.0.0.1:PORT/ (token in LAB_TOKEN)
//   LAB_NOTEBOOK  the notebook to open, relative to the server's root; its cells
//                 load the extension, run `%vramscope open examples/snapshots/example_train.pickle`
//                 (kept as `w`), show a 100k-frame tree with notebook.flame(), then
//                 `%vramscope open examples/snapshots/agent_oom.pickle` (findings, an OOM), then
//                 a snapshot of a 1,000-frame stack (its tree comes as JSON text)
//   LAB_SOURCE    examples/record/record_examples.py (for the source line the kernel sends back)
//   VRAMSCOPE_ARTIFACTS  where the screenshots go (test-artifacts/)
//   VRAMSCOPE_CHROMIUM   the browser (default /usr/bin/chromium)
//
// It asserts (any failure exits non-zero) and prints the 100k render time
// (performance marks; printed, not asserted). The report's views (a moment's
// lines on hover, the allocator map, findings, themes) are checked by lab_views.mjs.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { allocatorMap, findingClickThrough, momentMatchesHover, restOnMoment, themes } from "./lab_views.mjs";

const url = process.env.LAB_URL;
const token = process.env.LAB_TOKEN;
const notebook = process.env.LAB_NOTEBOOK;
const artifacts = path.resolve(process.env.VRAMSCOPE_ARTIFACTS || "test-artifacts");
const chromiumPath = process.env.VRAMSCOPE_CHROMIUM || "/usr/bin/chromium";
const sourceLines = readFileSync(process.env.LAB_SOURCE, "utf8").split("\n");
mkdirSync(artifacts, { recursive: true });

let playwright;
try {
  playwright = await import("playwright-core");
} catch (err) {
  console.error("playwright-core is not installed: run `npm ci` at the repository root (" + err.message + ")");
  process.exit(2);
}

const t0 = Date.now();
const step = (msg) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1)}s] ${msg}`);
const browser = await playwright.chromium.launch({
  executablePath: chromiumPath,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const shot = (page, name) => page.screenshot({ path: path.join(artifacts, (process.env.LAB_SHOT_PREFIX || "") + name) });
try {
  const context = await browser.newContext({ viewport: { width: 1400, height: 1000 }, deviceScaleFactor: 1 });
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e) + (e.stack ? " @ " + e.stack.split("\n").slice(1, 3).join(" | ").trim() : "")));
  // Nothing may leave the machine: the widget's code comes from the kernel.
  const foreign = [];
  await page.route("**/*", (route) => {
    const u = route.request().url();
    if (u.startsWith(url) || u.startsWith("data:") || u.startsWith("blob:")) return route.continue();
    foreign.push(u);
    return route.abort();
  });

  // LAB_PAGE: "lab/tree/" (JupyterLab 4) or "notebooks/" (Notebook 7, the same widget code)
  await page.goto(`${url}${process.env.LAB_PAGE || "lab/tree/"}${notebook}?token=${token}`);
  await page.waitForFunction(() => window.jupyterapp && document.querySelector(".jp-Notebook"), null, { timeout: 90_000 });
  await page.waitForFunction(
    () => {
      const w = window.jupyterapp.shell.currentWidget;
      const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
      return k && k.status === "idle";
    },
    null,
    { timeout: 90_000 },
  );
  step(`${process.env.LAB_PAGE || "lab/tree/"} open, kernel idle`);
  await page.evaluate(() => window.jupyterapp.commands.execute("notebook:run-all-cells"));
  await page.waitForFunction(() => document.querySelectorAll(".vs-widget[data-render-ms]").length >= 1, null, { timeout: 90_000 });
  step("first widget rendered");

  // --- the example snapshot's widget -------------------------------------------
  const widget = page.locator(".vs-widget").first();
  await widget.scrollIntoViewIfNeeded();
  assert.match(await widget.locator(".vs-title").textContent(), /example_train\.pickle/);
  const info = await widget.evaluate((el) => ({ nodes: el.__vramscope.state().nodes, rowH: el.__vramscope.state().rowHeight }));
  assert.ok(info.nodes > 20, `flame graph has ${info.nodes} nodes`);
  // The report's static copy (an output of its own, for exporters) is in the
  // page but hidden while the widget shows: the report reads once.
  const copies = await page.locator(".vramscope-static").all();
  assert.ok(copies.length >= 1, "the static copy is in the page");
  for (const c of copies) assert.equal(await c.isVisible(), false, "the static copy is hidden while the widget shows");
  const rows = await widget.locator(".vs-top tbody tr").allTextContents();
  assert.ok(rows.length >= 3, `top lines: ${rows.length}`);
  assert.match(rows[0], /record_examples\.py:69/);

  const canvas = widget.locator("canvas.vf-canvas");
  const box = await canvas.boundingBox();
  assert.ok(box && box.width > 300 && box.height > 100, JSON.stringify(box));
  const at = (row, frac) => [box.x + box.width * frac, box.y + (row + 0.5) * info.rowH];
  const frameAt = (x, y) => widget.evaluate((el, [x, y]) => el.__vramscope.frameAt(x, y), [x, y]);
  assert.equal((await frameAt(...at(0, 0.5))).name, "all", "the root frame is on top");

  // Hover: the tooltip shows the frame's bytes.
  const [hx, hy] = at(2, 0.2);
  const hovered = await frameAt(hx, hy);
  assert.ok(hovered && hovered.name, "a frame under the pointer");
  await page.mouse.move(hx - 30, hy);
  await page.mouse.move(hx, hy);
  const tip = widget.locator(".vf-tooltip:not([hidden])");
  await tip.waitFor({ timeout: 5_000 });
  const tipText = await tip.textContent();
  assert.match(tipText, /\d+(\.\d\d)? (B|KiB|MiB|GiB|TiB) · \d+\.\d\d% of total/);
  assert.ok(tipText.includes(hovered.name), tipText);
  await shot(page, "notebook-widget-hover.png");
  step(`hover: ${tipText.replace(/\s+/g, " ").slice(0, 100)}`);

  // Click: flame.js zooms; the widget writes `selected`, the kernel answers
  // `selected_info` with the place and the source line it read.
  const target = hovered;
  assert.ok(target.file && target.line, `clicked frame has a file: ${JSON.stringify(target)}`);
  await page.mouse.click(hx, hy);
  const where = widget.locator(".vs-selected .vs-sel-where");
  await where.waitFor({ timeout: 15_000 });
  assert.ok((await where.textContent()).includes(`${path.basename(target.file)}:${target.line}`), await where.textContent());
  if (target.file.endsWith("record_examples.py")) {
    const src = await widget.locator(".vs-selected .vs-sel-source").textContent();
    assert.equal(src, sourceLines[target.line - 1].trim(), "the kernel sent the frame's source line");
  }
  const zoomed = await widget.evaluate((el) => el.__vramscope.state().zoomPath);
  assert.equal(zoomed[zoomed.length - 1], target.name, "flame.js zoomed into the clicked frame");
  await shot(page, "notebook-widget-selected.png");
  step(`selected ${target.name} at ${target.file}:${target.line}`);

  // The selection is kernel state: print it from a new cell.
  await page.evaluate(async () => {
    const app = window.jupyterapp;
    const nb = app.shell.currentWidget.content;
    nb.activeCellIndex = nb.widgets.length - 1;
    await app.commands.execute("notebook:insert-cell-below");
    nb.activeCell.model.sharedModel.setSource('print("SELECTED", w.selected["name"], w.selected["line"], len(w.selected["path"]))');
    await app.commands.execute("notebook:run-cell");
  });
  const printed = page.locator(".jp-OutputArea-output pre", { hasText: "SELECTED" });
  await printed.waitFor({ timeout: 30_000 });
  assert.equal((await printed.textContent()).trim(), `SELECTED ${target.name} ${target.line} ${zoomed.length}`);
  step("the kernel holds the selection");

  // Weight: a request to the kernel, which reruns the engine and sets `tree`.
  const rootBytes = () => widget.evaluate((el) => el.querySelector(".vf-crumb").title);
  const before = await rootBytes();
  await widget.locator('.vs-weights button[data-value="alloc"]').click();
  await page.waitForFunction(
    (el) => el.querySelector('.vs-weights button[aria-pressed="true"]')?.dataset.value === "alloc" && !el.querySelector(".vs-status").textContent,
    await widget.elementHandle(),
    { timeout: 30_000 },
  );
  const after = await rootBytes();
  assert.notEqual(after, before, `alloc weight changes the total (${before} -> ${after})`);
  await shot(page, "notebook-widget-alloc.png");
  step(`weight alloc: root ${before} -> ${after}`);

  // --- the timeline (report.js, the same code as the CLI's page) ------------------
  // A click on a moment shows the flame graph of what was live then; + zooms,
  // 0 resets; hovering shows the levels, and resting there the moment's top lines.
  const tl = widget.locator("canvas.vt-canvas");
  await tl.waitFor({ timeout: 15_000 });
  await tl.scrollIntoViewIfNeeded();
  const tbox = await tl.boundingBox();
  assert.ok(tbox && tbox.width > 300 && tbox.height > 60, `timeline box ${JSON.stringify(tbox)}`);
  const tlState = () => widget.evaluate((el) => el.__vramscope.reportState());
  const full = (await tlState()).timeline.full;
  const tx = await widget.evaluate((el, t) => el.__vramscope.timeline.xAt(t), full[0] + (full[1] - full[0]) * 0.6);
  const ty = tbox.y + tbox.height / 2;
  await page.mouse.move(tx - 20, ty);
  await page.mouse.move(tx, ty);
  await widget.locator(".vt-tooltip:not([hidden])").waitFor({ timeout: 5_000 });
  assert.match(await widget.locator(".vt-tooltip").textContent(), /allocated \d+(\.\d\d)? (B|KiB|MiB|GiB) · reserved/);
  const hoverLines = await restOnMoment(page, widget, tx, ty);
  await shot(page, "notebook-widget-moment-hover.png");
  const totalBefore = await rootBytes();
  await page.mouse.click(tx, ty);
  await page.waitForFunction((el) => el.__vramscope.reportState().moment !== null, await widget.elementHandle(), { timeout: 10_000 });
  assert.match(await widget.locator(".vr-showing").textContent(), /^Live at /);
  const moment = (await tlState()).moment;
  assert.ok(moment.bytes > 0, JSON.stringify(moment));
  assert.notEqual(await rootBytes(), totalBefore, "the flame graph shows the moment's live set");
  momentMatchesHover(await tlState(), hoverLines);
  step(`moment hover: ${hoverLines.map((l) => l.label).join(", ")}`);
  await widget.locator(".vt-root").focus();
  await page.keyboard.press("+");
  const zoomedIn = (await tlState()).timeline.range;
  assert.ok(zoomedIn[1] - zoomedIn[0] < (full[1] - full[0]) * 0.6, `+ zoomed the timeline to ${zoomedIn}`);
  await page.keyboard.press("0");
  assert.deepEqual((await tlState()).timeline.range, full, "0 resets the timeline");
  await shot(page, "notebook-widget-timeline.png");
  step(`timeline: moment at ${((moment.t - full[0]) / 1000).toFixed(1)} ms holds ${moment.bytes} bytes`);

  // --- the allocator map (at the peak: example_train has no OOM) ------------------
  const peakMap = await allocatorMap(page, widget, "peak");
  await shot(page, "notebook-widget-allocmap.png");
  step(`allocator map: ${peakMap.summary.slice(0, 90)}; hover: ${peakMap.tooltip[0]}`);

  // --- 100k frames ---------------------------------------------------------------
  await page.waitForFunction(() => document.querySelectorAll(".vs-widget[data-render-ms]").length >= 2, null, { timeout: 120_000 });
  const big = page.locator(".vs-widget").nth(1);
  await big.scrollIntoViewIfNeeded();
  const perf = await big.evaluate((el) => ({
    nodes: Number(el.dataset.nodes),
    flame: Number(el.dataset.renderMs),
    widget: Number(el.dataset.flameMs),
    measures: performance.getEntriesByName("vramscope-flame-render", "measure").map((m) => m.duration),
  }));
  assert.ok(perf.nodes > 90_000, `the big tree has ${perf.nodes} nodes`);
  assert.ok(perf.flame > 0);
  await shot(page, "notebook-widget-100k.png");
  console.log(
    `vramscope widget: ${perf.nodes} nodes, first render in the notebook widget ${perf.widget.toFixed(1)} ms ` +
      `(flame.js layout+paint ${perf.flame.toFixed(1)} ms; goal <= 300 ms)`,
  );

  // --- an OOM snapshot: findings linked to the timeline and the flame graph --------
  await page.waitForFunction(() => document.querySelectorAll(".vs-widget[data-render-ms]").length >= 3, null, { timeout: 120_000 });
  const oom = page.locator(".vs-widget").nth(2);
  await oom.scrollIntoViewIfNeeded();
  assert.match(await oom.locator(".vs-title").textContent(), /agent_oom\.pickle/);
  const engine = process.env.VRAMSCOPE_BIN ? [path.resolve(process.env.VRAMSCOPE_BIN)] : ["go", "run", "./cmd/vramscope"];
  const analysis = JSON.parse(execFileSync(engine[0], [...engine.slice(1), "analyze", "--json", "examples/snapshots/agent_oom.pickle"], { maxBuffer: 64 << 20 }));
  const oomMap = await allocatorMap(page, oom, "oom");
  assert.ok(await oom.locator(".vm-bar-request").isVisible(), "the failing request is drawn beside the largest free block");
  const linked = await findingClickThrough(page, oom, analysis, (name) => shot(page, name));
  step(`finding "${linked.finding}": band ${linked.band.join("-")}, ${linked.matches} frames; OOM map: ${oomMap.summary.slice(0, 60)}`);

  // --- a stack of 1,000 frames: its tree comes from the kernel as JSON text -------------
  await page.waitForFunction(() => document.querySelectorAll(".vs-widget[data-render-ms]").length >= 4, null, { timeout: 120_000 });
  const deep = page.locator(".vs-widget").nth(3);
  await deep.scrollIntoViewIfNeeded();
  const deepNodes = await deep.evaluate((el) => Number(el.dataset.nodes));
  assert.equal(deepNodes, 1001, "the 1,000-frame stack draws under its root");
  step(`deep stack: ${deepNodes} frames drawn`);

  // --- JupyterLab Dark, then Light ----------------------------------------------------
  await widget.scrollIntoViewIfNeeded();
  const contrast = await themes(page, widget, (name) => shot(page, name));
  step(`themes: text contrast ${JSON.stringify(contrast)}`);

  // Notebook 7's own bundle throws one TypeError (reading 'schema') while it
  // sets up; it is not the widget's: printed, not counted, on that page only.
  const host = (e) => process.env.LAB_PAGE === "notebooks/" && / @ at \S*\/static\/notebook\/notebook_core\./.test(e);
  for (const e of errors.filter(host)) console.log(`note: Notebook 7's own page error: ${e.slice(0, 160)}`);
  assert.deepEqual(errors.filter((e) => !host(e)), [], "no page errors");
  assert.deepEqual(foreign, [], "no request leaves the machine");
  step("done");
} finally {
  await browser.close();
}
