// rankpick.ts: what the rank picker shows, from the server's answer
// (lsp.RankPick) and the daemon's process list; no vscode here, so the
// test runs it in node as it is.
import type { Process } from "./api";
import type { RankItem, RankPick } from "./commands_gen";
import { basename, formatBytes } from "./format";

export type { RankItem, RankPick };

/** The attached processes of p's launch (p included), by rank; [p] when it has no job. */
export function jobOf(procs: Process[], p: Process): Process[] {
  if (!p.job) return [p];
  return procs.filter((q) => q.agent && q.job === p.job).sort((a, b) => a.rank - b.rank);
}

/** The quick pick's items: one per rank, the shown one marked, outliers flagged. */
export function rankItems(pick: RankPick): { label: string; description: string; detail: string; rank: RankItem }[] {
  return (pick.ranks || []).map((r) => ({
    label: `${r.rank === pick.shown ? "$(eye) " : ""}rank ${r.rank}${r.rank === pick.max_rank ? " (heaviest)" : ""}`,
    description: `${formatBytes(r.peak_bytes)} · ×${r.peak_vs_median.toFixed(2)} of the median${r.outlier ? " · outlier" : ""}`,
    detail: [r.top_line ? `top line ${r.top_line}` : "", `GPU ${r.device}`, basename(r.path)].filter(Boolean).join(" · "),
    rank: r,
  }));
}

/** The status bar's text for the rank shown. */
export function rankStatus(pick: RankPick): string {
  const ranks = pick.ranks || [];
  const n = ranks.length;
  const r = ranks.find((x) => x.rank === pick.shown);
  if (!r) return `$(layers) ${n} ranks`;
  return `$(layers) rank ${r.rank} of ${n} · ×${r.peak_vs_median.toFixed(2)}${r.outlier ? " $(warning)" : ""}`;
}
