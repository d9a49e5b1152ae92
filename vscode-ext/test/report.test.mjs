// The memory picture in VS Code's webview, as a person meets it: the linked
// report (flame.js, timeline.js, moments.js, report.js, allocmap.js: the CLI
// page's files) in code-server 4.100.3 with the packaged .vsix (harness.mjs),
// on the shared fixture oom_batch.pickle (an out-of-memory error, three
// findings, allocator maps at the snapshot, the peak and the OOM).
//
// Checked: a frame's hover names it with its bytes (equal to the engine's
// flame tree); a click zooms the flame graph and Escape resets it, and so do
// the arrows (a frame outlined) and Enter; the
// timeline's keys (+, arrows, 0) zoom, pan and reset it; the allocator map is
// drawn at the OOM with the failing request beside the largest free block
// (the engine's figures), a block's hover gives its size and state, and a
// moment's button switches it; a click on a finding selects its time range on
// the timeline and its frames in the flame graph; VS Code's light and dark
// themes reach the flame graph, the timeline and the allocator map (computed
// colours: the background dark or light, text readable). Screenshots in
// $VRAMSCOPE_ARTIFACTS/vscode-report (default test-artifacts/vscode-report).
//
//   VRAMSCOPE_SHARED=../shared node --test vscode-ext/test/report.test.mjs
//
// Needs what e2e.test.mjs needs (bin/vramscope, code-server, chromium).
import test from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fixtures, frameRuns, openCodeServer, repoRoot, skip, waitFor } from "./harness.mjs";

const require = createRequire(import.meta.url);
const Flame = require("../../profiler/flame/web/flame.js");
const snapshot = path.join(fixtures, "snapshots/oom_batch.pickle");
const bytesRe = /\d+(\.\d\d)? (B|KiB|MiB|GiB|TiB)/;

// The engine's own answers for the snapshot, to hold the webview against.
function engine(...args) {
  return JSON.parse(execFileSync(path.join(repoRoot, "bin/vramscope"), [...args, snapshot], { encoding: "utf8", maxBuffer: 256 << 20 }));
}

// findFrame is the widest run of frames in the flame graph that match want
// ({name, line} or {noFile: true}), with where its middle is (canvas
// coordinates): frameRuns, through the renderer's own hit-testing.
async function findFrame(frame, want) {
  const match = (f) => (want.noFile ? !f.file && f.name !== "all" : f.name === want.name && f.line === want.line);
  let best = null;
  for (const run of await frameRuns(frame, 2)) if (match(run) && (!best || run.w > best.w)) best = run;
  return best;
}

// colours reads, in the webview, the computed background and text colours of
// the flame graph, the timeline and the allocator map, and the share of each
// canvas painted with its view's background.
function colours(frame) {
  return frame.evaluate(() => {
    const rgb = (css) => (String(css).match(/[\d.]+/g) || []).slice(0, 3).map(Number);
    const lum = ([r, g, b]) => {
      const c = (v) => ((v /= 255) <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4);
      return 0.2126 * c(r) + 0.7152 * c(g) + 0.0722 * c(b);
    };
    const contrast = (a, b) => (Math.max(lum(a), lum(b)) + 0.05) / (Math.min(lum(a), lum(b)) + 0.05);
    const canvasShare = (canvas, bg) => {
      if (!canvas || !canvas.width || !canvas.height) return 0;
      const px = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
      let n = 0;
      let hit = 0;
      for (let i = 0; i < px.length; i += 4 * 7) {
        n++;
        if (Math.abs(px[i] - bg[0]) + Math.abs(px[i + 1] - bg[1]) + Math.abs(px[i + 2] - bg[2]) <= 6) hit++;
      }
      return hit / n;
    };
    const out = { body: document.body.className };
    for (const [name, root, canvas] of [["flame", ".vf-root", "canvas.vf-canvas"], ["timeline", ".vt-root", "canvas.vt-canvas"], ["allocmap", ".vm-root", null]]) {
      const e = document.querySelector(root);
      const s = getComputedStyle(e);
      const bg = rgb(s.backgroundColor);
      out[name] = { bg: s.backgroundColor, lum: lum(bg), contrast: contrast(rgb(s.color), bg), painted: canvas ? canvasShare(document.querySelector(canvas), bg) : null };
    }
    // The allocator map's block colours follow the theme too (its legend shows them).
    const free = [...document.querySelectorAll(".vm-key")].find((k) => k.textContent === "free segment");
    out.allocmap.freeSwatch = lum(rgb(getComputedStyle(free.querySelector(".vm-swatch")).backgroundColor));
    return out;
  });
}

