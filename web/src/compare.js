// compare.js - the Compare page (#/compare?base=SEL&target=SEL): pick two analyses, see one diff
// flame graph of the merged tree (POST /api/v1/profile/compare) coloured by the change of each
// frame's share (red grew, blue shrank, intensity by size) and the table of the largest changes.
// A selector is the CLI's text form, so links and `skyprof compare` read alike:
//   segment:ID[@FROM..TO]   task:ID[@FROM..TO]   pprof:ID[#SAMPLE_TYPE]   jfr:ID[#EVENT]
import { api, cmpApi } from './api.js';
import { h, fill, fmtTime } from './dom.js';
import { flameGraph } from './flame.js';

const KINDS = ['segment', 'task', 'pprof', 'jfr'];

// "KIND:ID[@FROM..TO][#TYPE]" -> the API's selector object; throws Error with a message if bad.
export function parseSelector(text) {
  let s = String(text || '').trim();
  let kind = 'segment';
  const colon = s.indexOf(':');
  if (colon > 0 && KINDS.includes(s.slice(0, colon))) {
    kind = s.slice(0, colon);
    s = s.slice(colon + 1);
  }
  let type = null;
  const hash = s.indexOf('#');
  if (hash >= 0) { type = s.slice(hash + 1); s = s.slice(0, hash); }
  let range = null;
  const at = s.indexOf('@');
  if (at >= 0) { range = s.slice(at + 1); s = s.slice(0, at); }
  if (!s) throw new Error('empty id in selector "' + text + '"');
  const trace = kind === 'segment' || kind === 'task';
  const sel = { kind, [kind === 'segment' ? 'segmentId' : 'taskId']: s };
  if (range !== null) {
    const m = /^(\d+)\.\.(\d+)$/.exec(range);
    if (!trace || !m || Number(m[1]) > Number(m[2])) throw new Error('bad time range in "' + text + '" (FROM..TO, ms)');
    sel.timeRange = { start: Number(m[1]), end: Number(m[2]) };
  }
  if (type) {
    if (trace) throw new Error('#TYPE is for pprof and jfr selectors');
    sel[kind === 'pprof' ? 'sampleType' : 'eventType'] = type;
  }
  return sel;
}

export function formatSelector(sel) {
  const id = sel.segmentId || sel.taskId;
  let s = sel.kind + ':' + id;
  if (sel.timeRange) s += '@' + sel.timeRange.start + '..' + sel.timeRange.end;
  const t = sel.sampleType || sel.eventType;
  if (t) s += '#' + t;
  return s;
}

// The merged tree as flame.js nodes: width = mean of the two shares in per mille (so both sides'
// frames are visible and children never outgrow their parent), delta = change of share. The
// answer lists parents before children with ids 1..n, so one pass over an array does it (a
// 100,000-node answer is turned into nodes without a map).
export function diffTrees(doc) {
  const list = doc.nodes || [];
  const byId = new Array(list.length + 1);
  const roots = [];
  for (const n of list) {
    // flame.js shows `count` as the weight: the mean share in per mille
    const node = { sig: n.codeSignature, count: Math.round(((n.baseShare + n.targetShare) / 2) * 1e5) / 100,
      duration: 0, self: 0, children: [], delta: n.delta };
    byId[n.id] = node;
    const p = n.parentId ? byId[n.parentId] : null;
    if (p) p.children.push(node); else roots.push(node);
  }
  return roots;
}

// Share points of change at which the colour is full.
export const FULL_AT = 0.25;

// Red (grew) / blue (shrank), saturation and darkness growing with |delta|; grey when unchanged.
export function diffColor(delta) {
  const d = Number(delta) || 0;
  const k = Math.min(1, Math.sqrt(Math.abs(d) / FULL_AT));
  if (k < 0.05) return 'hsl(220, 8%, 86%)';
  const hue = d > 0 ? 0 : 215;
  return `hsl(${hue}, ${Math.round(35 + 55 * k)}%, ${Math.round(88 - 38 * k)}%)`;
}

const pct = (x) => (100 * x).toFixed(1) + '%';
const signed = (x) => (x > 0 ? '+' : '') + (100 * x).toFixed(1) + '%';

