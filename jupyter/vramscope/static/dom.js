// DOM helper shared by the widget modules (esm() puts it before widget.js
// and live.js): an element of tag and class, appended to parent, with text.
function h(tag, cls, parent, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}

