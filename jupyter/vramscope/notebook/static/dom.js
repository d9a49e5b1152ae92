// DOM helper shared by the widget modules (esm() puts it before widget.js
// and live.js): an element of tag and class, appended to parent, with text
// (view.js's, which every view of the core uses).
const h = VramscopeView.el;


// The widget's static copy (vramscope.notebook._html.page: a display output of its own,
// for exporters and static viewers) stays hidden while a view of the widget
// is rendered, so a live notebook shows the report once. A style rule keyed
// by the model's static_key rather than a change to the copy's element: it
// also covers a copy rendered after the view (re-rendered outputs, another
// display of the same widget), and it goes with the last view, so the copy
// comes back when no view is left. `:has` hides the copy's whole output
// (JupyterLab/Notebook 7, classic) instead of leaving an empty gap.
const staticRules = new Map(); // key -> {views, style}

function hideStaticCopy(el, key) {
  if (!/^[0-9a-f]{8,64}$/.test(key || "")) return () => {};
  const doc = el.ownerDocument || document;
  let rule = staticRules.get(key);
  if (!rule) {
    const sel = ".vs-static-" + key;
    const style = doc.createElement("style");
    style.dataset.vramscopeStatic = key;
    style.textContent = sel + " { display: none !important; }\n" +
      ".jp-OutputArea-child:has(" + sel + "), .output_area:has(" + sel + ") { display: none !important; }";
    doc.head.appendChild(style);
    rule = { views: 0, style: style };
    staticRules.set(key, rule);
  }
  rule.views++;
  let done = false;
  return () => {
    if (done) return;
    done = true;
    if (--rule.views === 0) {
      rule.style.remove();
      staticRules.delete(key);
    }
  };
}
