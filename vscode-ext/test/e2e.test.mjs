// Tests of the VS Code extension, as a person meets it.
//
// 1. The packaged .vsix: flame.js/flame.css (and the report's timeline.js,
//    report.js and their styles) identical to profiler/flame/web,
//    the bundled server, nothing stray, the manifest against lsp/settings.go,
//    lsp/execute_command.go and lsp/code_lens.go, pinned dependencies.
// 2. The extension in a real VS Code: code-server 4.100.3 (VS Code 1.100.3 in
//    a browser) on 127.0.0.1, driven by Debian's chromium through
//    playwright-core. The .vsix is installed into a fresh extensions folder;
//    ../shared/fixtures opens with vramscope.snapshot = gpt2_train.pickle and
//    vramscope.daemon = "off". Checked: the status bar ("daemon not running");
//    the inlay hint on line 22 of trainer/train_gpt2.py (read from the DOM,
//    equal to the server's golden); its hover; "vramscope: Show Flame Graph"
//    (a webview: nodes drawn, search, hover with bytes and percent; the
//    timeline drawn, a click on a moment shows what was live then); a click on
//    a frame of train_gpt2.py opens the editor at that line (status bar "Ln N");
//    the "flame graph from here" lens; a status-bar click; a hintThreshold
//    change in the Settings editor reaching the server; two lines inserted
//    above line 22 (unsaved) move its hint to line 24, undo moves it back;
//    Compare Snapshots…
//    through VS Code's file dialog (the table, both timelines overlaid, the
//    change by category); then, with a real daemon and agent (the
//    daemon setting switched to "connect"), the status bar on the agent's pid
//    and Take Snapshot's process pick taking and opening a snapshot. No request
//    may leave loopback, no CSP violation, no error notification, and the
//    fixture file must be unchanged.
//
// Determinism: no step acts on screen coordinates measured before the layout
// settles. The cursor moves with Go to Line, the hover comes from
// editor.action.showHover, the palette and Quick Open from keys bound to their
// command ids in keybindings.json, and each step first waits for the state it
// needs (the focused editor, the hint, the lens, a settled list). A step may
// repeat an input once, only where the editor is known to drop input, and the
// output says so ("# retry: ..."); `bash .ci/soak` runs the whole suite ten
// times beside a CPU load. The code-server set-up and these helpers are
// harness.mjs's, shared with report.test.mjs (the report's views in the webview).
//
//   make test-vscode          (make setup installs code-server first)
//   node --test vscode-ext/test/e2e.test.mjs
//
// Needs: go's bin/vramscope (make build), code-server under
// vscode-ext/test/code-server/node_modules (make setup), chromium
// (/usr/bin/chromium or $VRAMSCOPE_CHROMIUM), playwright-core (npm ci),
// python3 (the agent, jupyter/vramscope, stdlib only) and the shared fixtures
// ($VRAMSCOPE_SHARED, default ../shared). Missing pieces fail the test;
// VRAMSCOPE_SKIP_VSCODE=1 skips part 2 on purpose. Screenshots and logs go to
// $VRAMSCOPE_ARTIFACTS/vscode (default test-artifacts/vscode).
import test from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { ext, fixtures, frameRuns, openCodeServer, packageVsix, repoRoot, sha256, skip, waitFor } from "./harness.mjs";

const snapshot = path.join(fixtures, "snapshots/gpt2_train.pickle");
const trainer = path.join(fixtures, "trainer/train_gpt2.py");

// The server's own golden answer for the hint on line 22 (0-based 21).
function goldenHint() {
  const hints = JSON.parse(readFileSync(path.join(repoRoot, "lsp/testdata/gpt2_train.hints.golden"), "utf8"));
  return hints.find((h) => h.position.line === 21).label;
}

// zipEntries reads a .vsix (a zip) with Python's zipfile: {name: {size, mode, sha256}}.
function zipEntries(file) {
  const py = [
    "import hashlib, json, sys, zipfile",
    "z = zipfile.ZipFile(sys.argv[1])",
    "print(json.dumps({i.filename: {'size': i.file_size, 'mode': (i.external_attr >> 16) & 0o777, 'sha256': hashlib.sha256(z.read(i)).hexdigest()} for i in z.infolist()}))",
  ].join("\n");
  return JSON.parse(execFileSync("python3", ["-c", py, file], { encoding: "utf8", maxBuffer: 64 << 20 }));
}

