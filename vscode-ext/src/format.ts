// format.ts formats bytes the way flame.js and the CLI do ("1.50 KiB"); the
// shared cases are profiler/flame/testdata/format_vectors.json
// (test/format.test.mjs).

const UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];

export function formatBytes(n: number): string {
  n = Number(n) || 0;
  const sign = n < 0 ? "-" : "";
  let v = Math.abs(n);
  let u = 0;
  while (v >= 1024 && u < UNITS.length - 1) {
    v /= 1024;
    u++;
  }
  if (u === 0) return `${sign}${Math.round(v)} B`;
  let s = fixed2(v);
  if (s === "1024.00" && u < UNITS.length - 1) {
    s = "1.00";
    u++;
  }
  return `${sign}${s} ${UNITS[u]}`;
}

/**
 * fixed2 writes x >= 0 with two decimals, an exact tie (8x an odd integer) to
 * even as Go's and Python's %.2f do; toFixed rounds it up ("1.13 KiB" for
 * 1152 bytes where the CLI says "1.12 KiB").
 */
function fixed2(x: number): string {
  const e = x * 8;
  if (!Number.isSafeInteger(e) || e % 2 !== 1) return x.toFixed(2);
  const down = Math.floor(x * 100);
  return down % 2 === 0 ? (down / 100).toFixed(2) : x.toFixed(2);
}

/** formatDelta puts a sign on growth: "+1.00 GiB", "-12.00 MiB", "0 B". */
export function formatDelta(n: number): string {
  return n > 0 ? `+${formatBytes(n)}` : formatBytes(n);
}

export function basename(p: string): string {
  const i = Math.max(p.lastIndexOf("/"), p.lastIndexOf("\\"));
  return i >= 0 ? p.slice(i + 1) : p;
}

/** escapeHtml makes text safe inside HTML elements and quoted attributes. */
export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** nonce is a fresh value for a webview's Content-Security-Policy. */
export function nonce(): string {
  const chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  let s = "";
  for (let i = 0; i < 32; i++) s += chars.charAt(Math.floor(Math.random() * chars.length));
  return s;
}
