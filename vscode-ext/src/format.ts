// format.ts formats bytes the way flame.js and the CLI do ("1.50 KiB").

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
  if (v.toFixed(2) === "1024.00" && u < UNITS.length - 1) {
    v = 1;
    u++;
  }
  return `${sign}${v.toFixed(2)} ${UNITS[u]}`;
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
