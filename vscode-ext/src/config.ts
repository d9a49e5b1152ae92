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
   * The server binary: vramscope.path, else the one bundled in the .vsix when
   * it was built for this platform (bin/target names it: a .vsix per target,
   * `vsce package --target`), else vramscope on PATH.
   */
  serverCommand(extensionPath: string): string {
    if (this.path) return expandHome(this.path);
    const bundled = path.join(extensionPath, "bin", process.platform === "win32" ? "vramscope.exe" : "vramscope");
    if (fs.existsSync(bundled) && bundledTarget(extensionPath) === `${process.platform}-${process.arch}`) return bundled;
    return "vramscope";
  }

  /**
   * Why no server can start, or undefined when one may: the .vsix carries
   * none for this platform and `vramscope` is not on PATH.
   */
  missingServer(extensionPath: string): string | undefined {
    if (this.path || this.serverCommand(extensionPath) !== "vramscope" || onPath("vramscope")) return undefined;
    const here = `${process.platform}-${process.arch}`;
    const carried = bundledTarget(extensionPath);
    return (
      `vramscope: no language server. This extension carries ${carried ? `the engine for ${carried}, not ${here}` : "no engine"}, ` +
      "and `vramscope` is not on PATH. Install the .vsix for your platform, or the engine " +
      "(a platform wheel that `make dist` builds, or `go install ./cmd/vramscope` in a checkout of vramscope: no release is published yet), " +
      "or set vramscope.path to the binary."
    );
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

/** The platform the bundled engine was built for (bin/target, "linux-x64" when absent). */
function bundledTarget(extensionPath: string): string | undefined {
  const bin = path.join(extensionPath, "bin");
  if (!fs.existsSync(path.join(bin, "vramscope"))) return undefined;
  try {
    return fs.readFileSync(path.join(bin, "target"), "utf8").trim();
  } catch {
    return "linux-x64";
  }
}

function onPath(name: string): boolean {
  return (process.env.PATH || "").split(path.delimiter).some((dir) => {
    if (!dir) return false;
    try {
      fs.accessSync(path.join(dir, name), fs.constants.X_OK);
      return fs.statSync(path.join(dir, name)).isFile();
    } catch {
      return false;
    }
  });
}

function expandHome(p: string): string {
  if (p === "~" || p.startsWith("~/")) return path.join(process.env.HOME || "", p.slice(1));
  return p;
}
