// treeid.ts: whether two flame trees from the language server show the same
// snapshot the same way. The status bar learns which snapshot the server
// shows by polling, so it can report one the flame graph already draws (the
// graph was opened while the server was still reading it); redrawing then
// would throw away the user's zoom, moment and selection.

type Tree = { title?: unknown; weight?: unknown; unit?: unknown; root?: { v?: unknown; k?: unknown; c?: unknown[] } };

/** treeKey is what tells two trees apart: the snapshot's name, the weight, and the root's bytes, allocations and children. */
export function treeKey(tree: unknown): string {
  const t = (tree || {}) as Tree;
  const r = t.root || {};
  return JSON.stringify([t.title, t.weight, t.unit, r.v, r.k, Array.isArray(r.c) ? r.c.length : 0]);
}

/** sameTree says whether b would draw what a draws. */
export function sameTree(a: unknown, b: unknown): boolean {
  return a !== undefined && b !== undefined && treeKey(a) === treeKey(b);
}
