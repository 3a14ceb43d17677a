// treetable.js - the stack tree as a table (SkyWalking's "Tree Graph" view): Thread Stack
// (code signature indented by depth, with expand/collapse), Duration (ms), Self Duration (ms)
// and Dump Count. The 10 largest self durations are highlighted ("top slow").

export const TOP_SLOW = 10;

export function treeTable(container, trees) {
  const all = [];
  const walk = (n, depth) => { all.push(n); n.depth = depth; n.children.forEach((c) => walk(c, depth + 1)); };
  trees.forEach((t) => walk(t, 0));
  const selfs = all.map((n) => n.self).filter((s) => s > 0).sort((a, b) => b - a);
  const cut = selfs.length ? selfs[Math.min(TOP_SLOW, selfs.length) - 1] : Infinity;

  const table = document.createElement('table');
  table.className = 'stack-tree';
  table.innerHTML = '<thead><tr><th class="sig">Thread Stack</th><th>Duration (ms)</th>' +
    '<th>Self Duration (ms)</th><th>Dump Count</th></tr></thead>';
  const tbody = document.createElement('tbody');
  table.appendChild(tbody);
  const tools = document.createElement('div');
  tools.className = 'tree-tools';
  tools.innerHTML = '<button type="button" data-act="expand">Expand all</button> ' +
    '<button type="button" data-act="collapse">Collapse all</button> ' +
    `<span class="legend"><span class="swatch top-slow"></span> ${TOP_SLOW} largest self durations</span>`;
  container.innerHTML = '';
  container.append(tools, table);

  const rows = new Map();
  for (const n of all) {
    const tr = document.createElement('tr');
    tr.className = 'node' + (n.self >= cut ? ' top-slow' : '');
    tr.dataset.depth = n.depth;
    const td = document.createElement('td');
    td.className = 'sig';
    td.style.paddingLeft = 6 + n.depth * 16 + 'px';
    const tog = document.createElement('span');
    tog.className = 'toggle';
    tog.textContent = n.children.length ? '▾' : '';
    const txt = document.createElement('span');
    txt.className = 'code';
    txt.textContent = n.sig;
    txt.title = n.sig;
    td.append(tog, txt);
    tr.appendChild(td);
    for (const v of [n.duration, n.self, n.count]) {
      const c = document.createElement('td');
      c.className = 'num';
      c.textContent = v;
      tr.appendChild(c);
    }
    tbody.appendChild(tr);
    rows.set(n, tr);
    n.open = true;
    if (n.children.length) {
      tog.addEventListener('click', () => { setOpen(n, !n.open); });
      tog.setAttribute('role', 'button');
    }
  }

  function showSubtree(n, visible) {
    for (const c of n.children) {
      rows.get(c).hidden = !visible;
      showSubtree(c, visible && c.open);
    }
  }
  function setOpen(n, open) {
    n.open = open;
    const tog = rows.get(n).querySelector('.toggle');
    if (n.children.length) tog.textContent = open ? '▾' : '▸';
    showSubtree(n, open && !rows.get(n).hidden);
  }
  tools.addEventListener('click', (ev) => {
    const act = ev.target.dataset && ev.target.dataset.act;
    if (!act) return;
    for (const n of all) {
      n.open = act === 'expand';
      if (n.children.length) rows.get(n).querySelector('.toggle').textContent = n.open ? '▾' : '▸';
      if (n.depth > 0) rows.get(n).hidden = act !== 'expand';
    }
  });
  return table;
}
