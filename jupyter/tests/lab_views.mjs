// The linked report's views inside the notebook widget, checked in a real
// JupyterLab 4 or Notebook 7 page (lab_browser.mjs drives the page and calls
// these): a moment's top lines on a rested hover, the allocator map (drawn,
// a block hovered), a finding's click-through to the timeline and the flame
// graph, and the JupyterLab Dark and Light themes (computed colours, the
// canvases repainted, text contrast). Each takes the playwright page and the
// widget's locator (.vs-widget) and asserts; any failure throws.
import assert from "node:assert/strict";

const UNITS = ["B", "KiB", "MiB", "GiB", "TiB"];

// formatBytes is the views' own formatting (flame.js, timeline.js, allocmap.js).
export function formatBytes(n) {
  let v = Math.abs(n);
  let u = 0;
  while (v >= 1024 && u < UNITS.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? Math.round(v) + " B" : v.toFixed(2) + " " + UNITS[u];
}

/**
 * restOnMoment rests the pointer at (x, y) on the timeline and waits for the
 * tooltip's lines of that moment (asked once the pointer stays ~150 ms):
 * [{bytes, label}], 1 to 3 of them.
 */
export async function restOnMoment(page, widget, x, y, retried = false) {
  // The view may be drawn again meanwhile (a weight change's tree, then its
  // static copy): the counts below are of one view, so a rest that spans a
  // redraw is done again, once.
  const asked = await widget.evaluate((el) => {
    el.__restView = el.__vramscope;
    return el.__vramscope.timeline.state().hover.asked;
  });
  await page.mouse.move(x - 20, y);
  await page.mouse.move(x, y);
  await widget.locator(".vt-tooltip .vt-tt-line").first().waitFor({ timeout: 10_000 });
  const lines = await widget.locator(".vt-tooltip .vt-tt-line").evaluateAll((rows) =>
    rows.map((r) => ({ bytes: Number(r.dataset.bytes), text: r.textContent })),
  );
  assert.ok(lines.length >= 1 && lines.length <= 3, JSON.stringify(lines));
  for (const l of lines) assert.match(l.text, /^\d+(\.\d\d)? (B|KiB|MiB|GiB) \S/);
  // Two pointer positions, so one or two rests (a slow machine may rest on
  // the first); the storm of moves without a rest is node's test (momenthover.test.mjs).
  const [hover, redrawn] = await widget.evaluate((el) => [el.__vramscope.timeline.state().hover, el.__restView !== el.__vramscope]);
  if (redrawn && !retried) return restOnMoment(page, widget, x, y, true);
  assert.ok(hover.asked > asked && hover.asked <= asked + 2, `${hover.asked - asked} requests for two positions`);
  assert.equal(hover.inFlight, false);
  return lines.map((l) => ({ bytes: l.bytes, label: l.text.replace(/^\S+ \S+ /, "") }));
}

/** momentMatchesHover checks a clicked moment against the lines its hover named. */
export function momentMatchesHover(state, lines) {
  const sum = lines.reduce((a, l) => a + l.bytes, 0);
  assert.ok(sum > 0 && sum <= state.moment.bytes, `the hovered lines hold ${sum} bytes, the moment ${state.moment.bytes}`);
  assert.deepEqual(lines.map((l) => l.label), state.lines.slice(0, lines.length), "the hover's lines are the click's top lines");
}

/**
 * allocatorMap checks the widget's allocator map: shown at `at`, every block
 * of the map drawn, several colours painted, and a real hover on the first
 * block shows the tooltip the map's own hit test gives (size and state of a
 * block of the map). Returns the map's summary line.
 */
export async function allocatorMap(page, widget, at) {
  const root = widget.locator(".vm-root[data-blocks]");
  await root.waitFor({ timeout: 10_000 });
  await root.scrollIntoViewIfNeeded();
  const map = await widget.evaluate((el) => {
    const m = el.__vramscope.allocmap.current();
    return { at: m.at, blocks: m.segments.reduce((n, s) => n + s.blocks.length, 0), sizes: m.segments.flatMap((s) => s.blocks.map((b) => b.size)) };
  });
  assert.equal(map.at, at);
  assert.equal(await root.getAttribute("data-at"), at);
  assert.equal(Number(await root.getAttribute("data-blocks")), map.blocks, "every block is laid out");
  const painted = await root.evaluate((r) => {
    const c = r.querySelector(".vm-canvas");
    const px = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
    const colors = new Set();
    for (let i = 0; i < px.length; i += 4 * 7) colors.add((px[i] << 16) | (px[i + 1] << 8) | px[i + 2]);
    return colors.size;
  });
  assert.ok(painted >= 4, `${painted} colours painted in the allocator map`);

  const canvas = root.locator(".vm-canvas");
  const box = await canvas.boundingBox();
  const tip = root.locator(".vm-tooltip");
  await page.mouse.move(box.x + box.width / 2, box.y - 40);
  assert.equal(await tip.isVisible(), false, "no tooltip before the hover");
  await page.mouse.move(box.x + 4, box.y + 8);
  await root.locator(".vm-tooltip:not([hidden])").waitFor({ timeout: 5_000 });
  const shown = await tip.textContent();
  const expected = await widget.evaluate((el) => el.__vramscope.allocmap.hoverAt(4, 8));
  assert.ok(expected && expected.length, "a block under the pointer");
  assert.equal(shown, expected.join(""), "the hover shows the hit block");
  const head = expected[0].match(/^(\d+(?:\.\d\d)? (?:B|KiB|MiB|GiB)) · (.+)$/);
  assert.ok(head, expected[0]);
  assert.ok(map.sizes.some((s) => formatBytes(s) === head[1]), `${head[1]} is a block's size`);
  return { summary: await root.locator(".vm-summary").textContent(), tooltip: expected };
}

/**
 * findingClickThrough clicks a finding with a time range and a line (from
 * the engine's own analysis of the same snapshot) and checks the timeline
 * selects its range (highlighted, in view) and the flame graph its frames
 * (screenshot: shot("notebook-widget-finding.png")); then a top line selects
 * its frames too.
 */
export async function findingClickThrough(page, widget, analysis, shot) {
  const fs = analysis.findings;
  let i = fs.findIndex((f) => f.file && f.evidence && f.evidence.start_us > 0 && f.evidence.end_us > f.evidence.start_us);
  if (i < 0) i = fs.findIndex((f) => f.file && f.evidence && f.evidence.start_us > 0);
  assert.ok(i >= 0, "a finding with a time range and a line");
  const f = fs[i];
  assert.equal(await widget.locator(".vr-findings .vr-link").count(), fs.length, "every finding listed");
  const button = widget.locator(`.vr-findings .vr-link[data-finding="${i}"]`);
  await button.scrollIntoViewIfNeeded();
  assert.equal(await button.locator(".vr-title").textContent(), f.title);
  await button.click();
  const st = await widget.evaluate((el) => el.__vramscope.reportState());
  const range = [f.evidence.start_us, Math.max(f.evidence.end_us, f.evidence.start_us + 1)];
  assert.deepEqual(st.timeline.band, range, "the timeline highlights the finding's range");
  assert.ok(st.timeline.range[0] <= range[0] && st.timeline.range[1] >= range[1], `the range is in view: ${st.timeline.range}`);
  assert.ok(st.flame.matches > 0, `${f.file}:${f.line} selects frames in the flame graph`);
  assert.match(await widget.locator(".vf-summary").textContent(), /\d+ frames? · /);
  assert.match(await button.getAttribute("class"), /\bvr-selected\b/);
  await shot("notebook-widget-finding.png");
  await widget.evaluate((el) => el.__vramscope.showPeak());
  await widget.locator(".vr-lines .vr-link").first().click();
  assert.ok((await widget.evaluate((el) => el.__vramscope.reportState().flame.matches)) > 0, "a top line selects its frames");
  return { finding: f.title, band: range, matches: st.flame.matches };
}

// The colour checks run in the page: luminance and contrast (WCAG 2).
function colorProbe(el, selectors) {
  const rgb = (s) => (s.match(/[\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => {
    const f = (c) => ((c /= 255) <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4));
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const background = (e) => {
    for (; e; e = e.parentElement) {
      const c = rgb(getComputedStyle(e).backgroundColor);
      if (c.length === 3 || (c.length === 4 && c[3] > 0.5)) return c.slice(0, 3);
    }
    return [255, 255, 255];
  };
  const out = {};
  for (const sel of selectors) {
    const e = sel === "" ? el : el.querySelector(sel);
    if (!e) continue;
    const under = background(e);
    const c = rgb(getComputedStyle(e).color);
    const a = c.length === 4 ? c[3] : 1; // translucent text (JupyterLab's muted colours) over its background
    const bg = lum(under);
    const fg = lum(c.slice(0, 3).map((v, i) => v * a + under[i] * (1 - a)));
    out[sel || ".vs-widget"] = { bg: bg, contrast: (Math.max(bg, fg) + 0.05) / (Math.min(bg, fg) + 0.05) };
  }
  const px = (sel, at) => {
    const c = el.querySelector(sel);
    const [x, y] = at(c);
    return Array.from(c.getContext("2d").getImageData(x, y, 1, 1).data.slice(0, 3));
  };
  out.canvases = {
    timeline: lum(px("canvas.vt-canvas", () => [2, 2])),
    flame: lum(px("canvas.vf-canvas", (c) => [2, c.height - 2])),
    allocmap: px(".vm-canvas", () => [4, 8]),
  };
  return out;
}

const TEXT = ["", ".vr-root", ".vt-root", ".vf-root", ".vm-root", ".vr-h", ".vr-lines .vr-where", ".vf-crumb", ".vt-legend", ".vr-note", ".vs-facts", ".vm-summary"];

/**
 * themes switches JupyterLab (or Notebook 7) to "JupyterLab Dark", then back
 * to "JupyterLab Light" (apputils:change-theme), and checks each time that
 * the widget's backgrounds follow, its text stays readable (contrast >= 4.5),
 * and its canvases are repainted in the theme. shot(name) keeps a screenshot.
 */
export async function themes(page, widget, shot) {
  await widget.evaluate((el) => el.__vramscope.showPeak());
  await widget.locator(".vt-canvas").scrollIntoViewIfNeeded();
  const handle = await widget.elementHandle();
  const light0 = await handle.evaluate(colorProbe, TEXT);
  const out = {};
  for (const [theme, dark] of [["JupyterLab Dark", true], ["JupyterLab Light", false]]) {
    await page.evaluate((t) => window.jupyterapp.commands.execute("apputils:change-theme", { theme: t }), theme);
    // JupyterLab shows its splash screen while the theme's stylesheet loads.
    await page.waitForFunction((d) => document.body.dataset.jpThemeLight === String(!d) && !document.querySelector("#jupyterlab-splash"), dark, {
      timeout: 30_000,
    });
    // The canvases repaint on their own (no test call): wait for it.
    await page.waitForFunction(
      ([el, d, probe]) => {
        const p = new Function("return " + probe)()(el, []).canvases;
        return d ? p.timeline < 0.1 && p.flame < 0.1 : p.timeline > 0.7 && p.flame > 0.7;
      },
      [handle, dark, colorProbe.toString()],
      { timeout: 15_000 },
    );
    const got = await handle.evaluate(colorProbe, TEXT);
    for (const [sel, c] of Object.entries(got)) {
      if (sel === "canvases") continue;
      assert.ok(dark ? c.bg < 0.1 : c.bg > 0.7, `${theme}: ${sel} background luminance ${c.bg.toFixed(3)}`);
      assert.ok(c.contrast >= 4.5, `${theme}: ${sel} text contrast ${c.contrast.toFixed(2)}`);
    }
    if (dark) assert.notDeepEqual(got.canvases.allocmap, light0.canvases.allocmap, "the allocator map is repainted dark");
    else assert.deepEqual(got.canvases.allocmap, light0.canvases.allocmap, "the allocator map is repainted light");
    await shot(dark ? "notebook-widget-dark.png" : "notebook-widget-light.png");
    out[theme] = Object.fromEntries(Object.entries(got).filter(([k]) => k !== "canvases").map(([k, c]) => [k, c.contrast.toFixed(1)]));
  }
  return out;
}
