// Boots flame.js (VramscopeFlame, the CLI page's renderer) inside the VS Code
// webview: the extension posts the tree; a click on a frame posts its file
// and line back so the extension opens it. With the report's data (the whole
// graph), report.js draws the linked report around it, as on the CLI page:
// timeline, moments, top lines, findings. window.vramscope is the
// controller, as on the CLI page (tests drive it).
(function () {
  "use strict";
  const vscode = acquireVsCodeApi();
  const F = window.VramscopeFlame;
  const container = document.getElementById("vramscope-flame");
  const title = document.getElementById("vs-title");
  const facts = document.getElementById("vs-facts");
  let view = null;

  function show(tree, report) {
    if (view) view.destroy();
    view = null;
    container.textContent = "";
    const root = tree && tree.root ? tree.root : tree;
    title.textContent = (tree && tree.title) || "GPU memory";
    facts.textContent =
      "weight: " + ((tree && tree.weight) || "peak") +
      " · total: " + F.formatBytes(root ? root.v : 0) +
      " · " + F.formatCount(F.countNodes(tree)) + " frames" +
      " · click a frame to zoom and open its line (or arrows and Enter), Esc to reset";
    const open = function (frame) {
      vscode.postMessage({ type: "open", file: frame.file, line: frame.line, name: frame.name });
    };
    view = report && report.device && window.VramscopeReport
      ? window.VramscopeReport.render(container, tree, report, { flameOptions: { onFrameClick: open }, onFrameClick: open, openAtOOM: true })
      : F.render(container, tree, { onFrameClick: open });
    window.vramscope = view;
  }

  window.addEventListener("message", function (e) {
    const m = e.data;
    if (!m || typeof m !== "object") return;
    if (m.type === "tree") {
      try {
        show(m.tree, m.report);
      } catch (err) {
        container.textContent = "";
        const div = document.createElement("div");
        div.className = "vs-error";
        div.textContent = "vramscope: cannot draw the flame graph: " + (err && err.message ? err.message : err);
        container.appendChild(div);
      }
    }
  });
  vscode.postMessage({ type: "ready" });
})();
