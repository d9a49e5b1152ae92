// compare.ts shows vramscope.compareSnapshots' answer (analyze.Diff) as a
// table in a webview: the peak before and after, then the sites whose memory
// at the peak changed, largest change first. A file:line cell opens the line.
import * as vscode from "vscode";
import { type Ctx } from "./ctx";
import { openFrame } from "./flamegraph";
import { basename, escapeHtml, formatBytes, formatDelta, nonce } from "./format";

/** analyze.Diff as JSON. */
export interface Diff {
  before: string;
  after: string;
  peak_delta: number;
  peak_before: number;
  peak_after: number;
  sites: SiteDelta[] | null;
  new_sites: number;
  gone_sites: number;
}

export interface SiteDelta {
  file: string;
  line: number;
  function: string;
  kind: string;
  status: string;
  /** The measures that changed ("peak", "current", "allocated", "allocs"). */
  changed?: string[];
  peak_before: number;
  peak_after: number;
  peak_delta: number;
  current_delta: number;
  alloc_delta: number;
  allocs_delta: number;
}

const MAX_ROWS = 200;

export function showDiff(ctx: Ctx, d: Diff): void {
  const panel = vscode.window.createWebviewPanel(
    "vramscope.compare",
    `compare: ${basename(d.before)} → ${basename(d.after)}`,
    vscode.ViewColumn.Beside,
    { enableScripts: true, localResourceRoots: [] },
  );
  const sites = (d.sites || []).filter((s) => s.status !== "same").slice(0, MAX_ROWS);
  panel.webview.html = diffHtml(d, sites);
  panel.webview.onDidReceiveMessage((m: { type: string; i: number }) => {
    const s = m && m.type === "open" ? sites[m.i] : undefined;
    if (s) void openFrame(ctx, s.file, s.line);
  });
}

/** statusLabel is "new", "gone", or for a changed site the measures that changed (analyze.SiteDelta.Label). */
export function statusLabel(s: SiteDelta): string {
  return s.status === "changed" && s.changed?.length ? s.changed.join(", ") : s.status;
}

function diffHtml(d: Diff, sites: SiteDelta[]): string {
  const n = nonce();
  const csp = `default-src 'none'; style-src 'nonce-${n}'; script-src 'nonce-${n}'`;
  const rows = sites
    .map((s, i) => {
      const where = s.file ? `${basename(s.file)}:${s.line}` : s.function || "?";
      const fn = s.file && s.function ? `<div class="fn">${escapeHtml(s.function)} · ${escapeHtml(s.kind)}</div>` : "";
      return `<tr class="${escapeHtml(s.status)}"><td class="where"><a href="#" data-i="${i}" title="${escapeHtml(s.file)}">${escapeHtml(where)}</a>${fn}</td><td class="what">${escapeHtml(statusLabel(s))}</td><td class="n">${formatBytes(s.peak_before)}</td><td class="n">${formatBytes(s.peak_after)}</td><td class="n d">${formatDelta(s.peak_delta)}</td><td class="n">${formatDelta(s.alloc_delta)}</td></tr>`;
    })
    .join("\n");
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<title>vramscope compare</title>
<style nonce="${n}">
body { font-family: var(--vscode-font-family); font-size: var(--vscode-font-size); color: var(--vscode-foreground); background: var(--vscode-editor-background); padding: 8px 14px; }
table { border-collapse: collapse; width: 100%; table-layout: fixed; font-variant-numeric: tabular-nums; }
th, td { text-align: left; padding: 3px 6px; border-bottom: 1px solid var(--vscode-panel-border, #8884); vertical-align: top; }
td.where { overflow-wrap: anywhere; }
th.where { width: 30%; } th.what { width: 18%; }
td.n, th.n { text-align: right; }
.fn { color: var(--vscode-descriptionForeground); font-size: 0.9em; }
tr.new td.d { color: var(--vscode-charts-red, #c33); }
tr.gone td.d { color: var(--vscode-charts-green, #3a3); }
a { color: var(--vscode-textLink-foreground); text-decoration: none; }
.facts { color: var(--vscode-descriptionForeground); margin-bottom: 10px; }
</style>
</head>
<body>
<h2>${escapeHtml(basename(d.before))} → ${escapeHtml(basename(d.after))}</h2>
<div class="facts">peak ${formatBytes(d.peak_before)} → ${formatBytes(d.peak_after)} (${formatDelta(d.peak_delta)}) · ${d.new_sites} new sites · ${d.gone_sites} gone</div>
<table>
<thead><tr><th class="where">line</th><th class="what">what changed</th><th class="n">peak before</th><th class="n">peak after</th><th class="n">Δ peak</th><th class="n">Δ allocated</th></tr></thead>
<tbody>
${rows || '<tr><td colspan="6">no site changed</td></tr>'}
</tbody>
</table>
<script nonce="${n}">
const vscode = acquireVsCodeApi();
document.addEventListener("click", (e) => {
  const a = e.target.closest("a[data-i]");
  if (!a) return;
  e.preventDefault();
  vscode.postMessage({ type: "open", i: Number(a.dataset.i) });
});
</script>
</body>
</html>`;
}
