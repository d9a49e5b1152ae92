// compare.ts shows vramscope.compareSnapshots' answer (analyze.Diff) as a
// table in a webview: the peak before and after, then the sites whose memory
// at the peak changed, largest change first. A file:line cell opens the line.
// Above the table, both timelines overlaid (timeline.js, the CLI page's, with
// the server's vramscope/diffReport) and the change by category.
import * as vscode from "vscode";
import type { CompareReport, Diff, SiteDelta } from "./api";
import { type Ctx, errorMessage, ServerRequest } from "./ctx";
import { openFrame } from "./flamegraph";
import { basename, escapeHtml, formatBytes, formatDelta, nonce } from "./format";
import { scriptTags, styleTags, type WebFile, type WebFiles, webFiles } from "./webfiles";

/** analyze.DiffReport (lsp/command's CompareReport): what the compare view draws above the table. */
type DiffReport = CompareReport;

const MAX_ROWS = 200;

/** showDiff opens the compare view of d; a and b are the files compared (for the timelines). */
export async function showDiff(ctx: Ctx, d: Diff, files?: { a: string; b: string }): Promise<void> {
  let report: DiffReport | null = null;
  if (files) {
    try {
      report = await ctx.request(ServerRequest.diffReport, files);
    } catch (err) {
      ctx.output.appendLine(`diff report: ${errorMessage(err)}`);
    }
  }
  const media = vscode.Uri.joinPath(ctx.extension.extensionUri, "media");
  const panel = vscode.window.createWebviewPanel(
    "vramscope.compare",
    `compare: ${basename(d.before)} → ${basename(d.after)}`,
    vscode.ViewColumn.Beside,
    { enableScripts: true, localResourceRoots: [media] },
  );
  const sites = (d.sites || []).filter((s) => s.status !== "same").slice(0, MAX_ROWS);
  const w = panel.webview;
  const assets = { cspSource: w.cspSource, uri: (f: string) => w.asWebviewUri(vscode.Uri.joinPath(media, f)).toString(), ...viewFiles(webFiles(media)) };
  panel.webview.html = diffHtml(d, sites, report && report.device && report.before?.device ? report : null, assets);
  panel.webview.onDidReceiveMessage((m: { type: string; i: number }) => {
    const s = m && m.type === "open" ? sites[m.i] : undefined;
    if (s) void openFrame(ctx, s.file, s.line);
  });
}

/** statusLabel is "new", "gone", or for a changed site the measures that changed (analyze.SiteDelta.Label). */
export function statusLabel(s: SiteDelta): string {
  return s.status === "changed" && s.changed?.length ? s.changed.join(", ") : s.status;
}

/** categoryRows are the change by category, before -> after, as table rows. */
function categoryRows(r: DiffReport): string {
  const before = new Map((r.before?.categories || []).map((c) => [c.name, c.bytes]));
  const after = new Map((r.categories || []).map((c) => [c.name, c.bytes]));
  return [...new Set([...before.keys(), ...after.keys()])]
    .map((name) => {
      const a = before.get(name) || 0;
      const b = after.get(name) || 0;
      return a || b ? `<tr><td>${escapeHtml(name.replace(/_/g, " "))}</td><td class="n">${formatBytes(a)}</td><td class="n">${formatBytes(b)}</td><td class="n d">${formatDelta(b - a)}</td></tr>` : "";
    })
    .join("\n");
}

/** viewFiles are the core's scripts and styles but the page's (page.css: this view has a page of its own). */
function viewFiles(core: WebFiles): { scripts: WebFile[]; styles: WebFile[] } {
  return { scripts: core.scripts, styles: core.styles.filter((s) => s.part !== "page") };
}

/** timelineHtml is the overlaid timelines' element, the categories' table and the data (timelineScripts draws them). */
function timelineHtml(r: DiffReport): string {
  // JSON in a script element: "<" escaped so no text can close it.
  const data = JSON.stringify({ after: r.device, before: r.before?.device, report: r, label: "before: " + basename(r.before?.file || "") }).replace(/</g, "\\u003c");
  return `<div class="vs-timeline" id="vs-timeline"></div>
<table class="cats"><thead><tr><th>category at the peak</th><th class="n">before</th><th class="n">after</th><th class="n">Δ</th></tr></thead><tbody>
${categoryRows(r)}
</tbody></table>
<script type="application/json" id="vs-diff-report">${data}</script>`;
}

/**
 * timelineScripts draw the timelines once the whole page (the tables too) is
 * parsed. The core's scripts load in files.json's order: timeline.js needs
 * the ones before it.
 */
function timelineScripts(n: string, uri: (f: string) => string, scripts: WebFile[]): string {
  return `${scriptTags(scripts, n, uri)}<script nonce="${n}">
(function () {
  const d = JSON.parse(document.getElementById("vs-diff-report").textContent);
  window.vramscopeTimeline = VramscopeTimeline.render(document.getElementById("vs-timeline"), d.after, d.report, { overlay: d.before, overlayLabel: d.label });
})();
</script>`;
}

function diffHtml(d: Diff, sites: SiteDelta[], report: DiffReport | null, assets: { cspSource: string; uri: (f: string) => string; scripts: WebFile[]; styles: WebFile[] }): string {
  const n = nonce();
  const csp = `default-src 'none'; style-src 'nonce-${n}' ${assets.cspSource}; script-src 'nonce-${n}'`;
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
${styleTags(assets.styles, assets.uri)}<style nonce="${n}">
.vs-timeline { height: 220px; margin-bottom: 10px; }
table.cats { width: auto; min-width: 50%; margin-bottom: 14px; }
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
${report ? timelineHtml(report) : ""}
<table class="sites">
<thead><tr><th class="where">line</th><th class="what">what changed</th><th class="n">peak before</th><th class="n">peak after</th><th class="n">Δ peak</th><th class="n">Δ allocated</th></tr></thead>
<tbody>
${rows || '<tr><td colspan="6">no site changed</td></tr>'}
</tbody>
</table>
${report ? timelineScripts(n, assets.uri, assets.scripts) : ""}
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
