// analysis.js - one analysis shown as stack tree + flame graph, the view every profile page uses
// (trace-profiling tasks and segments, process profiles). Around the two views:
//   - "Group by function" (merges a function's lines) and "Hide agent frames" (on by default:
//     skyprof's instrumentation frames folded into their caller, frames.js) switches; trace
//     analyses (opts.fetchByFunction) ask the server for the tree built on functions, whose
//     durations are computed on that tree; weight-only analyses merge client-side (exact);
//   - a search box that highlights matching frames in both views and reports their share
//     ("do_POST: 89 % of samples");
//   - a details pane for the selected frame (click a tree label or a flame box): its readable
//     label, full signature, weight and share, and "Focus" which shows its callers (inverted,
//     "called by") and its callees;
//   - deep links: the hash's query keeps q (search), focus (a signature), group=1, agent=0;
//   - keyboard: "/" search, Esc clear search and focus, g group by function, a agent frames,
//     f focus the selected frame, r reset the flame graph's zoom.
import { h, fill } from './dom.js';
import { buildTrees as buildRaw, groupByFunction, selfFromCounts } from './tree.js';
import { treeTable } from './treetable.js';
import { flameGraph } from './flame.js';
import { foldAgentFrames, hasAgentFrames, parseFrame, frameLabel } from './frames.js';
import { matcher, matchShare, sharePct, totalOf, calleesOf, callersOf } from './focus.js';

function hashParams() {
  const raw = location.hash;
  const i = raw.indexOf('?');
  return { path: i >= 0 ? raw.slice(0, i) : raw, params: new URLSearchParams(i >= 0 ? raw.slice(i + 1) : '') };
}

// Updates keys of the hash's query without a navigation (null or '' removes a key).
export function setHashParams(upd) {
  const { path, params } = hashParams();
  for (const [k, v] of Object.entries(upd)) {
    if (v === null || v === undefined || v === '') params.delete(k);
    else params.set(k, String(v));
  }
  const q = params.toString();
  history.replaceState(null, '', (path || '#/') + (q ? '?' + q : ''));
}

