// An executed notebook (nbclient, widget state saved) opened in a real
// JupyterLab, then run again: each report must read once. test_export.py
// starts the server (labserver.py) and runs this script with:
//
//   LAB_URL, LAB_TOKEN  the server
//   LAB_NOTEBOOK        the notebook, relative to the server's root
//   LAB_REPORTS         the indexes of its report cells, "1,2,4"
//   VRAMSCOPE_ARTIFACTS, VRAMSCOPE_CHROMIUM  as in lab_browser.mjs
//
// Opened as saved, a report shows either its widget (restored from the saved
// state) or its static copy, never both. Run again, each report shows its
// widget once, and its static copy is in the page but hidden (static/dom.js).
// Saved and exported by the server's nbconvert handler (what "Save and Export
// Notebook As -> HTML" downloads), each copy shows, with no network.
// Screenshots: lab-export.png, lab-reopened.png, lab-rerun.png, and of each report cell
// lab-reopened-cellN.png, lab-rerun-cellN.png.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";

const url = process.env.LAB_URL;
const artifacts = path.resolve(process.env.VRAMSCOPE_ARTIFACTS || "test-artifacts");
const reports = process.env.LAB_REPORTS.split(",").map(Number);
mkdirSync(artifacts, { recursive: true });

const t0 = Date.now();
const step = (msg) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1)}s] ${msg}`);
const { chromium } = await import("playwright-core");
const browser = await chromium.launch({
  executablePath: process.env.VRAMSCOPE_CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});

// Per report cell: how many widget views and static copies are visible, and
// whether a widget output is still loading.
function census(indexes) {
  const cells = document.querySelectorAll(".jp-Notebook .jp-Cell");
  const shown = (e) => !!e && e.checkVisibility({ visibilityProperty: true });
  return indexes.map((i) => {
    const c = cells[i];
    if (!c) return { i, missing: true };
    const widgets = [...c.querySelectorAll(".vs-widget")];
    const copies = [...c.querySelectorAll(".vramscope-static")];
    return {
      i,
      widgets: widgets.filter(shown).length,
      copies: copies.length,
      copiesShown: copies.filter(shown).length,
      loading: /Loading widget/.test(c.querySelector(".jp-OutputArea")?.textContent || ""),
      error: (c.querySelector(".jupyter-widgets")?.textContent || "").slice(0, 80),
    };
  });
}

async function shots(page, phase) {
  await page.screenshot({ path: path.join(artifacts, `lab-${phase}.png`) });
  const cells = page.locator(".jp-Notebook .jp-Cell");
  for (const i of reports) await cells.nth(i).screenshot({ path: path.join(artifacts, `lab-${phase}-cell${i}.png`) });
}

try {
  const page = await (await browser.newContext({ viewport: { width: 1400, height: 1000 }, deviceScaleFactor: 1 })).newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  const foreign = [];
  await page.route("**/*", (route) => {
    const u = route.request().url();
    if (u.startsWith(url) || u.startsWith("data:") || u.startsWith("blob:")) return route.continue();
    foreign.push(u);
    return route.abort();
  });
  await page.addInitScript({ content: census.toString() + "\nwindow.census = census;" }); // for waitForFunction
  await page.goto(`${url}lab/tree/${process.env.LAB_NOTEBOOK}?token=${process.env.LAB_TOKEN}`);
  await page.waitForFunction(() => window.jupyterapp && document.querySelector(".jp-Notebook .jp-Cell"), null, { timeout: 90_000 });
  const idle = () =>
    page.waitForFunction(
      () => {
        const w = window.jupyterapp.shell.currentWidget;
        const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
        const busy = [...document.querySelectorAll(".jp-InputArea-prompt")].some((p) => p.textContent.includes("*"));
        return k && k.status === "idle" && !busy;
      },
      null,
      { timeout: 120_000 },
    );
  await idle();

  // --- as saved ---------------------------------------------------------------------
  // Settled: no widget output still loading, and each report shows something.
  await page.waitForFunction(
    (idx) => census(idx).every((r) => !r.loading && r.widgets + r.copiesShown >= 1),
    reports,
    { timeout: 60_000 },
  ).catch((e) => {
    if (!/Timeout/.test(String(e))) throw e; // the census below says what is wrong
  });
  const before = await page.evaluate(census, reports);
  await shots(page, "reopened");
  for (const r of before) {
    assert.ok(!r.missing && r.copies === 1, `cell ${r.i}: its static copy is in the notebook ${JSON.stringify(r)}`);
    assert.equal(r.widgets + r.copiesShown, 1, `cell ${r.i} as saved shows the report once: ${JSON.stringify(r)}`);
  }
  step("as saved: " + before.map((r) => `cell ${r.i} ${r.widgets ? "widget (restored)" : "static copy" + (r.error ? ` [${r.error}]` : "")}`).join(", "));

  // --- run again --------------------------------------------------------------------
  await page.evaluate(() => window.jupyterapp.commands.execute("notebook:run-all-cells"));
  await page.waitForFunction(
    (idx) => census(idx).every((r) => r.widgets === 1 && r.copies === 1),
    reports,
    { timeout: 120_000 },
  );
  await idle();
  const after = await page.evaluate(census, reports);
  for (const r of after) {
    assert.equal(r.widgets, 1, `cell ${r.i}: one widget ${JSON.stringify(r)}`);
    assert.equal(r.copies, 1, `cell ${r.i}: one static copy in the page ${JSON.stringify(r)}`);
    assert.equal(r.copiesShown, 0, `cell ${r.i}: the static copy is hidden ${JSON.stringify(r)}`);
  }
  // Hidden with its whole output (no empty gap): the output child is not displayed.
  const gaps = await page.evaluate(() =>
    [...document.querySelectorAll(".vramscope-static")].filter((s) => s.closest(".jp-OutputArea-child")?.checkVisibility()).length,
  );
  assert.equal(gaps, 0, "the static copies' outputs take no room");
  await shots(page, "rerun");
  step(`run again: ${after.length} reports, each one widget, static copies hidden`);

  // --- saved, then "Save and Export Notebook As -> HTML" ------------------------------
  // JupyterLab's export is its server's nbconvert handler on the saved file:
  // the copies (hidden in the page only) are all there, with live's last state.
  await page.evaluate(() => window.jupyterapp.commands.execute("docmanager:save"));
  const res = await page.request.get(`${url}nbconvert/html/${process.env.LAB_NOTEBOOK}?download=true&token=${process.env.LAB_TOKEN}`);
  assert.equal(res.status(), 200, "the export answers");
  const exported = path.join(mkdtempSync(path.join(tmpdir(), "vs-export-")), "export.html");
  writeFileSync(exported, await res.text());
  const view = await page.context().newPage();
  const href = pathToFileURL(exported).href;
  await view.route("**/*", (route) => (route.request().url() === href || route.request().url().startsWith("data:") ? route.continue() : route.abort()));
  await view.goto(href);
  const copies = view.locator(".vramscope-static");
  assert.equal(await copies.count(), reports.length, "one copy per report in the export");
  for (let k = 0; k < reports.length; k++) {
    assert.ok(await copies.nth(k).isVisible(), `copy ${k} is visible in the export`);
    const img = copies.nth(k).locator("img");
    assert.ok(await img.evaluate((el) => el.decode().then(() => el.naturalWidth > 0)), `copy ${k}: its image loads`);
  }
  assert.match(await copies.nth(reports.length - 1).innerText(), /stopped · \d+ samples/, "live's last state");
  await view.screenshot({ path: path.join(artifacts, "lab-export.png"), fullPage: true });
  step(`exported by JupyterLab: ${reports.length} static copies shown, with no network`);

  assert.deepEqual(errors, [], "no page errors");
  assert.deepEqual(foreign, [], "no request leaves the machine");
} finally {
  await browser.close();
}
