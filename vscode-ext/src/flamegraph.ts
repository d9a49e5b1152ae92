// flamegraph.ts is the flame-graph webview. It runs the very flame.js and
// flame.css of the CLI's HTML page (copied from profiler/flame/web into
// media/ at build time), offline, under a Content-Security-Policy with a
// nonce; colours come from the VS Code theme through flame.css's
// --vscode-* variables. The tree comes from the server (vramscope.flameGraph with format "tree",
// file paths already local); clicking a frame opens its file at its line.
// Beside the whole graph the webview draws the linked report (report.js,
// timeline.js, moments.js, allocmap.js: the files of media/files.json, the same
// as the CLI's page) from vramscope/report: the timeline, a moment's live set
// on click, top lines and findings.
import * as fs from "node:fs";
import * as vscode from "vscode";
import type { Report, Tree } from "./api";
import type { FlameArgs, FlamePage } from "./commands_gen";
import { type Ctx, errorMessage, Server, ServerRequest } from "./ctx";
import { basename, escapeHtml, nonce } from "./format";
import { sameTree } from "./treeid";
import { scriptTags, styleTags, webFiles } from "./webfiles";

export type { FlameArgs };

/** isTree tells the tree (format "tree") from a page (the server's other answer). */
function isTree(t: Tree | FlamePage): t is Tree {
  return "root" in t;
}

/** Messages from the webview (media/flamegraph.js). */
type FromWebview = { type: "ready" } | { type: "open"; file: string; line: number; name?: string };

export class FlameGraphPanel implements vscode.Disposable {
  static readonly viewType = "vramscope.flameGraph";
  private static current: FlameGraphPanel | undefined;

  private readonly disposables: vscode.Disposable[] = [];
  private args: FlameArgs = {};
  private ready = false;
  private tree: Tree | undefined;
  private report: Report | null = null;

  /** show opens the flame graph (or brings it forward) rooted where args say. */
  static async show(ctx: Ctx, args: FlameArgs = {}): Promise<void> {
    const tree = await ctx.exec(Server.flameGraph, { ...args, weight: args.weight || ctx.config.weight, format: "tree" });
    if (!isTree(tree)) throw new Error("the server answered a page, not a flame tree");
    const report = await reportFor(ctx, args);
    let p = FlameGraphPanel.current;
    if (!p) {
      const active = vscode.window.activeTextEditor;
      ctx.sourceColumn = active?.viewColumn ?? vscode.ViewColumn.One;
      p = new FlameGraphPanel(ctx);
      FlameGraphPanel.current = p;
    } else {
      p.panel.reveal(undefined, false);
    }
    p.args = args;
    p.setTree(tree, report);
  }

  /** refresh reloads the open panel's tree when the server shows another snapshot. */
  static async refresh(ctx: Ctx): Promise<void> {
    const p = FlameGraphPanel.current;
    if (!p) return;
    try {
      const tree = await ctx.exec(Server.flameGraph, { ...p.args, weight: p.args.weight || ctx.config.weight, format: "tree" });
      if (!isTree(tree) || sameTree(p.tree, tree)) return; // the snapshot it draws already: keep the user's zoom and moment
      p.setTree(tree, await reportFor(ctx, p.args));
    } catch (err) {
      ctx.output.appendLine(`flame graph refresh: ${errorMessage(err)}`);
    }
  }

  private readonly panel: vscode.WebviewPanel;

  private constructor(private readonly ctx: Ctx) {
    const media = vscode.Uri.joinPath(ctx.extension.extensionUri, "media");
    this.panel = vscode.window.createWebviewPanel(
      FlameGraphPanel.viewType,
      "vramscope: flame graph",
      { viewColumn: vscode.ViewColumn.Beside, preserveFocus: false },
      { enableScripts: true, localResourceRoots: [media], retainContextWhenHidden: true },
    );
    this.panel.webview.html = this.html(media);
    this.panel.onDidDispose(() => this.dispose(), null, this.disposables);
    this.panel.webview.onDidReceiveMessage((m: FromWebview) => void this.onMessage(m), null, this.disposables);
  }

