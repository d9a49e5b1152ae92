// webfiles.ts reads media/files.json: profiler/flame/web/files.json, the one
// list of the shared front-end core's files in load order, copied beside them
// by scripts/assets.mjs. The webviews load what it lists, as the CLI's page
// inlines it, so a new file of the core is added in that list only.
import * as fs from "node:fs";
import * as vscode from "vscode";
import { escapeHtml } from "./format";

/** One entry of files.json; part is "flame", "page" or "report". */
export interface WebFile {
  file: string;
  global?: string;
  part: string;
}

/** files.json: the core's scripts and styles in load order. */
export interface WebFiles {
  scripts: WebFile[];
  styles: WebFile[];
}

/** webFiles reads media/files.json. */
export function webFiles(media: vscode.Uri): WebFiles {
  const text = fs.readFileSync(vscode.Uri.joinPath(media, "files.json").fsPath, "utf8");
  return JSON.parse(text) as WebFiles;
}

/** styleTags are <link> elements of the core's styles, in order. */
export function styleTags(styles: WebFile[], uri: (f: string) => string): string {
  return styles.map((s) => `<link rel="stylesheet" href="${escapeHtml(uri(s.file))}">\n`).join("");
}

/** scriptTags are <script> elements (with the page's nonce) of the core's scripts, in order. */
export function scriptTags(scripts: WebFile[], nonce: string, uri: (f: string) => string): string {
  return scripts.map((s) => `<script nonce="${nonce}" src="${escapeHtml(uri(s.file))}"></script>\n`).join("");
}