// opts: {weightOnly: rows carry weights only (self = weight - children's), unit: weight's name ("dump count", "nanoseconds"...), columns: tree headers,
//        fetchByFunction: () => Promise of the same analysis at function granularity (trace analyses),
//        title: first column header, controls: extra elements for the toolbar,
//        prelude: elements shown above the views (labels, exports)}
// Returns {destroy()}; the caller calls it when the view goes away.
export function analysisView(card, analysis, opts = {}) {
  const buildTrees = (a) => (opts.weightOnly ? selfFromCounts(buildRaw(a)) : buildRaw(a));
  const initial = hashParams().params;
  const group = h('input', { type: 'checkbox', id: 'group-by-function', checked: initial.get('group') === '1' });
  const agent = h('input', { type: 'checkbox', id: 'hide-agent', checked: initial.get('agent') !== '0' });
  const search = h('input', { type: 'search', id: 'frame-search', placeholder: 'Search frames  ( / )', value: initial.get('q') || '' });
  const share = h('span', { class: 'search-share', id: 'search-share', 'aria-live': 'polite' });
  const details = h('div', { class: 'frame-details', id: 'frame-details', hidden: true });
  const focusBox = h('div', { class: 'focus-view', id: 'focus-view', hidden: true });
  const treeBox = h('div', { class: 'tree-box' });
  const flameBox = h('div', { class: 'flame-box' });
  const base = buildTrees(analysis);
  const anyAgent = hasAgentFrames(base);
  let trees = [];
  let table = null;
  let flame = null;
  let selected = null;
  let focused = initial.get('focus') || '';

  // The server's function-granularity analysis, fetched when first needed.
  let byFunction = null;
  const grouped = () => {
    if (!byFunction) byFunction = opts.fetchByFunction().catch((e) => { byFunction = null; throw e; });
    return byFunction;
  };
  const current = async () => {
    const serverGroups = group.checked && opts.fetchByFunction;
    let t = buildTrees(serverGroups ? await grouped() : analysis);
    if (agent.checked) t = foldAgentFrames(t);
    if (group.checked && !serverGroups) t = groupByFunction(t);
    return t;
  };

  function showSearch() {
    const term = search.value;
    const pred = matcher(term);
    if (table) table.highlight(pred);
    if (flame) flame.highlight(term);
    if (pred) {
      const s = matchShare(trees, pred);
      share.textContent = `${term.trim()}: ${sharePct(s.hits, s.total)} of samples` +
        (s.frames ? '' : ' (no frame matches)');
    } else share.textContent = '';
    setHashParams({ q: term.trim() });
  }

  function select(n) {
    selected = n;
    const f = parseFrame(n.sig);
    const total = totalOf(trees);
    fill(details,
      h('div', { class: 'card-head' }, h('h3', null, h('span', { class: 'fn' }, f.func), ' ', h('span', { class: 'loc muted' }, f.loc)),
        h('button', { type: 'button', id: 'focus-frame', onclick: () => focusOn(n.sig) }, 'Focus (f)')),
      h('dl', { class: 'kv' },
        h('dt', null, 'Signature'), h('dd', null, h('code', { class: 'full-sig' }, n.sig)),
        h('dt', null, opts.unit || 'Dump count'), h('dd', null, String(n.count)),
        h('dt', null, 'Share'), h('dd', null, sharePct(n.count, total) + ' of samples'),
        f.agent ? [h('dt', null, 'Frame'), h('dd', null, 'skyprof instrumentation')] : null));
    details.hidden = false;
  }

  function focusOn(sig) {
    focused = sig || '';
    setHashParams({ focus: focused });
    if (!focused) {
      focusBox.hidden = true;
      focusBox.replaceChildren();
      return;
    }
    const callers = callersOf(trees, focused);
    const callees = calleesOf(trees, focused);
    const total = totalOf(trees);
    const weight = callees.reduce((a, n) => a + n.count, 0);
    const callersBox = h('div', { class: 'focus-callers' });
    const calleesBox = h('div', { class: 'focus-callees' });
    fill(focusBox,
      h('div', { class: 'card-head' },
        h('h3', null, 'Focus: ', h('span', { class: 'fn' }, frameLabel(focused))),
        h('span', { class: 'muted focus-share' }, callees.length ? `${sharePct(weight, total)} of samples` : 'not in this view'),
        h('button', { type: 'button', id: 'focus-close', onclick: () => focusOn('') }, 'Close (Esc)')),
      h('div', { class: 'focus-cols' },
        h('div', null, h('h4', null, 'Called by'), callersBox),
        h('div', null, h('h4', null, 'Calls'), calleesBox)));
    focusBox.hidden = false;
    if (callers.length) treeTable(callersBox, callers, { columns: opts.columns, title: 'Caller (outward)' });
    else callersBox.append(h('p', { class: 'muted' }, 'No frame ', h('code', null, focused), ' in this view.'));
    if (callees.length) treeTable(calleesBox, callees, { columns: opts.columns, title: 'Callee' });
  }

  let renders = 0;
  let destroyed = false;
  async function render() {
    const mine = ++renders;
    let next;
    try {
      next = await current();
    } catch (e) {
      if (mine === renders) fill(treeBox, h('p', { class: 'error' }, 'Analysis by function failed: ' + e.message));
      return;
    }
    if (mine !== renders || destroyed) return; // a later switch won, or the view is gone
    if (flame) flame.destroy();
    trees = next;
    table = treeTable(treeBox, trees, { columns: opts.columns, title: opts.title, onSelect: select });
    flame = flameGraph(flameBox, trees, { search: false, unit: opts.unit, onSelect: select });
    setHashParams({ group: group.checked ? '1' : null, agent: agent.checked ? null : '0' });
    showSearch();
    if (focused) focusOn(focused);
    if (selected) {
      const again = findSig(trees, selected.sig);
      if (again) select(again); else { selected = null; details.hidden = true; }
    }
  }

  group.addEventListener('change', render);
  agent.addEventListener('change', render);
  search.addEventListener('input', showSearch);

  const onKey = (ev) => {
    if (!card.isConnected) return;
    const typing = ev.target && /^(INPUT|TEXTAREA|SELECT)$/.test(ev.target.tagName) && ev.target.type !== 'checkbox';
    if (ev.key === 'Escape') {
      if (typing) ev.target.blur();
      search.value = '';
      showSearch();
      focusOn('');
      return;
    }
    if (typing || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (ev.key === '/') { ev.preventDefault(); search.focus(); search.select(); }
    else if (ev.key === 'g') { group.checked = !group.checked; render(); }
    else if (ev.key === 'a' && anyAgent) { agent.checked = !agent.checked; render(); }
    else if (ev.key === 'f' && selected) focusOn(selected.sig);
    else if (ev.key === 'r' && flame) flame.reset();
  };
  document.addEventListener('keydown', onKey);

  const empty = !base.length;
  fill(card,
    h('div', { class: 'card-head' }, h('h2', null, opts.heading || 'Profile'),
      h('div', { class: 'switches' },
        h('label', { class: 'switch', title: 'merge the lines of a function (g)' }, group, ' Group by function'),
        h('label', { class: 'switch', title: 'fold skyprof\'s own instrumentation frames into their caller (a)' }, agent, ' Hide agent frames'))),
    opts.prelude || null,
    opts.controls ? h('div', { class: 'toolbar analysis-controls' }, opts.controls) : null,
    empty ? h('p', { class: 'muted empty-analysis' }, opts.emptyText || 'No samples.') :
      [h('div', { class: 'toolbar search-bar' }, search, share,
        h('span', { class: 'muted keys' }, 'keys: / search · Esc clear · g group · a agent frames · f focus · r reset zoom')),
      details, focusBox,
      h('h3', null, 'Stack tree'), treeBox, h('h3', null, 'Flame graph'), flameBox]);
  if (!empty) render();
  return {
    destroy() {
      destroyed = true;
      document.removeEventListener('keydown', onKey);
      if (flame) flame.destroy();
    },
  };
}

function findSig(trees, sig) {
  const stack = [...trees];
  while (stack.length) {
    const n = stack.pop();
    if (n.sig === sig) return n;
    stack.push(...n.children);
  }
  return null;
}