test("the .vsix: manifest, bundled server, and media identical to profiler/flame/web", { timeout: 180_000 }, async (t) => {
  const started = Date.now();
  const vsix = packageVsix();
  t.diagnostic(`packaged ${path.relative(repoRoot, vsix)} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  const manifest = JSON.parse(readFileSync(path.join(ext, "package.json"), "utf8"));

  await t.test("the core's files (profiler/flame/web/files.json) are the CLI's, byte for byte (on disk and in the .vsix)", () => {
    const entries = zipEntries(vsix);
    const core = JSON.parse(readFileSync(path.join(repoRoot, "profiler/flame/web/files.json"), "utf8"));
    const files = ["files.json", ...core.scripts.map((s) => s.file), ...core.styles.map((s) => s.file)];
    assert.ok(files.includes("flame.js") && files.includes("flame.css"), "files.json lists the flame graph");
    for (const f of files) {
      const original = sha256(path.join(repoRoot, "profiler/flame/web", f));
      assert.equal(sha256(path.join(ext, "media", f)), original, `vscode-ext/media/${f} differs from profiler/flame/web/${f}: npm run assets -w vscode-ext`);
      assert.equal(entries[`extension/media/${f}`]?.sha256, original, `the .vsix's media/${f} differs from profiler/flame/web/${f}`);
    }
  });

  await t.test("what the .vsix holds", () => {
    const entries = zipEntries(vsix);
    for (const f of ["package.json", "out/extension.js", "media/flamegraph.js", "media/flamegraph.css", "bin/vramscope"]) {
      assert.ok(entries[`extension/${f}`], `the .vsix lacks ${f}`);
    }
    assert.ok(entries["extension/readme.md"], "the .vsix lacks the README (vsce names it readme.md)");
    assert.equal(entries["extension/bin/vramscope"].sha256, sha256(path.join(repoRoot, "bin/vramscope")), "the bundled server is bin/vramscope");
    assert.ok(entries["extension/bin/vramscope"].mode & 0o100, "the bundled server is executable");
    const stray = Object.keys(entries).filter((n) => /^extension\/(src|test|scripts|node_modules)\//.test(n) || n.endsWith(".map"));
    assert.deepEqual(stray, [], "sources, tests and node_modules stay out of the .vsix");
    const packagedManifest = JSON.parse(execFileSync("python3", ["-c", "import sys, zipfile; sys.stdout.write(zipfile.ZipFile(sys.argv[1]).read('extension/package.json').decode())", vsix], { encoding: "utf8" }));
    assert.equal(packagedManifest.version, manifest.version);
  });

  await t.test("manifest: engine, commands, settings, pinned dependencies", () => {
    assert.equal(manifest.engines.vscode, "^1.100.0");
    assert.equal(manifest.main, "./out/extension.js");
    const titles = Object.fromEntries(manifest.contributes.commands.map((c) => [c.command, `${c.category}: ${c.title}`]));
    for (const title of ["vramscope: Take Snapshot", "vramscope: Open Snapshot File…", "vramscope: Compare Snapshots…", "vramscope: Show Flame Graph", "vramscope: Attach to Process…"]) {
      assert.ok(Object.values(titles).includes(title), `no command titled ${title}`);
    }
    const src = readFileSync(path.join(ext, "src/commands.ts"), "utf8");
    for (const id of Object.keys(titles)) assert.ok(src.includes(`"${id}"`), `${id} is contributed but src/commands.ts does not register it`);
    const props = Object.keys(manifest.contributes.configuration.properties).sort();
    assert.deepEqual(props, ["vramscope.daemon", "vramscope.followNewSnapshots", "vramscope.hintThreshold", "vramscope.path", "vramscope.pathMap", "vramscope.snapshot", "vramscope.weight"]);
    // Every key the server reads (lsp.Settings) is a setting.
    const goKeys = [...readFileSync(path.join(repoRoot, "lsp/settings.go"), "utf8").matchAll(/json:"(\w+)"/g)].map((m) => m[1]).filter((k) => k !== "vramscope");
    assert.ok(goKeys.length >= 5, `read ${goKeys} from lsp/settings.go`);
    for (const k of goKeys) assert.ok(props.includes(`vramscope.${k}`), `lsp.Settings reads ${k}; package.json does not contribute vramscope.${k}`);
    // The README documents each setting.
    const readme = readFileSync(path.join(repoRoot, "README.md"), "utf8");
    for (const p of props) assert.ok(readme.includes(p), `README.md does not document ${p}`);
    // Exact versions only; the ones the extension is built against.
    for (const [name, v] of Object.entries({ ...manifest.dependencies, ...manifest.devDependencies })) {
      assert.match(v, /^\d+\.\d+\.\d+$/, `${name} is not pinned: ${v}`);
    }
    assert.match(manifest.dependencies["vscode-languageclient"], /^9\./);
    assert.match(manifest.devDependencies["@vscode/vsce"], /^3\.9\./);
    assert.equal(manifest.devDependencies["@types/vscode"], "1.100.0");
  });

  await t.test("the server's commands: the lens commands open UI, every one is in the generated commands_gen.ts", () => {
    // lsp/command declares every command once (execute_command.go dispatches by it,
    // ranks.go's too); src/commands_gen.ts is generated from it (go test ./internal/wiregen
    // fails when it is stale), and tsc types every ctx.exec call by it.
    const goCmds = Object.fromEntries(
      [...readFileSync(path.join(repoRoot, "lsp/command/command.go"), "utf8").matchAll(/^\t(\w+)\s*=\s*"(vramscope\.\w+)"/gm)].map((m) => [m[1], m[2]]),
    );
    assert.ok(Object.keys(goCmds).length >= 10, JSON.stringify(goCmds));
    const gen = readFileSync(path.join(ext, "src/commands_gen.ts"), "utf8");
    for (const name of Object.values(goCmds)) assert.ok(gen.includes(`"${name}"`), `src/commands_gen.ts does not know the server command ${name} (make generate)`);
    const lensCmds = [...new Set([...readFileSync(path.join(repoRoot, "lsp/code_lens.go"), "utf8").matchAll(/Command:\s*command\.(\w+)/g)].map((m) => goCmds[m[1]]))];
    assert.ok(lensCmds.length >= 2, JSON.stringify(lensCmds));
    const cmdSrc = readFileSync(path.join(ext, "src/commands.ts"), "utf8");
    const key = Object.fromEntries([...gen.matchAll(/^ {2}(\w+): "(vramscope\.\w+)",$/gm)].map((m) => [m[2], m[1]]));
    for (const c of lensCmds) {
      assert.ok(key[c] && cmdSrc.includes(`ctx.intercept(Server.${key[c]}`), `a code lens runs ${c}; src/commands.ts does not route it to the UI`);
    }
  });
});

