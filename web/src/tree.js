// tree.js - turns the API's flat analysis ({trees:[{elements:[{id, parentId, ...}]}]}) into
// nested nodes {sig, count, duration, self, children}, and merges per-line frames into
// per-function frames ("group by function").
import { functionOf } from './frames.js';

export function buildTrees(analysis) {
  const out = [];
  for (const t of (analysis && analysis.trees) || []) {
    const byId = new Map();
    const roots = [];
    for (const e of t.elements || []) {
      byId.set(String(e.id), {
        sig: e.codeSignature,
        count: Number(e.count) || 0,
        duration: Number(e.duration) || 0,
        self: Number(e.durationChildExcluded) || 0,
        children: [],
      });
    }
    for (const e of t.elements || []) {
      const n = byId.get(String(e.id));
      const p = String(e.parentId) === '0' ? null : byId.get(String(e.parentId));
      if (p && p !== n) p.children.push(n);
      else roots.push(n);
    }
    out.push(...roots);
  }
  return out;
}

// functionOf lives with the other signature rules in frames.js.
export { functionOf };

// Merges siblings that name the same function (after functionOf) into one node, recursively:
// "Group by function" of weight-only analyses (process profiles), where a merged node's count
// is exactly the sum of its parts' (siblings hold disjoint sets of samples). Trace analyses are
// grouped by the server instead (?granularity=functions), which computes durations on the
// function tree. Self is recomputed as duration minus the merged children's durations.
export function groupByFunction(nodes) {
  const merge = (list) => {
    const byName = new Map();
    const out = [];
    for (const n of list) {
      const name = functionOf(n.sig);
      let m = byName.get(name);
      if (!m) {
        m = { sig: name, count: 0, duration: 0, self: 0, parts: [] };
        byName.set(name, m);
        out.push(m);
      }
      m.count += n.count;
      m.duration += n.duration;
      m.parts.push(n);
    }
    for (const m of out) {
      m.children = merge(m.parts.flatMap((p) => p.children));
      delete m.parts;
      m.self = m.duration - m.children.reduce((a, c) => a + c.duration, 0);
    }
    return out;
  };
  return merge(nodes);
}

export function totalCount(nodes) {
  return nodes.reduce((a, n) => a + n.count, 0);
}

// For weight-only analyses (process profiles: pprof values, JFR weights) whose rows carry no
// durations: duration = the inclusive weight, self = weight minus the children's weights.
export function selfFromCounts(nodes) {
  for (const n of nodes) {
    selfFromCounts(n.children);
    n.duration = n.count;
    n.self = n.count - n.children.reduce((a, c) => a + c.count, 0);
  }
  return nodes;
}
