// ctx.ts owns the language client (`vramscope lsp` over stdio) and everything
// that must be disposed with it. The extension talks to the daemon only
// through the server: every daemon-related action is a
// workspace/executeCommand request (lsp/execute_command.go).
import * as vscode from "vscode";
import {
  ExecuteCommandRequest,
  LanguageClient,
  type LanguageClientOptions,
  type ServerOptions,
  State,
} from "vscode-languageclient/node";
import type { Commands, Requests } from "./commands_gen";
import { Config, SECTION, workspaceRoot } from "./config";

// The server's command and request names, generated from lsp/command.
export { Server, ServerRequest } from "./commands_gen";

/** A handler for a server command run from the editor (a code lens click). */
export type Interceptor = (args: unknown[]) => Promise<unknown>;

export class Ctx implements vscode.Disposable {
  readonly config = new Config();
  readonly output: vscode.OutputChannel;
  private client: LanguageClient | undefined;
  private readonly disposables: vscode.Disposable[] = [];
  private readonly clientDisposables: vscode.Disposable[] = [];
  private readonly interceptors = new Map<string, Interceptor>();
  private readonly stateEmitter = new vscode.EventEmitter<boolean>();
  /** Fires with true when the server is running, false when it stopped. */
  readonly onDidChangeRunning = this.stateEmitter.event;
  private restartPending = false;
  /** The process whose status the status bar shows (0: the only agent). */
  selectedPid = 0;
  /** Where source files open from the flame graph (the editor column it was opened beside). */
  sourceColumn: vscode.ViewColumn = vscode.ViewColumn.One;

  constructor(readonly extension: vscode.ExtensionContext) {
    this.output = vscode.window.createOutputChannel("vramscope");
    this.pushCleanup(this.output, this.stateEmitter);
    // Registered before the client exists, so it runs before the client's own
    // configuration sync: a change that restarts the server is not also sent
    // to the server being stopped (the new one reads it at initialize).
    this.pushCleanup(
      vscode.workspace.onDidChangeConfiguration(async (e) => {
        if (!Config.needsRestart(e)) return;
        this.restartPending = true;
        try {
          await this.restart();
        } finally {
          this.restartPending = false;
        }
      }),
    );
  }

  pushCleanup(...d: vscode.Disposable[]): void {
    this.disposables.push(...d);
  }

  get running(): boolean {
    return this.client?.state === State.Running;
  }

  /**
   * Server commands run through VS Code (code lenses run them by name) go to
   * an interceptor when one is registered: "flame graph from here" must open
   * the webview, "take snapshot" must pick a process first.
   */
  intercept(command: string, handler: Interceptor): void {
    this.interceptors.set(command, handler);
  }

  async start(): Promise<void> {
    if (this.client) return;
    const command = this.config.serverCommand(this.extension.extensionPath);
    const missing = this.config.missingServer(this.extension.extensionPath);
    if (missing) {
      this.output.appendLine(missing);
      void vscode.window.showErrorMessage(missing, "Open Settings").then((pick) => {
        if (pick) void vscode.commands.executeCommand("workbench.action.openSettings", "vramscope.path");
      });
      return;
    }
    const serverOptions: ServerOptions = {
      command,
      args: this.config.serverArgs(),
      options: { cwd: workspaceRoot(), env: process.env },
    };
    const clientOptions: LanguageClientOptions = {
      documentSelector: [{ scheme: "file", language: "python" }],
      synchronize: { configurationSection: SECTION },
      initializationOptions: () => this.config.initializationOptions(),
      outputChannel: this.output,
      middleware: {
        executeCommand: async (cmd, args, next) => {
          const h = this.interceptors.get(cmd);
          return h ? h(args) : next(cmd, args);
        },
        workspace: {
          didChangeConfiguration: async (sections, next) => {
            if (this.restartPending || client !== this.client || !this.running) return;
            await next(sections);
          },
        },
      },
    };
    const client = new LanguageClient("vramscope", "vramscope", serverOptions, clientOptions);
    this.client = client;
    this.clientDisposables.push(
      client.onDidChangeState((e) => this.stateEmitter.fire(e.newState === State.Running)),
    );
    this.output.appendLine(`starting ${command} ${this.config.serverArgs().join(" ")}`);
    try {
      await client.start();
    } catch (err) {
      const msg = `vramscope: the language server did not start (${command}): ${errorMessage(err)}`;
      this.output.appendLine(msg);
      void vscode.window.showErrorMessage(msg, "Open Settings").then((pick) => {
        if (pick) void vscode.commands.executeCommand("workbench.action.openSettings", "vramscope.path");
      });
    }
  }

  async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    for (const d of this.clientDisposables.splice(0)) d.dispose();
    if (client) {
      try {
        await client.stop(2000);
      } catch (err) {
        this.output.appendLine(`stopping the server: ${errorMessage(err)}`);
      }
      this.stateEmitter.fire(false);
    }
  }

  private restarting: Promise<void> = Promise.resolve();

  /** restart stops and starts the server; restarts asked for meanwhile run after it, one at a time. */
  restart(): Promise<void> {
    const next = async () => {
      await this.stop();
      await this.start();
    };
    this.restarting = this.restarting.then(next, next);
    return this.restarting;
  }

  /**
   * exec runs a server command with its one argument and returns its result,
   * both typed by lsp/command's table (commands_gen.ts); errors carry the
   * server's message.
   */
  async exec<K extends keyof Commands>(command: K, arg: Commands[K]["args"]): Promise<Commands[K]["result"]> {
    const client = this.client;
    if (!client || !this.running) throw new Error("the vramscope language server is not running");
    return (await client.sendRequest(ExecuteCommandRequest.type, { command, arguments: [arg] })) as Commands[K]["result"];
  }

  /** request sends a custom request (ServerRequest) and returns its result. */
  async request<K extends keyof Requests>(method: K, params: Requests[K]["params"]): Promise<Requests[K]["result"]> {
    const client = this.client;
    if (!client || !this.running) throw new Error("the vramscope language server is not running");
    return (await client.sendRequest(method, params)) as Requests[K]["result"];
  }

  dispose(): void {
    void this.stop();
    for (const d of this.disposables.splice(0)) d.dispose();
  }
}

export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  if (err && typeof err === "object" && "message" in err) return String((err as { message: unknown }).message);
  return String(err);
}
