// Frame labels and the user/library colours of flame.js: run with
//   node --test profiler/flame/web/
import test from "node:test";
import assert from "node:assert/strict";
import flame from "./flame.js";

test("frameLabel draws the engine's label, else the raw name", () => {
  assert.equal(flame.frameLabel({ n: "forward", d: "GPT2Attention.forward (m.h.*.attn)" }), "GPT2Attention.forward (m.h.*.attn)");
  assert.equal(flame.frameLabel({ n: "forward" }), "forward");
  assert.equal(flame.frameLabel({}), "");
});

test("search finds a frame by its label (class or module), not only its raw name", () => {
  const tree = {
    title: "t", weight: "peak", unit: "bytes",
    root: { n: "all", v: 10, c: [{ n: "forward", d: "Block.forward (m.h.*)", f: "/x/model.py", l: 3, v: 10 }] },
  };
  const hits = flame.searchTree(tree.root, flame.makeMatcher("Block.forward"));
  assert.equal(hits.count, 1);
  assert.equal(flame.searchTree(tree.root, flame.makeMatcher("m.h.*")).count, 1);
});

// hsl() strings of a palette's shades as [h, s, l].
function hsl(css) {
  return css.match(/[\d.]+/g).map(Number);
}

// Relative luminance of an hsl colour (WCAG), to compare shades as seen.
function luminance([h, s, l]) {
  s /= 100;
  l /= 100;
  const f = (n) => {
    const k = (n + h / 30) % 12;
    const c = l - s * Math.min(l, 1 - l) * Math.max(-1, Math.min(k - 3, 9 - k, 1));
    return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  };
  return 0.2126 * f(0) + 0.7152 * f(8) + 0.0722 * f(4);
}

for (const dark of [false, true]) {
  test(`user code stands apart from library code (${dark ? "dark" : "light"} theme)`, () => {
    const p = flame.buildPalette(dark, {});
    const [user, lib] = [p.fills[0].map(hsl), p.fills[1].map(hsl)];
    const minUserSat = Math.min(...user.map((c) => c[1]));
    const maxLibSat = Math.max(...lib.map((c) => c[1]));
    assert.ok(minUserSat - maxLibSat >= 50, `saturation: user ≥ ${minUserSat}, library ≤ ${maxLibSat}`);
    // Every user shade is warm, every library shade cool: no shade of one is near a shade of the other.
    assert.ok(user.every((c) => c[0] < 60), "user shades are warm");
    assert.ok(lib.every((c) => c[0] > 180 && c[0] < 260), "library shades are cool");
    // Text stays readable on both (contrast ≥ 4.5 against the theme's text colour).
    const text = dark ? 0.9 : 0.012;
    for (const c of [...user, ...lib]) {
      const [a, b] = [luminance(c), text].sort((x, y) => y - x);
      assert.ok((a + 0.05) / (b + 0.05) >= 4.5, `contrast of ${c} with the text`);
    }
  });
}
