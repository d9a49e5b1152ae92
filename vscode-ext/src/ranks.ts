// ranks.ts: the ranks of one job. Take Snapshot's "whole job" asks the
// server for every rank at once (vramscope.takeJobSnapshot); a status bar
// item then names the rank shown, and its quick pick switches the snapshot
// the hints and the flame graph show (vramscope.openSnapshot of that rank).
import * as vscode from "vscode";
import { type Ctx, Server } from "./ctx";
import { formatBytes } from "./format";
import { type RankPick, rankItems, rankStatus } from "./rankpick";

/** The picker's own command (the server's are Server.takeJobSnapshot and Server.ranks). */
export const RankCommands = {
  pick: "vramscope.pickRank",
} as const;

let current: RankPicker | undefined;

/** The picker of this window (made at activation). */
export function rankPicker(): RankPicker | undefined {
  return current;
}

export class RankPicker implements vscode.Disposable {
  private readonly item: vscode.StatusBarItem;
  private pick: RankPick | undefined;
  private readonly command: vscode.Disposable;

  constructor(private readonly ctx: Ctx) {
    this.item = vscode.window.createStatusBarItem("vramscope.rank", vscode.StatusBarAlignment.Left, 9);
    this.item.name = "vramscope rank";
    this.item.command = RankCommands.pick;
    this.command = vscode.commands.registerCommand(RankCommands.pick, () => this.choose());
    current = this;
  }

  /** Every rank of pid's launch at once; shows the heaviest. */
  async takeJob(pid: number, label?: string): Promise<RankPick> {
    const pick = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `vramscope: taking a snapshot of every rank of pid ${pid}'s job…` },
      () => this.ctx.exec(Server.takeJobSnapshot, { pid, label }),
    );
    this.show(pick);
    const ranks = pick.ranks || [];
    const r = ranks.find((x) => x.rank === pick.max_rank);
    const msg = `vramscope: ${ranks.length} ranks of ${pick.job}, ${pick.skew_ms.toFixed(1)} ms apart; imbalance ×${pick.imbalance.toFixed(2)}` +
      (r ? `, showing rank ${r.rank} (${formatBytes(r.peak_bytes)})` : "") + (pick.failed ? `; ${pick.failed} failed` : "");
    this.ctx.output.appendLine(msg);
    void vscode.window.showInformationMessage(msg, "Pick Rank").then((go) => {
      if (go) void vscode.commands.executeCommand(RankCommands.pick);
    });
    return pick;
  }

  /** The quick pick: the chosen rank's snapshot becomes the one shown. */
  async choose(): Promise<number | undefined> {
    if (!this.pick) {
      void vscode.window.showInformationMessage("vramscope: no group of ranks yet (Take Snapshot → whole job).");
      return undefined;
    }
    const fresh = await this.ctx.exec(Server.ranks, { group: this.pick.group });
    const chosen = await vscode.window.showQuickPick(rankItems(fresh), {
      title: `vramscope: ranks of ${fresh.job} (imbalance ×${fresh.imbalance.toFixed(2)})`,
      placeHolder: "the rank whose snapshot the hints and the flame graph show",
      matchOnDescription: true,
    });
    if (!chosen) return undefined;
    await this.ctx.exec(Server.openSnapshot, { path: chosen.rank.path });
    this.show({ ...fresh, shown: chosen.rank.rank });
    return chosen.rank.rank;
  }

  private show(pick: RankPick): void {
    this.pick = pick;
    this.item.text = rankStatus(pick);
    this.item.tooltip = `vramscope: ${pick.group} (${pick.job}); click to pick the rank shown`;
    this.item.show();
  }

  dispose(): void {
    if (current === this) current = undefined;
    this.command.dispose();
    this.item.dispose();
  }
}
