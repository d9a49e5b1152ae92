// statusbar.ts shows the GPU memory and utilisation of the selected process,
// asked of the server (vramscope.status) about once a second, and says so when
// the daemon or the server is not running. A click opens the flame graph.
import * as vscode from "vscode";
import type { StatusBar as Status } from "./commands_gen";
import { type Ctx, errorMessage, Server } from "./ctx";
import { basename, formatBytes } from "./format";

export const POLL_MS = 1000;

export class StatusBar implements vscode.Disposable {
  private readonly item: vscode.StatusBarItem;
  private timer: NodeJS.Timeout | undefined;
  private busy = false;
  private readonly snapshotEmitter = new vscode.EventEmitter<string>();
  /** Fires when the snapshot the server shows changes. */
  readonly onDidChangeSnapshot = this.snapshotEmitter.event;
  private snapshot = "";

  constructor(private readonly ctx: Ctx) {
    this.item = vscode.window.createStatusBarItem("vramscope.status", vscode.StatusBarAlignment.Left, 10);
    this.item.name = "vramscope";
    this.item.command = "vramscope.showFlameGraph";
    this.item.text = "$(loading~spin) vramscope";
    this.item.show();
    this.timer = setInterval(() => void this.refresh(), POLL_MS);
    void this.refresh();
  }

  async refresh(): Promise<void> {
    if (this.busy) return; // one request at a time: a slow server is not flooded
    this.busy = true;
    try {
      if (!this.ctx.running) {
        this.render(undefined, "the vramscope language server is not running");
        return;
      }
      const pid = this.ctx.selectedPid;
      const st = await this.ctx.exec(Server.status, pid ? { pid } : {});
      this.render(st);
    } catch (err) {
      this.render(undefined, errorMessage(err));
    } finally {
      this.busy = false;
    }
  }

  private render(st: Status | undefined, error?: string): void {
    const tip = new vscode.MarkdownString(undefined, true);
    tip.isTrusted = false;
    if (!st) {
      this.item.text = "$(circle-slash) vramscope: server not running";
      tip.appendText(error || "");
      this.item.tooltip = tip;
      return;
    }
    if (st.snapshot !== undefined && (st.snapshot || "") !== this.snapshot) {
      this.snapshot = st.snapshot || "";
      this.snapshotEmitter.fire(this.snapshot);
    }
    if (!st.daemon) {
      this.item.text = "$(debug-disconnect) vramscope: daemon not running";
      tip.appendMarkdown("**vramscope**: daemon not running");
      if (st.reason) tip.appendText(`\n\n${st.reason}`);
    } else if (!st.pid) {
      this.item.text = "$(pulse) vramscope: no process";
      tip.appendMarkdown("**vramscope**: the daemon runs; no process with an agent (`vramscope run`, or Attach to Process…)");
    } else {
      // NVML's figure for the process first, else torch's own; a process that
      // reported neither (no torch, no driver) shows its pid.
      const mem = st.gpu_bytes ?? st.torch_reserved ?? st.torch_allocated;
      const util = st.util_gpu !== undefined && st.util_gpu !== null ? ` · ${st.util_gpu}%` : "";
      this.item.text = `$(pulse) vramscope: ${mem !== undefined ? formatBytes(mem) : `pid ${st.pid}`}${util}`;
      tip.appendMarkdown(`**vramscope** · pid ${st.pid}\n\n`);
      if (st.gpu_bytes !== undefined) tip.appendText(`GPU memory (NVML): ${formatBytes(st.gpu_bytes)}\n\n`);
      if (st.torch_allocated !== undefined) tip.appendText(`torch allocated: ${formatBytes(st.torch_allocated)}\n\n`);
      if (st.torch_reserved !== undefined) tip.appendText(`torch reserved: ${formatBytes(st.torch_reserved)}\n\n`);
      if (st.util_gpu !== undefined) tip.appendText(`GPU utilisation: ${st.util_gpu}%\n\n`);
    }
    if (st.snapshot) tip.appendText(`\n\nsnapshot: ${basename(st.snapshot)}`);
    tip.appendMarkdown("\n\n_click for the flame graph_");
    this.item.tooltip = tip;
  }

  dispose(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.item.dispose();
    this.snapshotEmitter.dispose();
  }
}
