// commands.ts: the commands of the palette (package.json contributes them as
// "vramscope: …") and the handlers of the server commands that code lenses
// run by name. Each asks the server (workspace/executeCommand); none talks to
// the daemon itself.
import * as vscode from "vscode";
import type { Diff, Process } from "./api";
import type { Summary, TakeArgs } from "./commands_gen";
import { showDiff } from "./compare";
import { type Ctx, errorMessage, Server } from "./ctx";
import { type FlameArgs, FlameGraphPanel } from "./flamegraph";
import { basename, formatBytes } from "./format";
import { jobOf } from "./rankpick";
import { rankPicker } from "./ranks";

/** The palette's command ids (package.json contributes.commands). */
export const Commands = {
  takeSnapshot: "vramscope.pickAndTakeSnapshot",
  openSnapshot: "vramscope.openSnapshotFile",
  compare: "vramscope.compareSnapshotFiles",
  flameGraph: "vramscope.showFlameGraph",
  attach: "vramscope.attachToProcess",
  restart: "vramscope.restartServer",
} as const;

export function registerCommands(ctx: Ctx): void {
  const reg = (id: string, fn: (...args: any[]) => Promise<unknown>) =>
    ctx.pushCleanup(
      vscode.commands.registerCommand(id, async (...args: any[]) => {
        try {
          return await fn(...args);
        } catch (err) {
          void vscode.window.showErrorMessage(`vramscope: ${errorMessage(err)}`);
          return undefined;
        }
      }),
    );
  reg(Commands.takeSnapshot, (arg?: TakeArgs) => takeSnapshot(ctx, arg));
  reg(Commands.openSnapshot, (arg?: { path?: string }) => openSnapshot(ctx, arg));
  reg(Commands.compare, (arg?: { a?: string; b?: string }) => compareSnapshots(ctx, arg));
  reg(Commands.flameGraph, (arg?: FlameArgs) => FlameGraphPanel.show(ctx, objectArg(arg)));
  reg(Commands.attach, (arg?: { pid?: number }) => attach(ctx, arg));
  reg(Commands.restart, () => ctx.restart());

  // Code lenses run the server's own command names: route them to the UI.
  const guarded = (fn: (args: unknown[]) => Promise<unknown>) => async (args: unknown[]) => {
    try {
      return await fn(args);
    } catch (err) {
      void vscode.window.showErrorMessage(`vramscope: ${errorMessage(err)}`);
      return undefined;
    }
  };
  ctx.intercept(Server.flameGraph, guarded((args) => FlameGraphPanel.show(ctx, objectArg(args[0]))));
  ctx.intercept(Server.takeSnapshot, guarded((args) => takeSnapshot(ctx, objectArg(args[0]))));
}

function objectArg<T extends object>(a: unknown): T {
  return (a && typeof a === "object" && !Array.isArray(a) ? a : {}) as T;
}

/** Take Snapshot: pick an attached process (pid, rank, script, GPU memory), then snapshot it. */
export async function takeSnapshot(ctx: Ctx, arg: TakeArgs = {}): Promise<Summary | undefined> {
  let pid = arg.pid || 0;
  if (!pid) {
    const list = await ctx.exec(Server.listProcesses, {});
    const procs = list.processes || [];
    if (!procs.length) {
      void vscode.window.showInformationMessage(
        "vramscope: no GPU process is known to the daemon. Start one with `vramscope run`, or Attach to Process….",
      );
      return undefined;
    }
    const pick = await vscode.window.showQuickPick(
      procs.map((p) => ({ label: processLabel(p), description: processScript(p), detail: processDetail(p), process: p })),
      { title: "vramscope: take a snapshot of", placeHolder: "pid · rank · script · GPU memory", matchOnDescription: true },
    );
    if (!pick) return undefined;
    if (!pick.process.agent) {
      const go = await vscode.window.showWarningMessage(
        `vramscope: pid ${pick.process.pid} has no agent attached. Attach one now?`,
        "Attach",
      );
      if (go !== "Attach") return undefined;
      await attach(ctx, { pid: pick.process.pid });
    }
    pid = pick.process.pid;
    const ranks = jobOf(procs, pick.process);
    const picker = rankPicker();
    if (ranks.length > 1 && picker) {
      const scope = await vscode.window.showQuickPick(
        [
          { label: `pid ${pid} only`, job: false },
          { label: `Whole job: ${ranks.length} ranks at once`, description: pick.process.job, job: true },
        ],
        { title: "vramscope: this process has siblings (one launch)", placeHolder: "snapshot one rank, or every rank of the job" },
      );
      if (!scope) return undefined;
      if (scope.job) {
        ctx.selectedPid = pid;
        await picker.takeJob(pid, arg.label);
        return undefined;
      }
    }
  }
  ctx.selectedPid = pid;
  const s = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: `vramscope: taking a snapshot of pid ${pid}…` },
    () => ctx.exec(Server.takeSnapshot, { pid, label: arg.label }),
  );
  announce(ctx, s, "took");
  return s;
}

function processLabel(p: Process): string {
  const rank = p.world_size > 1 ? ` · rank ${p.rank}/${p.world_size}` : ` · rank ${p.rank}`;
  return `${p.agent ? "$(pulse)" : "$(circle-outline)"} pid ${p.pid}${rank}`;
}