test("the report's views in VS Code's webview (code-server 1.100.3)", { skip, timeout: 300_000 }, async (t) => {
  assert.ok(existsSync(snapshot), `the shared fixtures are not at ${fixtures} (set VRAMSCOPE_SHARED)`);
  const analysis = engine("analyze", "--json");
  const tree = engine("flame", "--format", "json");
  const h = await openCodeServer(t, { name: "vscode-report", settings: { "vramscope.snapshot": snapshot } });
  const { page, step, attempt, palette, shot } = h;
  await waitFor("the vramscope status bar item", async () => /vramscope: daemon not running/.test((await page.textContent(".part.statusbar")) || ""), 60_000);
  await h.openFile("trainer/train_gpt2.py");

  let frame;
  const report = () => frame.evaluate(() => window.vramscope.reportState());
  await step("Show Flame Graph draws the flame graph, the timeline and the allocator map", async () => {
    await h.focusEditor("train_gpt2.py");
    await palette("vramscope: Show Flame Graph");
    frame = await h.flameFrame();
    await waitFor("the timeline drawn", async () => (await report()).timeline?.drawn > 0, 20_000);
    const map = await waitFor("the allocator map drawn", () =>
      frame.evaluate(() => {
        const root = document.querySelector(".vm-root");
        return root && Number(root.dataset.blocks) > 0 ? { at: root.dataset.at, blocks: Number(root.dataset.blocks), summary: root.querySelector(".vm-summary").textContent } : null;
      }), 20_000);
    t.diagnostic(`allocator map: ${map.blocks} blocks; ${map.summary}`);
    // The OOM's map comes first, with the failing request beside the largest free block.
    const oom = analysis.allocator_maps[0].maps.find((m) => m.at === "oom");
    assert.equal(map.at, "oom");
    const bars = await frame.evaluate(() => [...document.querySelectorAll(".vm-oom .vm-bar-row")].map((r) => ({ cls: r.className, bytes: Number(r.dataset.bytes), text: r.textContent })));
    assert.deepEqual(bars.map((b) => b.bytes), [oom.request, oom.largest_free_block], JSON.stringify(bars));
    assert.ok(oom.request > oom.largest_free_block, "the request is larger than the largest free block");
    // The flame graph opens at the OOM too; its button goes back to the peak (the engine's peak tree, below).
    assert.equal((await report()).moment?.t, analysis.ooms[0].time_us, "the flame graph opens at the OOM");
    await frame.click("button.vr-peak");
    await waitFor("the peak's flame graph", async () => (await report()).moment === null, 10_000);
    await shot(page, "01-report.png");
  });

  await step("hover on a frame shows its name and bytes", async () => {
    const hit = await findFrame(frame, { name: "train_step", line: 22 });
    assert.ok(hit, "no train_step frame at line 22 drawn");
    const inTree = Flame.searchTree(tree.root, { node: (n) => n.n === "train_step" && n.l === 22 });
    assert.equal(inTree.count, 1, "the engine's tree has one train_step frame at line 22");
    const want = inTree.value;
    const canvas = frame.locator("canvas.vf-canvas");
    const tip = frame.locator(".vf-tooltip:not([hidden])");
    const text = await attempt("the tooltip of train_step:22", () => canvas.hover({ position: { x: hit.x, y: hit.y } }), async () => {
      const s = (await tip.count()) ? await tip.textContent() : "";
      return /train_gpt2\.py:22/.test(s) ? s : null;
    });
    t.diagnostic(`tooltip: ${text}`);
    assert.match(await frame.textContent(".vf-tooltip .vf-tt-name"), /train_step/);
    assert.equal((await frame.textContent(".vf-tooltip .vf-tt-bytes")).split(" \u00b7 ")[0], Flame.formatBytes(want), "the tooltip's bytes are the engine's");
    await shot(page, "02-frame-hover.png");
  });

  await step("a click zooms the flame graph and Escape resets it", async () => {
    // A frame without a file: the click zooms and opens no editor, so the keys stay in the webview.
    const hit = await findFrame(frame, { noFile: true });
    assert.ok(hit, "no frame without a file drawn");
    const zoomed = await attempt(`the flame graph zoomed to ${hit.name}`, () => frame.locator("canvas.vf-canvas").click({ position: { x: hit.x, y: hit.y } }), async () => {
      const z = (await frame.evaluate(() => window.vramscope.state())).zoomPath;
      return z[z.length - 1] === hit.name ? z : null;
    });
    assert.ok(zoomed.length > 1 && zoomed[0] === "all", zoomed.join(" > "));
    assert.match(await frame.getAttribute(".vf-crumb[aria-current]", "title"), bytesRe, "the zoomed frame's crumb gives its bytes");
    await waitFor("the keyboard in the flame graph", () => frame.evaluate(() => !!document.activeElement?.closest(".vf-root")), 5_000);
    await shot(page, "03-flame-zoomed.png");
    await attempt("the flame graph reset by Escape", () => page.keyboard.press("Escape"), async () => (await frame.evaluate(() => window.vramscope.state())).zoomPath.join(">") === "all");
  });

  await step("the keyboard zooms the flame graph: arrows pick a frame, Enter zooms, Escape resets", async () => {
    const zoomPath = async () => (await frame.evaluate(() => window.vramscope.state())).zoomPath;
    const outlined = async () => ((await frame.locator(".vf-tooltip:not([hidden])").count()) ? frame.textContent(".vf-tooltip .vf-tt-name") : null);
    await waitFor("the keyboard on the flame graph itself", () => frame.evaluate(() => document.activeElement?.classList.contains("vf-root")), 5_000);
    // From nothing outlined: the whole graph, <module>, main, then main's first child (the widest, train_step:22).
    const names = [];
    for (let i = 0; i < 4; i++) {
      const before = names[names.length - 1] ?? null;
      names.push(await attempt(`the frame outlined after ArrowDown ${i + 1}`, () => page.keyboard.press("ArrowDown"), async () => {
        const n = await outlined();
        return n && n !== before ? n : null;
      }));
    }
    t.diagnostic(`ArrowDown x4: ${names.join(" > ")}`);
    assert.match(names[3], /^train_step/);
    await shot(page, "03b-flame-keyboard-outline.png");
    const z = await attempt("the flame graph zoomed by Enter", () => page.keyboard.press("Enter"), async () => {
      const z = await zoomPath();
      return z.length === 4 ? z : null;
    });
    assert.ok(names[3].startsWith(z[3]), `zoomed to ${z.join(" > ")}, outlined ${names[3]}`);
    await attempt("the flame graph reset by Escape", () => page.keyboard.press("Escape"), async () => (await zoomPath()).join(">") === "all");
  });

  await step("the timeline's keys: + zooms, ArrowRight pans, 0 resets", async () => {
    const range = async () => (await report()).timeline.range;
    const { full } = (await report()).timeline;
    // A click on the legend gives the timeline the keyboard (it picks no moment).
    await attempt("the keyboard in the timeline", () => frame.locator(".vt-legend").click(), () => frame.evaluate(() => document.activeElement?.classList.contains("vt-root")));
    const z = await attempt("the timeline zoomed in by +", () => page.keyboard.press("+"), async () => {
      const r = await range();
      return r[1] - r[0] < (full[1] - full[0]) * 0.6 ? r : null;
    });
    await shot(page, "04-timeline-zoomed.png");
    await attempt("the timeline panned by ArrowRight", () => page.keyboard.press("ArrowRight"), async () => (await range())[0] > z[0]);
    await attempt("the timeline reset by 0", () => page.keyboard.press("0"), async () => (await range()).join() === full.join());
    assert.equal((await report()).moment, null, "the keys picked no moment");
  });

  await step("a block's hover in the allocator map gives its size and state", async () => {
    const canvas = frame.locator("canvas.vm-canvas");
    await canvas.scrollIntoViewIfNeeded();
    // The widest allocated block, placed by allocmap.js's own layout at the canvas's width.
    const target = await frame.evaluate(() => {
      const A = window.VramAllocMap;
      const map = window.vramscope.allocmap.current();
      const lay = A.layout(map, document.querySelector("canvas.vm-canvas").clientWidth);
      const r = lay.blocks.filter((b) => b.block.state === "allocated").sort((a, b) => b.w - a.w)[0];
      const x = r.x + r.w / 2;
      const y = r.y + A.ROW_H / 2;
      return { x, y, w: r.w, lines: A.describe(A.hitTest(lay, x, y), map) };
    });
    assert.ok(target.w >= 4, `the widest allocated block is ${target.w}px`);
    const tip = frame.locator(".vm-tooltip:not([hidden])");
    const text = await attempt("the allocator map's tooltip", () => canvas.hover({ position: { x: target.x, y: target.y } }), async () => ((await tip.count()) ? tip.textContent() : null));
    t.diagnostic(`block: ${text}`);
    assert.equal(text, target.lines.join(""));
    assert.match(target.lines[0], new RegExp(`^${bytesRe.source} \u00b7 allocated$`));
    await shot(page, "05-allocmap-hover.png");
    await attempt("the map at the peak", () => frame.locator('.vm-btn[data-at="peak"]').click(), () => frame.evaluate(() => document.querySelector(".vm-root").dataset.at === "peak"));
    assert.equal(await frame.isHidden(".vm-oom"), true, "the peak's map has no failing request");
  });

  await step("a finding selects its time range on the timeline and its frames in the flame graph", async () => {
    const i = analysis.findings.findIndex((f) => f.evidence && f.evidence.end_us > f.evidence.start_us && f.file);
    assert.ok(i >= 0, "a finding with a time range and a line");
    const f = analysis.findings[i];
    const button = frame.locator(`.vr-findings .vr-link[data-finding="${i}"]`);
    await button.scrollIntoViewIfNeeded();
    const st = await attempt(`finding ${i} (${f.kind}) selected`, () => button.click(), async () => {
      const s = await report();
      return s.timeline.band ? s : null;
    });
    assert.deepEqual(st.timeline.band, [f.evidence.start_us, f.evidence.end_us]);
    assert.ok(st.timeline.range[0] <= f.evidence.start_us && st.timeline.range[1] >= f.evidence.end_us, "the range is in view");
    assert.ok(st.flame.matches > 0, `${f.file}:${f.line} selects frames`);
    assert.match(await frame.textContent(".vf-summary"), new RegExp(`^.+: \\d+ frames? · ${bytesRe.source}$`));
    assert.equal(await button.getAttribute("class"), "vr-link vr-selected");
    await frame.locator(".vr-timeline").scrollIntoViewIfNeeded();
    await shot(page, "06-finding-selected.png");
  });

  // The default theme here is light: dark first, then light again, so that
  // each is a change the views must follow (set in the Settings editor, as a
  // person would).
  for (const [theme, dark] of [["Default Dark Modern", true], ["Default Light Modern", false]]) {
    await step(`the ${theme} theme reaches the flame graph, the timeline and the allocator map`, async () => {
      await h.editSetting("workbench.colorTheme", async () => {
        const select = page.locator(".settings-editor .setting-item-enum", { hasText: "Color Theme" }).locator("select").first();
        await select.waitFor({ state: "visible", timeout: 20_000 });
        // The options may read the theme's label without "Default ".
        const options = await select.evaluate((s) => [...s.options].map((o) => ({ value: o.value, label: o.label || o.textContent })));
        const option = options.find((o) => o.value === theme || o.label === theme) || options.find((o) => o.label === theme.replace(/^Default /, ""));
        assert.ok(option, `no ${theme} among the Color Theme options ${JSON.stringify(options)}`);
        await select.selectOption({ index: options.indexOf(option) });
      }, theme, "Default Light Modern");
      const kind = dark ? "vscode-dark" : "vscode-light";
      await waitFor(`the webview's body class ${kind}`, async () => (await frame.evaluate(() => document.body.className)).includes(kind), 30_000);
      // The canvases repaint on the next animation frame after the theme's variables change.
      const c = await waitFor(`the views painted ${dark ? "dark" : "light"}`, async () => {
        const c = await colours(frame);
        const ok = (v) => (dark ? v.lum < 0.1 : v.lum > 0.7) && v.contrast >= 4.5;
        return ok(c.flame) && ok(c.timeline) && ok(c.allocmap) && c.flame.painted > 0.01 && c.timeline.painted > 0.1 && (dark ? c.allocmap.freeSwatch < 0.1 : c.allocmap.freeSwatch > 0.5) ? c : null;
      }, 15_000).catch(async (err) => {
        throw new Error(`${err.message}: ${JSON.stringify(await colours(frame))}`);
      });
      t.diagnostic(`${theme}: ${JSON.stringify(c)}`);
      const name = dark ? "dark" : "light";
      await frame.locator(".vr-timeline").scrollIntoViewIfNeeded();
      await shot(page, `07-theme-${name}-timeline-flame.png`);
      await frame.locator(".vm-root").scrollIntoViewIfNeeded();
      await shot(page, `08-theme-${name}-allocmap.png`);
    });
  }

  await h.assertClean();
  t.diagnostic(`report test took ${((Date.now() - h.started) / 1000).toFixed(1)} s`);
});
