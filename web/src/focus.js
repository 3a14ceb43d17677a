// focus.js - search and focus over nested stack nodes ({sig, count, duration, self, children}):
//   matchShare   the share of samples a search covers (a sample counts once even when several
//                frames of its stack match: only the outermost matching frames add up)
//   calleesOf    what a function calls: its outermost occurrences' subtrees merged into one tree
//   callersOf    who calls it: the inverted ("called by") tree, the function at the root and each
//                level one caller further out, weighted by the function's own samples
import { frameLabel } from './frames.js';

// A predicate for a search text: case-insensitive substring of the readable label or of the
// full signature.
export function matcher(term) {
  const t = String(term || '').trim().toLowerCase();
  if (!t) return null;
  return (sig) => String(sig).toLowerCase().includes(t) || frameLabel(sig).toLowerCase().includes(t);
}

export function totalOf(roots) {
  return roots.reduce((a, n) => a + n.count, 0);
}

// -> {hits, total, frames}: hits = weight of the outermost matching frames, frames = how many
// frames match anywhere.
export function matchShare(roots, pred) {
  let hits = 0;
  let frames = 0;
  const walk = (n, inside) => {
    const m = pred(n.sig);
    if (m) frames++;
    if (m && !inside) hits += n.count;
    for (const c of n.children) walk(c, inside || m);
  };
  for (const r of roots) walk(r, false);
  return { hits, total: totalOf(roots), frames };
}

export function sharePct(part, total) {
  if (!total) return '0 %';
  const p = (100 * part) / total;
  return (p >= 10 || p === 0 ? p.toFixed(0) : p.toFixed(1)) + ' %';
}

function mergeInto(list, index, n) {
  let m = index.get(n.sig);
  if (!m) {
    m = { sig: n.sig, count: 0, duration: 0, self: 0, children: [], _index: new Map() };
    index.set(n.sig, m);
    list.push(m);
  }
  m.count += n.count;
  m.duration += n.duration;
  m.self += n.self;
  for (const c of n.children) mergeInto(m.children, m._index, c);
  return m;
}

function stripIndex(list) {
  for (const n of list) {
    delete n._index;
    stripIndex(n.children);
  }
  return list;
}

// Outermost nodes whose sig equals `sig` (a recursive function counts once per stack).
function occurrences(roots, sig) {
  const out = [];
  const walk = (n, path) => {
    if (n.sig === sig) {
      out.push({ node: n, path: path.slice() });
      return;
    }
    path.push(n);
    for (const c of n.children) walk(c, path);
    path.pop();
  };
  for (const r of roots) walk(r, []);
  return out;
}

// -> [root] (empty when sig is absent): one node for the function, its callees merged below.
export function calleesOf(roots, sig) {
  const out = [];
  const index = new Map();
  for (const { node } of occurrences(roots, sig)) mergeInto(out, index, node);
  return stripIndex(out);
}

// -> [root] (empty when sig is absent): the function, then its callers, their callers...
// Every level is weighted by the function's samples under that call path (count and duration
// of the occurrence); self at a level = the weight of the paths that end there (no further caller).
export function callersOf(roots, sig) {
  const occ = occurrences(roots, sig);
  if (!occ.length) return [];
  const top = { sig, count: 0, duration: 0, self: 0, children: [], _index: new Map() };
  for (const { node, path } of occ) {
    top.count += node.count;
    top.duration += node.duration;
    let cur = top;
    if (!path.length) top.self += node.duration;
    for (let i = path.length - 1; i >= 0; i--) {
      const p = path[i];
      let m = cur._index.get(p.sig);
      if (!m) {
        m = { sig: p.sig, count: 0, duration: 0, self: 0, children: [], _index: new Map() };
        cur._index.set(p.sig, m);
        cur.children.push(m);
      }
      m.count += node.count;
      m.duration += node.duration;
      if (i === 0) m.self += node.duration;
      cur = m;
    }
  }
  return stripIndex([top]);
}