function changesTable(doc) {
  return h('table', { class: 'grid changes' },
    h('thead', null, h('tr', null, h('th', null, 'Frame'), h('th', { class: 'num' }, 'Base'), h('th', { class: 'num' }, 'Target'),
      h('th', { class: 'num' }, 'Change'), h('th', { class: 'num' }, 'Self change'))),
    h('tbody', null, (doc.changes || []).map((c) => h('tr', { class: 'change', dataset: { sig: c.codeSignature, delta: String(c.delta) } },
      h('td', { class: 'sig', title: c.codeSignature }, c.codeSignature),
      h('td', { class: 'num', title: `${c.base} ${doc.base.unit}` }, pct(c.baseShare)),
      h('td', { class: 'num', title: `${c.target} ${doc.target.unit}` }, pct(c.targetShare)),
      h('td', { class: 'num delta', style: `background:${diffColor(c.delta)}` }, signed(c.delta)),
      h('td', { class: 'num' }, signed(c.selfDelta))))));
}

function sideLabel(s) {
  let t = `${s.kind} ${s.id}: ${s.total} ${s.unit}`;
  if (s.timeRange) t += ` (${fmtTime(s.timeRange.start)} → ${fmtTime(s.timeRange.end)})`;
  return t;
}

// One side's picker: kind, task, segment (trace kinds) and optional range or type. Fills itself
// from the API; value() returns the selector text.
function sidePicker(name, initial) {
  const kind = h('select', { id: `cmp-${name}-kind`, 'aria-label': name + ' kind' }, KINDS.map((k) => h('option', { value: k }, k)));
  const task = h('select', { id: `cmp-${name}-task`, 'aria-label': name + ' task' });
  const seg = h('select', { id: `cmp-${name}-segment`, 'aria-label': name + ' segment' });
  const extra = h('input', { id: `cmp-${name}-extra`, placeholder: 'FROM..TO (ms) or #type', size: 24, 'aria-label': name + ' range or type' });
  const text = h('input', { id: `cmp-${name}`, class: 'selector', size: 48, value: initial || '', 'aria-label': name + ' selector' });
  if (initial) { try { kind.value = parseSelector(initial).kind; } catch { /* typed text: left as is */ } }
  let auto = !initial;         // the picker fills the selector until the user or a link chose one
  const sync = (user) => {
    if (!auto && !user) return;
    if (user) auto = true;
    const k = kind.value;
    const trace = k === 'segment' || k === 'task';
    const id = k === 'segment' ? seg.value : task.value;
    if (!id) return;
    let s = k + ':' + id;
    const x = extra.value.trim();
    if (x && trace && /^\d+\.\.\d+$/.test(x)) s += '@' + x;
    if (x && !trace) s += '#' + x.replace(/^#/, '');
    text.value = s;
  };
  const loadSegs = async () => {
    seg.replaceChildren();
    seg.hidden = kind.value !== 'segment';
    if (kind.value !== 'segment' || !task.value) return;
    const groups = await api.segments(task.value).catch(() => []);
    for (const g of groups) {
      const sp = (g.spans || []).find((s) => s.profiled);
      const id = sp ? sp.segmentId : g.segmentId;
      seg.append(h('option', { value: id }, `${fmtTime(g.start)} · ${g.duration} ms · ${id}`));
    }
    sync();
  };
  const loadTasks = async () => {
    task.replaceChildren();
    const k = kind.value;
    const list = k === 'pprof' ? await cmpApi.pprofTasks().catch(() => [])
      : k === 'jfr' ? await cmpApi.asyncTasks().catch(() => []) : await api.tasks().catch(() => []);
    for (const t of list || []) {
      const label = (t.endpointName || t.events || t.event || '') + ' · ' + (t.service || t.serviceName || '') + ' · ' + fmtTime(t.startTime || t.createTime);
      task.append(h('option', { value: t.id }, label));
    }
    await loadSegs();
    sync();
  };
  kind.addEventListener('change', () => { auto = true; loadTasks(); });
  task.addEventListener('change', () => { auto = true; loadSegs(); });
  seg.addEventListener('change', () => sync(true));
  extra.addEventListener('change', () => sync(true));
  text.addEventListener('input', () => { auto = false; });
  const el = h('fieldset', { class: 'cmp-side', dataset: { side: name } },
    h('legend', null, name === 'base' ? 'Base (before)' : 'Target (after)'),
    h('div', { class: 'cmp-pick' }, kind, task, seg, extra),
    h('label', null, 'Selector ', text));
  return { el, value: () => text.value.trim(), load: loadTasks };
}

// Renders the page into `app`; `query` is the hash's URLSearchParams. `isCurrent()` says whether
// the navigation that started this render is still the current one.
export async function comparePage(app, query, isCurrent, register) {
  const base = query.get('base') || '';
  const target = query.get('target') || '';
  const pb = sidePicker('base', base);
  const pt = sidePicker('target', target);
  const gran = h('select', { id: 'cmp-granularity', 'aria-label': 'granularity' },
    h('option', { value: 'functions' }, 'by function'), h('option', { value: 'lines', selected: query.get('granularity') === 'lines' }, 'by line'));
  const go = h('button', { type: 'submit', class: 'primary', id: 'cmp-go' }, 'Compare');
  const form = h('form', { class: 'card cmp-form' }, h('h2', null, 'Compare two profiles'),
    h('p', { class: 'muted' }, 'Shares are each frame\'s weight over its own profile\'s total, so runs of different lengths compare. Red: the frame\'s share grew; blue: it shrank.'),
    pb.el, pt.el, h('div', { class: 'actions' }, gran, ' ', go));
  const result = h('section', { class: 'card cmp-result' });
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams({ base: pb.value(), target: pt.value() });
    if (gran.value === 'lines') q.set('granularity', 'lines');
    location.hash = '#/compare?' + q.toString();
  });
  app.replaceChildren(form, result);
  pb.load();
  pt.load();
  if (!base || !target) {
    result.append(h('p', { class: 'muted' }, 'Pick a base and a target (or type selectors such as segment:ID, task:ID@FROM..TO, pprof:ID#cpu, jfr:ID#alloc) and press Compare.'));
    return;
  }
  let body;
  try {
    body = { base: parseSelector(base), target: parseSelector(target), limit: 50 };
  } catch (e) {
    result.append(h('p', { class: 'error' }, e.message));
    return;
  }
  // By function unless asked otherwise: a function's lines meet, so "method3 grew" is one row.
  body.granularity = query.get('granularity') === 'lines' ? 'lines' : 'functions';
  result.append(h('p', { class: 'muted' }, 'Comparing…'));
  const doc = await cmpApi.compare(body);
  if (!isCurrent()) return;
  const flameBox = h('div', { class: 'flame-box cmp-flame' });
  fill(result,
    h('h2', null, 'Difference'),
    h('p', { class: 'cmp-sides' }, h('span', { class: 'cmp-base' }, 'Base: ' + sideLabel(doc.base)), h('br'),
      h('span', { class: 'cmp-target' }, 'Target: ' + sideLabel(doc.target))),
    h('div', { class: 'cmp-legend' }, h('span', { style: `background:${diffColor(-FULL_AT)}` }, 'shrank'),
      h('span', { style: `background:${diffColor(0)}` }, 'unchanged'), h('span', { style: `background:${diffColor(FULL_AT)}` }, 'grew'),
      h('span', { class: 'muted' }, ` full colour at ${FULL_AT * 100} points of share; widths: mean of the two shares`)),
    h('h3', null, 'Largest changes'), changesTable(doc),
    (doc.changesTotal > (doc.changes || []).length) ? h('p', { class: 'muted' }, `${doc.changes.length} of ${doc.changesTotal} frames`) : null,
    h('h3', null, 'Diff flame graph'), flameBox);
  const trees = diffTrees(doc);
  if (trees.length) register(flameGraph(flameBox, trees, {
    color: (n) => (n.delta === undefined ? diffColor(0) : diffColor(n.delta)),
    unit: 'mean share of base and target (‰)',
  }));
  else flameBox.append(h('p', { class: 'muted' }, 'Both profiles are empty.'));
}