test("the extension in code-server (VS Code 1.100.3)", { skip, timeout: 300_000 }, async (t) => {
  assert.ok(existsSync(snapshot) && existsSync(trainer), `the shared fixtures are not at ${fixtures} (set VRAMSCOPE_SHARED)`);
  const trainerHash = sha256(trainer);
  const h = await openCodeServer(t, { name: "vscode", settings: { "vramscope.snapshot": snapshot } });
  const { page, work, socket, artifacts, started, step, attempt, press, quickInput, quickInputOpen, focusEditor, palette, goToLine, editSetting, flameFrame } = h;
  const shot = h.shot;

  await step('the status bar says "vramscope: daemon not running" (daemon "off")', async () => {
    await waitFor("the vramscope status bar item", async () => /vramscope: daemon not running/.test((await page.textContent(".part.statusbar")) || ""), 60_000);
  });

  await h.openFile("trainer/train_gpt2.py");

  // The view line of source line n (view lines are placed by their CSS top;
  // the gutter's line number at the same top names the line): its text and hints.
  const viewLine = async (n) =>
    page.evaluate((n) => {
      const editor = document.querySelector(".editor-group-container.active .monaco-editor");
      if (!editor) return null;
      const num = [...editor.querySelectorAll(".margin-view-overlays > div")].find(
        (d) => d.querySelector(".line-numbers")?.textContent.trim() === String(n),
      );
      if (!num) return null;
      const line = [...editor.querySelectorAll(".view-lines .view-line")].find((l) => l.style.top === num.style.top);
      if (!line) return null;
      const hints = [...line.querySelectorAll("span")]
        .filter((s) => /inlay|dyn-rule/.test(s.className) && s.textContent.trim() && !s.querySelector("span"))
        .map((s) => s.textContent.replace(/\u00a0/g, " ").trim());
      return { text: line.textContent.replace(/\u00a0/g, " "), top: line.style.top, hints };
    }, n);
  const line22 = () => viewLine(22);
  // The "at peak" hints on source line n (null: the line is not drawn).
  const peakHints = async (n) => (await viewLine(n))?.hints.filter((h) => /at\s+peak/.test(h)) ?? null;

  // The lens above def train_step: until it is drawn, the lines below it move.
  const trainStepLens = page.locator(".editor-group-container.active .monaco-editor .codelens-decoration a", { hasText: "flame graph from here" }).first();

  await step("inlay hint on line 22", async () => {
    const l = await waitFor("an inlay hint on line 22", async () => {
      const v = await line22();
      return v && v.hints.length ? v : null;
    }, 60_000);
    t.diagnostic(`line 22: ${l.text.trim()}`);
    assert.match(l.text, /out = model\(input_ids=ids, labels=ids\)/);
    const hint = l.hints.find((h) => /at peak/.test(h));
    assert.ok(hint, `no "at peak" hint among ${JSON.stringify(l.hints)}`);
    assert.match(hint, /^\d+(\.\d\d)? (B|KiB|MiB|GiB|TiB) at peak · \d+% · \d+ allocs?$/);
    assert.equal(hint, goldenHint(), "the hint VS Code shows is the server's golden hint");
    await shot(page, "01-inlay-hints.png");
  });

  await step("hover on line 22", async () => {
    // Everything that moves line 22 is drawn (the hint, the lens above
    // train_step); then the cursor goes to the model call with Go to Line and
    // the hover is asked for with editor.action.showHover: no screen
    // coordinates at all.
    await waitFor("the inlay hint on line 22", async () => (await line22())?.hints.length > 0, 30_000);
    await trainStepLens.waitFor({ state: "visible", timeout: 30_000 }).catch(() => {
      throw new Error('timed out waiting for the "flame graph from here" lens above def train_step');
    });
    await focusEditor("train_gpt2.py");
    const col = readFileSync(trainer, "utf8").split("\n")[21].indexOf("model(") + 2;
    assert.ok(col > 1, "line 22 of train_gpt2.py calls model(");
    await goToLine(22, col);
    const content = page.locator(".monaco-hover:not(.hidden) .monaco-hover-content, .monaco-hover:not(.hidden) .hover-contents");
    const hover = await attempt("hover with \"live at peak\"", press("showHover"), async () => {
      const text = (await content.allTextContents()).join("\n");
      return /live at peak/.test(text) ? text : null;
    });
    assert.match(hover, /train_gpt2\.py:22/);
    assert.match(hover, /\d+(\.\d\d)? (B|KiB|MiB|GiB) live at peak \(\d+\.\d% of/);
    assert.match(hover, /alive at snapshot: \d+(\.\d\d)? (B|KiB|MiB|GiB)/);
    assert.match(hover, /Top stacks through this line/);
    // Shown whole: the hover has finished fading in, and its last stack is
    // inside the hover's visible box (no scrolling to reach it).
    const shown = await waitFor("the hover to finish fading in", () =>
      page.evaluate(() => {
        const h = document.querySelector(".monaco-hover:not(.hidden)");
        if (!h || h.getAnimations({ subtree: true }).some((a) => a.playState === "running")) return null;
        for (let e = h; e; e = e.parentElement) if (getComputedStyle(e).opacity !== "1") return null;
        const box = h.getBoundingClientRect();
        const items = [...h.querySelectorAll("ol li")];
        const last = items.length ? items[items.length - 1].getBoundingClientRect() : null;
        return { stacks: items.length, lastInside: !!last && last.bottom <= box.bottom + 1 && last.top >= box.top - 1 };
      }),
    5_000);
    assert.equal(shown.stacks, 3, "the hover lists three stacks");
    assert.ok(shown.lastInside, "the hover's last stack is out of view (scrolled)");
    await shot(page, "02-hover.png");
    await page.keyboard.press("Escape");
  });

  let frame;
  await step("Show Flame Graph opens the webview with nodes", async () => {
    await focusEditor("train_gpt2.py");
    await palette("vramscope: Show Flame Graph");
    frame = await flameFrame();
    const state = await frame.evaluate(() => window.vramscope.state());
    t.diagnostic(`flame graph: ${state.nodes} nodes, zoom ${state.zoomPath.join(" > ")}, first render ${state.renderMs?.toFixed(1)} ms`);
    assert.ok(state.nodes > 10, `only ${state.nodes} nodes`);
    const painted = await frame.evaluate(() => {
      const c = document.querySelector("canvas.vf-canvas");
      const px = c.getContext("2d").getImageData(0, 0, c.width, Math.min(c.height, 200)).data;
      const colors = new Set();
      for (let i = 0; i < px.length; i += 4 * 53) colors.add((px[i] << 16) | (px[i + 1] << 8) | px[i + 2]);
      return colors.size;
    });
    assert.ok(painted > 3, `the canvas shows ${painted} colors`);
    const facts = await frame.textContent("#vs-facts");
    assert.match(facts, /total: \d+\.\d\d GiB/);
    // Search, from the same flame.js as the CLI page.
    await frame.fill("input.vf-search", "train_step");
    await frame.waitForFunction(() => /match/.test(document.querySelector(".vf-summary").textContent));
    assert.match(await frame.textContent(".vf-summary"), /^[\d,]+ match(es)? · \d+\.\d\d [KMGT]iB · \d+\.\d\d% of total$/);
    await frame.evaluate(() => window.vramscope.search(""));
    await frame.fill("input.vf-search", "");
    await shot(page, "03-flame-graph.png");
  });

  await step("hover in the flame graph shows bytes and percent", async () => {
    const canvas = frame.locator("canvas.vf-canvas");
    const box = await canvas.boundingBox();
    const rowH = await frame.evaluate(() => window.vramscope.state().rowHeight);
    await attempt("flame-graph tooltip", () => canvas.hover({ position: { x: box.width * 0.3, y: 2.5 * rowH } }), () => frame.locator(".vf-tooltip:not([hidden])").count());
    const tip = await frame.textContent(".vf-tooltip");
    assert.match(tip, /\d+(\.\d\d)? (B|KiB|MiB|GiB) · \d+\.\d\d% of total/);
  });

  await step("the timeline is drawn and a click on a moment shows what was live then", async () => {
    // report.js around the flame graph, the same files as the CLI's page.
    const tl = frame.locator("canvas.vt-canvas");
    await waitFor("the timeline", async () => (await frame.evaluate(() => window.vramscope.reportState && window.vramscope.reportState().timeline?.drawn)) > 0, 10_000);
    const box = await tl.boundingBox();
    assert.ok(box && box.width > 200 && box.height > 60, `timeline box ${JSON.stringify(box)}`);
    const peakText = await frame.textContent(".vr-showing");
    // Playwright places the click inside the element as it is when it clicks.
    const moment = await attempt(
      "a moment picked on the timeline",
      () => tl.click({ position: { x: Math.round(box.width * 0.6), y: Math.round(box.height / 2) } }),
      () => frame.evaluate(() => window.vramscope.reportState().moment),
    );
    assert.ok(moment.bytes > 0, JSON.stringify(moment));
    const showing = await frame.textContent(".vr-showing");
    assert.match(showing, /^Live at .+: \d+(\.\d\d)? (B|KiB|MiB|GiB)$/);
    assert.notEqual(showing, peakText);
    const root = await frame.evaluate(() => document.querySelector(".vf-crumb").textContent);
    assert.equal(root, "all");
    t.diagnostic(`moment: ${showing} (${(await frame.evaluate(() => window.vramscope.reportState().momentMs)).toFixed(1)} ms)`);
    await shot(page, "03b-timeline-moment.png");
    await attempt("the peak shown again", () => frame.locator("button.vr-peak").click(), () => frame.evaluate(() => window.vramscope.reportState().moment === null));
  });

  await step("clicking a frame of train_gpt2.py opens the editor at its line", async () => {
    // Find, through the renderer's own hit-testing, a frame of train_gpt2.py
    // on screen (train_step at line 22 when drawn), and where it is.
    // train_step at line 22 (the hinted line) first, then any train_step, then the widest.
    const rank = (f) => (f.name === "train_step" ? (f.line === 22 ? 2 : 1) : 0);
    let hit = null;
    for (const cand of await frameRuns(frame, 4)) {
      if (!/trainer\/train_gpt2\.py$/.test(cand.file) || !(cand.line > 0)) continue;
      if (!hit || rank(cand) > rank(hit) || (rank(cand) === rank(hit) && cand.w > hit.w)) hit = cand;
    }
    assert.ok(hit, "no frame of trainer/train_gpt2.py in the flame graph");
    t.diagnostic(`clicking ${hit.name} ${path.basename(hit.file)}:${hit.line} (${hit.w}px wide)`);
    assert.equal(hit.file, trainer, "flame-graph paths are local (mapped from /workspace/trainer)");
    const status = await attempt(`editor at line ${hit.line}`, () => frame.locator("canvas.vf-canvas").click({ position: { x: hit.x, y: hit.y } }), async () => {
      const s = await page.textContent(".part.statusbar");
      const tab = await page.locator(".editor-group-container.active .tab.active").getAttribute("aria-label").catch(() => "");
      return new RegExp(`Ln ${hit.line}, Col \\d+`).test(s) && /train_gpt2\.py/.test(tab || "") ? s : null;
    });
    assert.match(status, new RegExp(`Ln ${hit.line}, Col 1\\b`));
    const current = await page.evaluate(() => {
      const editor = document.querySelector(".editor-group-container.active .monaco-editor");
      const cur = editor && editor.querySelector(".margin-view-overlays .current-line");
      const div = cur && cur.closest(".margin-view-overlays > div");
      return div ? div.querySelector(".line-numbers")?.textContent.trim() : null;
    });
    if (current !== null) assert.equal(current, String(hit.line), "the highlighted line");
    await shot(page, "04-frame-click-opened-line.png");
  });

  await step('the code lens "flame graph from here" opens the webview at its function', async () => {
    await focusEditor("train_gpt2.py");
    await goToLine(20, 1);
    await trainStepLens.waitFor({ state: "visible", timeout: 20_000 });
    const zoomRoot = await attempt("flame graph rooted at train_step", () => trainStepLens.click(), async () => {
      frame = await flameFrame();
      const st = await frame.evaluate(() => window.vramscope.state());
      return st.zoomPath[0] === "train_step" ? st : null;
    });
    assert.ok(zoomRoot.nodes > 1);
    await shot(page, "05-lens-flame-graph-from-here.png");
  });

  await step("clicking the status bar item opens the whole flame graph", async () => {
    const item = page.locator(".part.statusbar .statusbar-item", { hasText: "vramscope: daemon not running" }).first();
    await attempt("flame graph rooted at the whole snapshot again", () => item.click(), async () => {
      frame = await flameFrame();
      return (await frame.evaluate(() => window.vramscope.state())).zoomPath[0] === "all";
    });
  });

  await step("a settings change reaches the server (workspace/didChangeConfiguration)", async () => {
    // Line 22 holds 54% of the peak and line 23 29%: a threshold of 0.4 hides only line 23's hint.
    const hintsOn = async (n) => (await peakHints(n))?.length ?? -1;
    await focusEditor("train_gpt2.py");
    await goToLine(1, 1);
    await waitFor("hints on lines 22 and 23", async () => (await hintsOn(22)) > 0 && (await hintsOn(23)) > 0, 20_000);
    // Through the Settings editor, as a person would.
    const setThreshold = async (value) => {
      await editSetting("vramscope.hintThreshold", async () => {
        const input = page.locator(".settings-editor .setting-item-number", { hasText: "Hint Threshold" }).locator("input").first();
        await input.waitFor({ state: "visible", timeout: 20_000 });
        await input.fill(value);
        await input.press("Tab");
      }, value, "0.01");
      await focusEditor("train_gpt2.py");
    };
    await setThreshold("0.4");
    await waitFor("line 23's hint to go (hintThreshold 0.4)", async () => (await hintsOn(23)) === 0 && (await hintsOn(22)) > 0, 30_000);
    await shot(page, "06-hint-threshold-0.4.png");
    await setThreshold("0.01");
    await waitFor("line 23's hint to come back", async () => (await hintsOn(23)) > 0, 30_000);
  });

  await step("hints follow an edit: two lines inserted above line 22 move its hint to line 24; undo moves it back", async () => {
    // The line's text and its "at peak" hint (null: none).
    const at = async (n) => {
      const l = await viewLine(n);
      return l && { text: l.text, hint: l.hints.find((h) => /at\s+peak/.test(h)) ?? null };
    };
    const golden = goldenHint();
    await focusEditor("train_gpt2.py");
    await goToLine(22, 1);
    await waitFor("the hint on line 22", async () => (await at(22))?.hint === golden, 20_000);
    // The fixtures open read-only: writeable for this step (its lock is a
    // CSS decoration, nothing to wait for in the DOM; an edit refused shows
    // "Cannot edit in read-only editor" and the wait below fails).
    await press("writeable")();
    // Two inputs, not retried (a repeat would insert two more lines).
    await press("insertLineBefore")();
    await press("insertLineBefore")();
    const moved = await waitFor("the hint on line 24 and none on line 22", async () => {
      const [l22, l24] = [await at(22), await at(24)];
      return l24?.hint === golden && /out = model\(input_ids=ids, labels=ids\)/.test(l24.text) && l22 && l22.hint === null ? l24 : null;
    }, 20_000);
    t.diagnostic(`after the edit, line 24: ${moved.text.trim()}  ${moved.hint}`);
    await shot(page, "07-hints-after-edit.png");
    await press("undo")();
    await press("undo")();
    await waitFor("the hint back on line 22 after undo", async () => {
      const l22 = await at(22);
      return l22?.hint === golden && /out = model\(input_ids=ids, labels=ids\)/.test(l22.text);
    }, 20_000);
    const dirty = page.locator(".editor-group-container.active .tab.active.dirty");
    assert.equal(await dirty.count(), 0, "train_gpt2.py is unsaved after the undo");
    await press("readonly")();
  });

  await step("Compare Snapshots… shows the diff table", async () => {
    // No daemon, so no stored snapshots: each side is a file, chosen in VS Code's own file dialog.
    await focusEditor("train_gpt2.py");
    await palette("vramscope: Compare Snapshots");
    const title = page.locator(".quick-input-widget .quick-input-title");
    const dialogFor = async (side) => (await quickInput.isVisible().catch(() => false)) && ((await title.textContent().catch(() => "")) || "").includes(`the snapshot ${side}`);
    for (const [side, f] of [["before", "gpt2_train.pickle"], ["after", "oom_batch.pickle"]]) {
      await waitFor(`the file dialog for the snapshot ${side}`, () => dialogFor(side), 20_000);
      // The dialog lists the typed path's folder as it is typed: Enter only
      // once the whole path is in the box and the list is that folder's, with
      // no other entry focused (Enter on a list still loading, or with an entry
      // focused, picks that entry instead of the typed path).
      const want = path.join(fixtures, "snapshots", f);
      await quickInput.fill(want);
      await waitFor(`the file dialog to show ${want} over its folder's listing`, () =>
        page.evaluate(([want, f]) => {
          const input = document.querySelector(".quick-input-widget input");
          const rows = [...document.querySelectorAll(".quick-input-list .monaco-list-row")];
          const focused = rows.filter((r) => r.classList.contains("focused"));
          return input?.value === want && rows.some((r) => r.getAttribute("aria-label") === f) && focused.every((r) => r.getAttribute("aria-label") === f);
        }, [want, f]),
      20_000);
      await attempt(`file dialog for the snapshot ${side} taking ${f}`, () => page.keyboard.press("Enter"), async () => !(await dialogFor(side)));
    }
    const table = await waitFor(
      "the compare webview",
      async () => {
        for (const f of page.frames()) {
          const v = await f
            .evaluate(() => {
              // The per-line table (the categories' table comes before it).
              if (!document.querySelector("table.sites tbody") || !document.querySelector("h2")) return null;
              const root = document.documentElement;
              return {
                title: document.querySelector("h2").textContent,
                facts: document.querySelector(".facts").textContent,
                rows: document.querySelectorAll("table.sites tbody tr").length,
                what: [...document.querySelectorAll("tbody td.what")].map((td) => td.textContent),
                overflow: root.scrollWidth - root.clientWidth,
              };
            })
            .catch(() => null);
          if (v) return v;
        }
        return null;
      },
      60_000,
    );
    t.diagnostic(`compare: ${table.title}: ${table.facts}, ${table.rows} rows`);
    assert.equal(table.title, "gpt2_train.pickle → oom_batch.pickle");
    assert.match(table.facts, /^peak \d+\.\d\d GiB → \d+\.\d\d GiB \([+-]?\d+\.\d\d [KMG]iB\)/);
    assert.ok(table.rows > 1, `${table.rows} rows`);
    assert.ok(table.overflow <= 0, `the table is ${table.overflow}px wider than its panel`);
    // A changed row says which measure changed.
    for (const w of table.what) assert.match(w, /^(new|gone|(peak|current|allocated|allocs)(, (current|allocated|allocs))*)$/, `"what changed" reads ${JSON.stringify(w)}`);
    // Above the table: both timelines overlaid (timeline.js, the CLI page's) and the change by category.
    const overlay = await waitFor(
      "the overlaid timelines",
      async () => {
        for (const f of page.frames()) {
          const st = await f.evaluate(() => (window.vramscopeTimeline ? { ...window.vramscopeTimeline.state(), cats: document.querySelectorAll("table.cats tbody tr").length } : null)).catch(() => null);
          if (st && st.drawn > 0) return st;
        }
        return null;
      },
      20_000,
    );
    assert.ok(overlay.points > 10 && overlay.overlayPoints > 10, `timelines: ${overlay.points} points after, ${overlay.overlayPoints} before`);
    assert.ok(overlay.cats > 0, "the change by category is listed");
    await shot(page, "07-compare.png");
  });

  await step("with a daemon: the status bar follows the process, Take Snapshot picks it and snapshots it", async () => {
    // A real daemon and a real agent (the Python package in jupyter/, without
    // torch; VRAMSCOPE_TEST_SNAPSHOT makes its "snapshot" a copy of the fixture),
    // both children of this test.
    const children = [];
    t.after(() => {
      for (const c of children) {
        try {
          c.kill("SIGTERM");
        } catch {
          // gone
        }
      }
    });
    const daemonLog = [];
    const daemon = spawn(path.join(repoRoot, "bin/vramscope"), ["serve", "--socket", socket, "--data-dir", path.join(work, "store"), "--no-counters"], {
      env: { ...process.env, VRAMSCOPE_SOCKET: socket },
      stdio: ["ignore", "pipe", "pipe"],
    });
    children.push(daemon);
    daemon.stderr.on("data", (d) => daemonLog.push(String(d)));
    await waitFor("the daemon's socket", () => existsSync(socket), 20_000);
    const job = path.join(work, "train_job.py");
    writeFileSync(job, "import sys, time\nsys.modules['torch'] = None  # no torch here: the agent registers for counters only\nimport vramscope\nvramscope.attach()\ntime.sleep(600)\n");
    const agent = spawn("python3", [job], {
      env: { ...process.env, PYTHONPATH: path.join(repoRoot, "jupyter"), VRAMSCOPE_SOCKET: socket, VRAMSCOPE_TEST_SNAPSHOT: snapshot },
      stdio: ["ignore", "ignore", "pipe"],
    });
    children.push(agent);
    const agentLog = [];
    agent.stderr.on("data", (d) => agentLog.push(String(d)));
    t.after(() => writeFileSync(path.join(artifacts, "daemon-and-agent.log"), daemonLog.join("") + "\n--- agent ---\n" + agentLog.join("")));

    // vramscope.daemon "off" -> "connect": the extension restarts the server.
    await editSetting("vramscope.daemon", async () => {
      const select = page.locator(".settings-editor .setting-item-enum", { hasText: "Daemon" }).locator("select").first();
      await select.waitFor({ state: "visible", timeout: 20_000 });
      await select.selectOption("connect");
    }, "connect", "auto");
    const bar = page.locator(".part.statusbar .statusbar-item", { hasText: "vramscope:" }).first();
    await waitFor(`the status bar on pid ${agent.pid}`, async () => new RegExp(`vramscope: pid ${agent.pid}\\b`).test((await bar.textContent()) || ""), 30_000).catch(async (err) => {
      throw new Error(`${err.message}; the status bar says ${JSON.stringify(await bar.textContent())}`);
    });

    await focusEditor("train_gpt2.py");
    await palette("vramscope: Take Snapshot");
    const row = page.locator(".quick-input-list .monaco-list-row.focused", { hasText: `pid ${agent.pid}` }).first();
    await row.waitFor({ state: "visible", timeout: 20_000 });
    const text = (await row.textContent()).replace(/\s+/g, " ");
    t.diagnostic(`process pick: ${text}`);
    assert.match(text, new RegExp(`pid ${agent.pid} · rank 0`));
    assert.match(text, /train_job\.py/);
    assert.match(text, /agent attached/);
    await shot(page, "08-take-snapshot-pick.png");
    await page.keyboard.press("Enter");
    const toast = await waitFor("the snapshot's notification", async () => {
      const all = (await page.locator(".notifications-toasts .notification-list-item-message").allTextContents()).join("\n");
      return /vramscope: took/.test(all) ? all : null;
    }, 60_000);
    t.diagnostic(`notification: ${toast}`);
    assert.match(toast, /vramscope: took \S+\.pickle: peak 5\.42 GiB, \d+ sites, \d+ findings/);
    await shot(page, "09-snapshot-taken.png");
    assert.ok(readdirSync(path.join(work, "store"), { recursive: true }).some((f) => String(f).endsWith(".pickle")), "the daemon stored the snapshot");
  });

  await step("with a daemon: Take Snapshot of a whole job, and the rank picker switches the rank shown", async () => {
    // Two more real agents: ranks 0 and 1 of one torchrun launch (the same
    // TORCHELASTIC_RUN_ID). Their "snapshots" are two real recordings standing
    // in for ranks (GPT-2 at batch 4 and 8, examples/snapshots/whatif).
    const whatif = path.join(repoRoot, "examples/snapshots/whatif");
    const rankJob = path.join(work, "rank_job.py");
    writeFileSync(rankJob, "import sys, time\nsys.modules['torch'] = None\nimport vramscope\nvramscope.attach()\ntime.sleep(600)\n");
    const ranks = [4, 8].map((bs, rank) =>
      spawn("python3", [rankJob], {
        env: { ...process.env, PYTHONPATH: path.join(repoRoot, "jupyter"), VRAMSCOPE_SOCKET: socket, TORCHELASTIC_RUN_ID: "e2ejob",
          RANK: String(rank), LOCAL_RANK: String(rank), WORLD_SIZE: "2", VRAMSCOPE_TEST_SNAPSHOT: path.join(whatif, `whatif_bs${bs}.pickle`) },
        stdio: ["ignore", "ignore", "ignore"],
      }));
    t.after(() => ranks.forEach((c) => c.kill("SIGTERM")));
    await waitFor("both ranks registered with the daemon", () => {
      const ps = JSON.parse(execFileSync(path.join(repoRoot, "bin/vramscope"), ["ps", "--json", "--socket", socket], { encoding: "utf8" }));
      return ranks.every((r) => ps.processes.some((p) => p.pid === r.pid && p.job === "run:e2ejob"));
    }, 30_000);

    await focusEditor("train_gpt2.py");
    await palette("vramscope: Take Snapshot");
    const title = page.locator(".quick-input-widget .quick-input-title");
    const titled = async (text) => (await quickInputOpen()) && ((await title.textContent().catch(() => "")) || "").includes(text);
    const choose = async (what, titleText, filter, rowText) => {
      await waitFor(`the quick pick "${titleText}"`, () => titled(titleText), 20_000);
      const row = page.locator(".quick-input-list .monaco-list-row.focused", { hasText: rowText }).first();
      await attempt(`"${rowText}" as the focused row of ${what}`, () => quickInput.fill(filter, { timeout: 5_000 }).catch(() => {}), async () => (await row.count()) > 0);
      await attempt(`${what} closing on Enter`, () => page.keyboard.press("Enter"), async () => !(await titled(titleText)));
    };
    await choose("the process pick", "take a snapshot of", `pid ${ranks[1].pid} · rank 1/2`, `pid ${ranks[1].pid} · rank 1/2`);
    await choose("the scope pick", "this process has siblings", "Whole job", "Whole job: 2 ranks at once");
    const toast = await waitFor("the whole job's notification", async () => {
      const all = (await page.locator(".notifications-toasts .notification-list-item-message").allTextContents()).join("\n");
      return /vramscope: 2 ranks of run:e2ejob/.test(all) ? all : null;
    }, 60_000);
    t.diagnostic(`notification: ${toast}`);
    assert.match(toast, /vramscope: 2 ranks of run:e2ejob, [\d.]+ ms apart; imbalance ×1\.63, showing rank 1 \(5\.03 GiB\)/);
    const rankItem = page.locator(".part.statusbar .statusbar-item", { hasText: "rank 1 of 2" }).first();
    await rankItem.waitFor({ state: "visible", timeout: 20_000 });
    await shot(page, "10-whole-job.png");
    await attempt("the rank pick", () => rankItem.click(), () => titled("ranks of run:e2ejob"));
    await choose("the rank pick", "ranks of run:e2ejob", "rank 0", "rank 0");
    const shown = page.locator(".part.statusbar .statusbar-item", { hasText: "rank 0 of 2" }).first();
    await shown.waitFor({ state: "visible", timeout: 20_000 });
    await shot(page, "11-rank-0-shown.png");
  });

  await h.assertClean();
  assert.equal(sha256(trainer), trainerHash, `${trainer} changed during the test`);
  t.diagnostic(`e2e took ${((Date.now() - started) / 1000).toFixed(1)} s`);
});