function processScript(p: Process): string {
  const argv = p.argv || [];
  const script = argv.find((a, i) => i > 0 && !a.startsWith("-")) || argv[0] || "";
  return script ? basename(script) : "";
}

function processDetail(p: Process): string {
  const parts: string[] = [];
  if (p.gpu_bytes) parts.push(`GPU ${formatBytes(p.gpu_bytes)}`);
  if (p.torch_allocated !== undefined) parts.push(`torch allocated ${formatBytes(p.torch_allocated)}`);
  if (p.torch_reserved !== undefined) parts.push(`reserved ${formatBytes(p.torch_reserved)}`);
  if (p.device >= 0) parts.push(`cuda:${p.device}`);
  parts.push(p.agent ? (p.recording ? "recording" : "agent attached") : "no agent");
  if (p.note) parts.push(p.note);
  return parts.join(" · ");
}

function announce(ctx: Ctx, s: Summary, verb: string): void {
  const msg = `vramscope: ${verb} ${basename(s.path)}: peak ${formatBytes(s.peak_bytes)}, ${s.sites} sites, ${s.findings} findings`;
  ctx.output.appendLine(msg);
  void vscode.window.showInformationMessage(msg, "Show Flame Graph").then((pick) => {
    if (pick) void vscode.commands.executeCommand(Commands.flameGraph);
  });
}

/** Open Snapshot File…: a *.pickle from disk becomes the shown snapshot. */
export async function openSnapshot(ctx: Ctx, arg: { path?: string } = {}): Promise<Summary | undefined> {
  let file = arg.path;
  if (!file) {
    const picked = await vscode.window.showOpenDialog({
      title: "vramscope: open a CUDA memory snapshot",
      canSelectMany: false,
      openLabel: "Open Snapshot",
      filters: { "PyTorch memory snapshots": ["pickle"], "All files": ["*"] },
    });
    if (!picked || !picked.length) return undefined;
    file = picked[0].fsPath;
  }
  const s = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Window, title: `vramscope: analysing ${basename(file)}` },
    () => ctx.exec(Server.openSnapshot, { path: file }),
  );
  announce(ctx, s, "opened");
  void FlameGraphPanel.refresh(ctx);
  return s;
}

/** Compare Snapshots…: two files or stored snapshots; the diff shows as a table. */
export async function compareSnapshots(ctx: Ctx, arg: { a?: string; b?: string } = {}): Promise<Diff | undefined> {
  const a = arg.a || (await pickSnapshot(ctx, "vramscope: compare — the snapshot before"));
  if (!a) return undefined;
  const b = arg.b || (await pickSnapshot(ctx, `vramscope: compare ${basename(a)} with — the snapshot after`));
  if (!b) return undefined;
  const d = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: `vramscope: comparing ${basename(a)} and ${basename(b)}…` },
    () => ctx.exec(Server.compareSnapshots, { a, b }),
  );
  await showDiff(ctx, d, { a, b });
  return d;
}

async function pickSnapshot(ctx: Ctx, title: string): Promise<string | undefined> {
  type Item = vscode.QuickPickItem & { file?: string };
  const items: Item[] = [{ label: "$(folder-opened) Choose a file…", description: "*.pickle" }];
  try {
    const stored = await ctx.exec(Server.listSnapshots, {});
    for (const s of stored.snapshots || []) {
      items.push({
        label: `$(database) ${s.label || s.id}`,
        description: [s.reason, s.pid ? `pid ${s.pid}` : "", s.source ? basename(s.source) : ""].filter(Boolean).join(" · "),
        detail: `${s.created} · ${formatBytes(s.bytes)}`,
        file: s.path,
      });
    }
  } catch {
    // No daemon: files only.
  }
  const pick = items.length > 1 ? await vscode.window.showQuickPick(items, { title }) : items[0];
  if (!pick) return undefined;
  if (pick.file) return pick.file;
  const files = await vscode.window.showOpenDialog({
    title,
    canSelectMany: false,
    filters: { "PyTorch memory snapshots": ["pickle"], "All files": ["*"] },
  });
  return files && files.length ? files[0].fsPath : undefined;
}

/** Attach to Process…: load the agent into a running Python process by pid. */
export async function attach(ctx: Ctx, arg: { pid?: number } = {}): Promise<void> {
  let pid = arg.pid;
  if (!pid) {
    const s = await vscode.window.showInputBox({
      title: "vramscope: attach to a running PyTorch process",
      prompt: "Process id (Python 3.14+, or a process started under `vramscope run`)",
      placeHolder: "pid",
      validateInput: (v) => (/^\s*[1-9]\d*\s*$/.test(v) ? undefined : "a process id: a positive number"),
    });
    if (!s) return;
    pid = Number(s.trim());
  }
  const out = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: `vramscope: attaching to pid ${pid}…` },
    () => ctx.exec(Server.attach, { pid }),
  );
  ctx.selectedPid = pid;
  const text = (out && out.output ? out.output : "").trim();
  if (text) ctx.output.appendLine(text);
  void vscode.window.showInformationMessage(`vramscope: attached to pid ${pid}${text ? ": " + text.split("\n")[0] : ""}`);
}
