// treetable.js - the stack tree as a table (SkyWalking's "Tree Graph" view): Thread Stack
// (code signature indented by depth, with expand/collapse), Duration (ms), Self Duration (ms)
// and Dump Count. The 10 largest self durations are highlighted ("top slow").
// Rows are generated as one HTML string (fast for tens of thousands of frames) and toggles use
// event delegation; levels beyond MAX_OPEN_ROWS visible rows start collapsed.
// Frames read function first with a short location (frames.js); the full signature is the
// row's title and data-sig. opts: {columns: [duration, self, count] headers, onSelect(node)}.
// Returns the table element with .highlight(pred) (marks matching rows, opens their ancestors).
import { parseFrame } from './frames.js';

export const TOP_SLOW = 10;
export const MAX_OPEN_ROWS = 2000;

const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c]));

export function treeTable(container, trees, opts = {}) {
  const cols = opts.columns || ['Duration (ms)', 'Self Duration (ms)', 'Dump Count'];
  // Pre-order list with depth, subtree end (exclusive) for fast show/hide.
  const all = [];
  const walk = (n, depth) => {
    const i = all.length;
    all.push(n);
    n.depth = depth;
    n.children.forEach((c) => walk(c, depth + 1));
    n.end = all.length;
    n.index = i;
  };
  trees.forEach((t) => walk(t, 0));

  const perDepth = [];
  for (const n of all) perDepth[n.depth] = (perDepth[n.depth] || 0) + 1;
  let openDepth = -1;
  for (let d = 0, shown = perDepth[0] || 0; d + 1 < perDepth.length; d++) {
    shown += perDepth[d + 1] || 0;
    if (shown > MAX_OPEN_ROWS) break;
    openDepth = d;
  }
  if (all.length <= MAX_OPEN_ROWS) openDepth = perDepth.length;

  const selfs = all.map((n) => n.self).filter((s) => s > 0).sort((a, b) => b - a);
  const cut = selfs.length ? selfs[Math.min(TOP_SLOW, selfs.length) - 1] : Infinity;

  let html = '';
  for (const n of all) {
    n.open = n.depth <= openDepth;
    const hidden = n.depth > openDepth + 1;
    const tog = n.children.length ? (n.open ? '▾' : '▸') : '';
    html += `<tr class="node${n.self >= cut ? ' top-slow' : ''}" data-i="${n.index}" data-depth="${n.depth}"${hidden ? ' hidden' : ''}>` +
      `<td class="sig" style="padding-left:${6 + n.depth * 16}px"><span class="toggle"${n.children.length ? ' role="button"' : ''}>${tog}</span>` +
      `<span class="code" title="${esc(n.sig)}" data-sig="${esc(n.sig)}">${label(n.sig)}</span></td>` +
      `<td class="num">${n.duration}</td><td class="num">${n.self}</td><td class="num">${n.count}</td></tr>`;
  }

  const tools = document.createElement('div');
  tools.className = 'tree-tools';
  tools.innerHTML = '<button type="button" data-act="expand">Expand all</button> ' +
    '<button type="button" data-act="collapse">Collapse all</button> ' +
    `<span class="legend"><span class="swatch top-slow"></span> ${TOP_SLOW} largest self durations</span>`;
  const table = document.createElement('table');
  table.className = 'stack-tree';
  table.innerHTML = '<colgroup><col class="c-sig"><col class="c-num"><col class="c-num"><col class="c-num"></colgroup>' +
    `<thead><tr><th class="sig">${esc(opts.title || 'Thread Stack')}</th><th>${esc(cols[0])}</th>` +
    `<th>${esc(cols[1])}</th><th>${esc(cols[2])}</th></tr></thead><tbody>` + html + '</tbody>';
  container.innerHTML = '';
  container.append(tools, table);
  const rows = table.tBodies[0].rows;

  // Shows the children of every open node in [from, to) whose ancestors are open, hides the rest.
  function refresh(n) {
    const stack = [];
    for (let i = n.index + 1; i < n.end; i++) {
      const c = all[i];
      while (stack.length && stack[stack.length - 1].end <= i) stack.pop();
      const parent = stack.length ? stack[stack.length - 1] : n;
      const visible = parent.open && (stack.length === 0 || !rows[parent.index].hidden);
      rows[i].hidden = !visible;
      if (c.children.length) stack.push(c);
    }
  }
  function setOpen(n, open) {
    n.open = open;
    if (n.children.length) rows[n.index].querySelector('.toggle').textContent = open ? '▾' : '▸';
    if (!rows[n.index].hidden) refresh(n);
  }
  table.tBodies[0].addEventListener('click', (ev) => {
    const t = ev.target.closest('.toggle');
    if (!t) {
      const code = ev.target.closest('.code');
      if (code && opts.onSelect) opts.onSelect(all[Number(code.closest('tr').dataset.i)]);
      return;
    }
    const n = all[Number(t.closest('tr').dataset.i)];
    if (n.children.length) setOpen(n, !n.open);
  });
  tools.addEventListener('click', (ev) => {
    const act = ev.target.dataset && ev.target.dataset.act;
    if (!act) return;
    const open = act === 'expand';
    for (const n of all) {
      n.open = open;
      if (n.children.length) rows[n.index].querySelector('.toggle').textContent = open ? '▾' : '▸';
      rows[n.index].hidden = !open && n.depth > 0;
    }
  });
  // Marks the rows whose frame matches pred (null clears) and shows the first 200 of them.
  table.highlight = (pred) => {
    let shown = 0;
    const stack = [];
    for (const n of all) {
      while (stack.length && stack[stack.length - 1].end <= n.index) stack.pop();
      const m = !!pred && pred(n.sig);
      rows[n.index].classList.toggle('match', m);
      if (m && shown < 200) {
        shown++;
        for (const a of stack) if (!a.open) setOpen(a, true);
      }
      stack.push(n);
    }
  };
  return table;
}

function label(sig) {
  const f = parseFrame(sig);
  return `<span class="fn">${esc(f.func)}</span>` + (f.loc ? ` <span class="loc">${esc(f.loc)}</span>` : '') +
    (f.agent ? ' <span class="agent-tag" title="skyprof instrumentation">agent</span>' : '');
}
