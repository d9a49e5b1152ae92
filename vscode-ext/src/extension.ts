// extension.ts: the entry point. It makes the Ctx (the language client and
// its disposables), registers the commands, the status bar, and starts the
// server (`vramscope lsp`).
import * as vscode from "vscode";
import { registerCommands } from "./commands";
import { Ctx } from "./ctx";
import { FlameGraphPanel } from "./flamegraph";
import { RankPicker } from "./ranks";
import { StatusBar } from "./statusbar";

let ctx: Ctx | undefined;

export async function activate(extension: vscode.ExtensionContext): Promise<void> {
  const c = new Ctx(extension);
  ctx = c;
  extension.subscriptions.push(c);
  registerCommands(c);
  const bar = new StatusBar(c);
  c.pushCleanup(
    bar,
    new RankPicker(c),
    // A new snapshot (opened, taken, or followed from the daemon) redraws an open flame graph.
    bar.onDidChangeSnapshot(() => void FlameGraphPanel.refresh(c)),
    c.onDidChangeRunning(() => void bar.refresh()),
    { dispose: () => FlameGraphPanel.disposeCurrent() },
  );
  await c.start();
}

export async function deactivate(): Promise<void> {
  const c = ctx;
  ctx = undefined;
  if (c) await c.stop();
}
