/*
 * vramscope flame graph's palette: the frames' fills for the user's code,
 * libraries and synthetic frames, SHADES shades of each around a base colour
 * (the theme's defaults, or --vf-* overrides), so neighbouring frames stay
 * distinct and the user's own lines stand out in either theme. flame.js
 * paints with it; the notebook's static SVG (jupyter/vramscope/notebook/_flamesvg.py)
 * copies its light fills, checked against it.
 *
 * Loads like flame.js: classic script (globalThis.VramscopePalette) after
 * view.js, require(), or import. No network. Inlined into an HTML script
 * element, so it never contains the sequences that close one.
 */
(function (root, factory) {
  "use strict";
  const viewBase = (root && root.VramscopeView) || (typeof require === "function" ? require("./view.js") : null);
  if (!viewBase) throw new Error("vramscope palette.js: load view.js first (profiler/flame/web/files.json)");
  const api = factory(viewBase);
  if (typeof module === "object" && module !== null && module.exports) module.exports = api;
  if (root) root.VramscopePalette = api;
})(typeof globalThis !== "undefined" ? globalThis : this, function (viewBase) {
  "use strict";

  const { parseColor } = viewBase;

  /** SHADES is how many shades each kind of frame has. */
  const SHADES = 12;

  /** rgbToHsl turns [r, g, b, a] into [hue, saturation %, lightness %]. */
  function rgbToHsl(rgba) {
    const r = rgba[0] / 255, g = rgba[1] / 255, b = rgba[2] / 255;
    const max = Math.max(r, g, b), min = Math.min(r, g, b);
    const l = (max + min) / 2;
    if (max === min) return [0, 0, l * 100];
    const d = max - min;
    const s = l > 0.5 ? d / (2 - max - min) : d / (max + min);
    let h;
    if (max === r) h = (g - b) / d + (g < b ? 6 : 0);
    else if (max === g) h = (b - r) / d + 2;
    else h = (r - g) / d + 4;
    return [h * 60, s * 100, l * 100];
  }

  // Theme defaults as [hue, saturation, lightness]: the user's code in a
  // strong warm tone, libraries in a muted blue-grey and synthetic frames in
  // grey, so the user's own lines stand out at a glance in either theme.
  // Dark themes get deeper tones under light text, light themes paler ones
  // under dark text.
  const BASES = {
    light: { user: [28, 92, 62], library: [212, 16, 84], synthetic: [0, 0, 91], highlight: "#e35ad8", text: "#1b1b1b", highlightText: "#111111" },
    dark: { user: [18, 78, 30], library: [212, 14, 27], synthetic: [0, 0, 19], highlight: "#b23aa8", text: "#f3f3f3", highlightText: "#ffffff" },
  };

  /**
   * shadePalette spreads SHADES fills around a base [h, s, l]; neighbouring
   * shades differ in hue and lightness so adjacent frames stay distinct.
   */
  function shadePalette(hsl, n) {
    const out = [];
    const hueSpread = hsl[1] > 5 ? 26 : 0;
    for (let j = 0; j < n; j++) {
      const t = n > 1 ? j / (n - 1) - 0.5 : 0;
      const u = n > 1 ? ((j * 5) % n) / (n - 1) - 0.5 : 0; // a second, scrambled axis
      const h = (hsl[0] + t * hueSpread + 360) % 360;
      const l = Math.max(8, Math.min(92, hsl[2] + u * 10));
      out.push("hsl(" + h.toFixed(1) + ", " + hsl[1].toFixed(1) + "%, " + l.toFixed(1) + "%)");
    }
    return out;
  }

  /**
   * buildPalette resolves the colors: explicit overrides (options.colors or
   * --vf-* CSS variables, already merged by the caller) over theme defaults.
   */
  function buildPalette(dark, over) {
    over = over || {};
    const base = dark ? BASES.dark : BASES.light;
    const hslOf = (css, fallback) => {
      const c = parseColor(css);
      return c ? rgbToHsl(c) : fallback;
    };
    return {
      dark: dark,
      fills: [
        shadePalette(hslOf(over.user, base.user), SHADES),
        shadePalette(hslOf(over.library, base.library), SHADES),
        shadePalette(hslOf(over.synthetic, base.synthetic), SHADES),
      ],
      highlight: over.highlight || base.highlight,
      text: over.text || base.text,
      highlightText: over.highlightText || base.highlightText,
    };
  }

  return { SHADES: SHADES, rgbToHsl: rgbToHsl, shadePalette: shadePalette, buildPalette: buildPalette };
});