  private setTree(tree: Tree, report: Report | null): void {
    this.tree = tree;
    this.report = report;
    this.panel.title = tree.title ? `flame graph: ${basename(tree.title)}` : "vramscope: flame graph";
    if (this.ready) void this.panel.webview.postMessage({ type: "tree", tree, report, args: this.args });
  }

  private async onMessage(m: FromWebview): Promise<void> {
    switch (m.type) {
      case "ready":
        this.ready = true;
        if (this.tree) void this.panel.webview.postMessage({ type: "tree", tree: this.tree, report: this.report, args: this.args });
        return;
      case "open":
        await openFrame(this.ctx, m.file, m.line);
        return;
    }
  }

  private html(media: vscode.Uri): string {
    const w = this.panel.webview;
    const n = nonce();
    const uri = (f: string) => w.asWebviewUri(vscode.Uri.joinPath(media, f)).toString();
    const core = webFiles(media);
    const csp = [
      "default-src 'none'",
      `style-src ${w.cspSource}`,
      `script-src 'nonce-${n}'`,
      `img-src ${w.cspSource} data:`,
      `font-src ${w.cspSource}`,
    ].join("; ");
    return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="${escapeHtml(csp)}">
<meta name="viewport" content="width=device-width, initial-scale=1">
${styleTags(core.styles, uri)}<link rel="stylesheet" href="${escapeHtml(uri("flamegraph.css"))}">
<title>vramscope flame graph</title>
</head>
<body class="vramscope-page">
<header class="vs-header"><h1 id="vs-title">GPU memory</h1><span class="vs-facts" id="vs-facts">loading…</span></header>
<main id="vramscope-flame" class="vs-main"></main>
${scriptTags(core.scripts, n, uri)}<script nonce="${n}" src="${escapeHtml(uri("flamegraph.js"))}"></script>
</body>
</html>`;
  }

  dispose(): void {
    if (FlameGraphPanel.current === this) FlameGraphPanel.current = undefined;
    this.panel.dispose();
    for (const d of this.disposables.splice(0)) d.dispose();
  }

  static disposeCurrent(): void {
    FlameGraphPanel.current?.dispose();
  }
}

/**
 * reportFor asks the server for the linked report's data (timeline, moments,
 * top lines, findings) of the whole graph; null for a subtree (a code lens's
 * "flame graph from here") or a server without vramscope/report.
 */
async function reportFor(ctx: Ctx, args: FlameArgs): Promise<Report | null> {
  if (args.function) return null;
  try {
    return await ctx.request(ServerRequest.report, {});
  } catch (err) {
    ctx.output.appendLine(`report: ${errorMessage(err)}`);
    return null;
  }
}

/** openFrame opens a frame's file at its line in the source column. */
export async function openFrame(ctx: Ctx, file: string, line: number): Promise<void> {
  if (!file || !fs.existsSync(file)) {
    void vscode.window.showInformationMessage(`vramscope: ${file || "this frame"} is not in the workspace`);
    return;
  }
  const l = Math.max(0, (line || 1) - 1);
  const pos = new vscode.Position(l, 0);
  try {
    const doc = await vscode.workspace.openTextDocument(vscode.Uri.file(file));
    const editor = await vscode.window.showTextDocument(doc, {
      viewColumn: ctx.sourceColumn,
      preserveFocus: false,
      selection: new vscode.Range(pos, pos),
    });
    editor.revealRange(new vscode.Range(pos, pos), vscode.TextEditorRevealType.InCenterIfOutsideViewport);
  } catch (err) {
    void vscode.window.showErrorMessage(`vramscope: cannot open ${file}: ${errorMessage(err)}`);
  }
}
