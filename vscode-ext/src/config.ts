// config.ts reads the extension's settings (package.json contributes.configuration)
// and turns them into what the language server takes: command-line flags for
// the ones that shape the process (path, daemon) and the {"vramscope": {...}}
// object of initializationOptions / workspace/didChangeConfiguration for the
// rest (lsp/settings.go reads the same keys).
import * as fs from "node:fs";
import * as path from "node:path";
import * as vscode from "vscode";

export const SECTION = "vramscope";

export type DaemonMode = "auto" | "connect" | "off";

/** The keys the server reads (lsp.Settings). */
export interface ServerSettings {
  snapshot: string;
  hintThreshold: number;
  pathMap: string[];
  followNewSnapshots: boolean;
  weight: "peak" | "alloc";
}

export class Config {
  private get cfg(): vscode.WorkspaceConfiguration {
    return vscode.workspace.getConfiguration(SECTION);
  }

  get path(): string {
    return this.cfg.get<string>("path", "").trim();
  }

  get daemon(): DaemonMode {
    const d = this.cfg.get<string>("daemon", "auto");
    return d === "connect" || d === "off" ? d : "auto";
  }

  get weight(): "peak" | "alloc" {
    return this.cfg.get<string>("weight", "peak") === "alloc" ? "alloc" : "peak";
  }

  /** The server's settings, with the snapshot made absolute. */
  serverSettings(): ServerSettings {
    const c = this.cfg;
    return {
      snapshot: resolveInWorkspace(c.get<string>("snapshot", "").trim()),
      hintThreshold: c.get<number>("hintThreshold", 0.01),
      pathMap: c.get<string[]>("pathMap", []),
      followNewSnapshots: c.get<boolean>("followNewSnapshots", true),
      weight: this.weight,
    };
  }

  /** initializationOptions: {"vramscope": {...}}. */
  initializationOptions(): { vramscope: ServerSettings } {
    return { vramscope: this.serverSettings() };
  }

  /**
   * The server binary: vramscope.path, else the one bundled in the .vsix
   * (bin/vramscope, linux-x64), else vramscope on PATH.
   */
  serverCommand(extensionPath: string): string {
    if (this.path) return expandHome(this.path);
    const bundled = path.join(extensionPath, "bin", process.platform === "win32" ? "vramscope.exe" : "vramscope");
    if (process.platform === "linux" && process.arch === "x64" && fs.existsSync(bundled)) return bundled;
    return "vramscope";
  }

  serverArgs(): string[] {
    return ["lsp", "--daemon", this.daemon];
  }

  /** Whether a change needs a new server process (its flags changed). */
  static needsRestart(e: vscode.ConfigurationChangeEvent): boolean {
    return e.affectsConfiguration(`${SECTION}.path`) || e.affectsConfiguration(`${SECTION}.daemon`);
  }
}

/** The first workspace folder, where the server runs (relative paths resolve there). */
export function workspaceRoot(): string | undefined {
  const f = vscode.workspace.workspaceFolders?.[0];
  return f && f.uri.scheme === "file" ? f.uri.fsPath : undefined;
}

export function resolveInWorkspace(p: string): string {
  if (!p) return p;
  p = expandHome(p);
  if (path.isAbsolute(p)) return p;
  const root = workspaceRoot();
  return root ? path.join(root, p) : p;
}

function expandHome(p: string): string {
  if (p === "~" || p.startsWith("~/")) return path.join(process.env.HOME || "", p.slice(1));
  return p;
}
