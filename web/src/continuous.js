// continuous.js - the Continuous profiling page (#/continuous[/SERVICE]): a service's policy
// editor with validation beside each field (OAP's rules and texts, as skyprofd checks them),
// the live values of each server-side check as a small chart with its threshold, the trigger
// timeline with links to the tasks the triggers created. The pure parts (validation, chart
// geometry, cause text) are exported for the node tests (tests/ui/logic.test.mjs).
import { h, fill, fmtTime } from './dom.js';
import { ApiError, getToken } from './api.js';

export const TARGETS = ['TRACE', 'PPROF_CPU', 'PPROF_WALL', 'ON_CPU', 'OFF_CPU', 'NETWORK'];
export const TYPES = ['ENDPOINT_AVG_RESPONSE_TIME', 'ENDPOINT_P90_RESPONSE_TIME',
  'ENDPOINT_P99_RESPONSE_TIME', 'ENDPOINT_ERROR_RATE', 'PROCESS_CPU', 'PROCESS_THREAD_COUNT',
  'SYSTEM_LOAD', 'HTTP_ERROR_RATE', 'HTTP_AVG_RESPONSE_TIME'];
const URI_TYPES = new Set(['HTTP_ERROR_RATE', 'HTTP_AVG_RESPONSE_TIME', 'ENDPOINT_AVG_RESPONSE_TIME',
  'ENDPOINT_P90_RESPONSE_TIME', 'ENDPOINT_P99_RESPONSE_TIME', 'ENDPOINT_ERROR_RATE']);
const PERCENT = { PROCESS_CPU: 'the process CPU percent should in [0-100]',
  HTTP_ERROR_RATE: 'the HTTP error rate should in [0-100]',
  ENDPOINT_ERROR_RATE: 'the endpoint error rate should in [0-100]' };
const NON_NEG = { PROCESS_THREAD_COUNT: 'the process thread count must bigger than zero',
  SYSTEM_LOAD: 'the system load must bigger than zero',
  HTTP_AVG_RESPONSE_TIME: 'the HTTP average response time must bigger than zero' };
const PERIOD_MAX = 600;

export function unitOf(type) {
  if (/ERROR_RATE$|^PROCESS_CPU$/.test(type)) return '%';
  if (/RESPONSE_TIME$/.test(type)) return 'ms';
  return '';
}

// The first rule an item breaks, as {field, msg} with skyprofd's text, or null. Fields:
// threshold, period, count, uris. `item` = {type, threshold (string), period, count, uris}
// where uris is the text box: names separated by commas, or ~REGEX.
export function itemError(item) {
  const period = Number(item.period);
  const count = Number(item.count);
  if (!Number.isInteger(period) || period <= 0) return { field: 'period', msg: 'period must be bigger than zero' };
  if (!Number.isInteger(count) || count <= 0) return { field: 'count', msg: 'count must bigger than zero' };
  if (count > period) return { field: 'count', msg: 'count must be equal to or smaller than period' };
  const t = String(item.threshold ?? '').trim();
  const v = t === '' ? NaN : Number(t);
  if (!Number.isFinite(v)) return { field: 'threshold', msg: 'parsing threshold error' };
  if (PERCENT[item.type] && (v < 0 || v > 100)) return { field: 'threshold', msg: PERCENT[item.type] };
  if (v < 0) return { field: 'threshold', msg: NON_NEG[item.type] || 'the endpoint response time must bigger than zero' };
  if (period > PERIOD_MAX) return { field: 'period', msg: `period must be at most ${PERIOD_MAX} seconds` };
  const uris = String(item.uris || '').trim();
  if (uris && !URI_TYPES.has(item.type)) return { field: 'uris', msg: 'uriList and uriRegex apply to HTTP and ENDPOINT items only' };
  return null;
}

// Policy-level rules (duplicates, durations) as {row, field, msg} or {field, msg}, or null.
export function policyError(rows, durations) {
  const seenT = new Map();
  for (let i = 0; i < rows.length; i++) {
    const key = rows[i].target + ' ' + rows[i].type;
    if (seenT.has(key)) return { row: i, field: 'type', msg: `contains multiple same monitor type ${rows[i].type} in ${rows[i].target}` };
    seenT.set(key, i);
  }
  const ex = Number(durations.executeDuration);
  if (!Number.isInteger(ex) || ex < 1 || ex > 900) return { field: 'executeDuration', msg: 'executeDuration must be in [1-900] seconds' };
  const si = Number(durations.silenceDuration);
  if (!Number.isInteger(si) || si < 0 || si > 86400) return { field: 'silenceDuration', msg: 'silenceDuration must be in [0-86400] seconds' };
  const mx = Number(durations.maxTriggersPerHour);
  if (!Number.isInteger(mx) || mx < 1 || mx > 3600) return { field: 'maxTriggersPerHour', msg: 'maxTriggersPerHour must be in [1-3600]' };
  return null;
}

// Editor rows -> SkyWalking's input shape (targets grouped, in the order first seen).
export function toPolicy(rows, durations) {
  const targets = [];
  for (const r of rows) {
    let t = targets.find((x) => x.targetType === r.target);
    if (!t) targets.push(t = { targetType: r.target, checkItems: [] });
    const it = { type: r.type, threshold: String(r.threshold).trim(), period: Number(r.period), count: Number(r.count) };
    const u = String(r.uris || '').trim();
    if (u.startsWith('~')) it.uriRegex = u.slice(1);
    else if (u) it.uriList = u.split(',').map((s) => s.trim()).filter(Boolean);
    t.checkItems.push(it);
  }
  return { targets, executeDuration: Number(durations.executeDuration),
    silenceDuration: Number(durations.silenceDuration), maxTriggersPerHour: Number(durations.maxTriggersPerHour) };
}

// A stored policy (GET answer) -> editor rows.
export function fromPolicy(p) {
  const rows = [];
  for (const t of p.targets || []) {
    for (const it of t.checkItems || []) {
      rows.push({ target: t.targetType, type: it.type, threshold: it.threshold, period: it.period, count: it.count,
        uris: it.uriRegex ? '~' + it.uriRegex : (it.uriList || []).join(', ') });
    }
  }
  return rows;
}

// Chart geometry of one series in a w x h box: the value polyline (gaps where a slot had no
// request), the threshold's y, and the slots at or above the threshold. Pure.
export function chartGeometry(values, threshold, w, h, pad = 2) {
  const vals = (values || []).map((x) => (x === null || x === undefined || !Number.isFinite(Number(x)) ? null : Number(x)));
  const present = vals.filter((x) => x !== null);
  const max = Math.max(threshold * 1.25, ...present, 1e-9);
  const step = vals.length > 1 ? (w - 2 * pad) / (vals.length - 1) : 0;
  const y = (v) => pad + (h - 2 * pad) * (1 - v / max);
  let path = '';
  let pen = false;
  const hits = [];
  vals.forEach((v, i) => {
    if (v === null) { pen = false; return; }
    const px = (pad + i * step).toFixed(1);
    path += (pen ? ' L' : (path ? ' M' : 'M')) + px + ',' + y(v).toFixed(1);
    pen = true;
    if (v >= threshold) hits.push(i);
  });
  return { path, thresholdY: y(threshold), hits, x: (i) => pad + i * step, y };
}

async function call(method, path, body) {
  const headers = { Accept: 'application/json' };
  const token = getToken();
  if (token) headers.Authorization = 'Bearer ' + token;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!res.ok) throw new ApiError(((data && (data.errorReason || data.error)) || text) + ' (HTTP ' + res.status + ')', res.status, data);
  return data;
}

const enc = encodeURIComponent;
const SVG = 'http://www.w3.org/2000/svg';

function svg(tag, attrs, ...kids) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const k of kids) e.append(k);
  return e;
}

function chart(series) {
  const W = 260;
  const H = 56;
  const g = chartGeometry(series.values, series.threshold, W, H);
  const box = svg('svg', { width: W, height: H, class: 'cont-chart', viewBox: `0 0 ${W} ${H}` },
    svg('line', { x1: 0, x2: W, y1: g.thresholdY, y2: g.thresholdY, class: 'threshold' }),
    svg('path', { d: g.path, class: 'values' }));
  for (const i of g.hits) box.append(svg('circle', { cx: g.x(i), cy: g.y(series.values[i]), r: 2.5, class: 'hit' }));
  const unit = unitOf(series.type);
  const last = [...series.values].reverse().find((v) => v !== null && v !== undefined);
  return h('div', { class: 'cont-series', dataset: { type: series.type, uri: series.uri, hits: String(g.hits.length) } },
    h('div', { class: 'cont-series-head' }, h('b', null, series.target), ' · ', series.type, ' of ', h('code', null, series.uri)),
    box,
    h('div', { class: 'muted' }, `≥ ${series.threshold} ${unit} in ${series.count} of ${series.period} slots · `,
      `${g.hits.length} now · last ${last === undefined ? '-' : Math.round(last * 10) / 10 + ' ' + unit}`));
}

function taskLink(t) {
  if (!t.taskId) return h('span', { class: 'muted' }, t.note || 'no task');
  if (t.taskKind === 'trace') return h('a', { href: '#/tasks/' + enc(t.taskId), class: 'task-link' }, 'trace task ' + t.taskId);
  if (t.taskKind === 'pprof') return h('a', { href: '#/process/pprof/' + enc(t.taskId), class: 'task-link' }, 'pprof task ' + t.taskId);
  if (t.taskKind === 'ebpf') {
    return h('a', { href: '#/process/ebpf/' + enc(t.taskId), class: 'task-link' }, `eBPF ${t.target || ''} profile ${t.taskId}`);
  }
  return h('span', null, `${t.taskKind} task ${t.taskId}`);
}

function timeline(triggers) {
  if (!triggers.length) return h('p', { class: 'muted' }, 'No trigger yet.');
  return h('ol', { class: 'cont-timeline' }, triggers.map((t) => h('li', { class: 'cont-trigger', dataset: { id: String(t.id) } },
    h('span', { class: 'when' }, fmtTime(t.time)), ' ', h('b', null, t.target), ' ',
    h('span', { class: 'src muted' }, t.source === 'agent' ? `(agent ${t.instance || ''} ${t.process || ''})` : '(skyprofd)'), ' ',
    h('span', { class: 'text' }, t.text || '(no cause)'), ' → ', taskLink(t),
    (t.causes || []).slice(1).map((c) => h('div', { class: 'muted also' }, 'also ' + c.text)))));
}

const DEFAULT_ROW = { target: 'TRACE', type: 'ENDPOINT_AVG_RESPONSE_TIME', threshold: '200', period: 10, count: 3, uris: '' };

function select(options, value, cls) {
  return h('select', { class: cls }, options.map((o) => h('option', { value: o, selected: o === value }, o)));
}

function editor(service, initial, onSaved) {
  let rows = initial.rows.map((r) => ({ ...r }));
  const durations = { ...initial.durations };
  const body = h('tbody');
  const formError = h('p', { class: 'form-error', role: 'alert' });
  const saveBtn = h('button', { type: 'submit', class: 'save-policy' }, 'Save policy');
  const durInputs = {};
  const durErr = {};
  const durFields = [['executeDuration', 'Execute (s)'], ['silenceDuration', 'Silence (s)'], ['maxTriggersPerHour', 'Max per hour']];

  function check() {
    let bad = false;
    body.querySelectorAll('tr').forEach((tr, i) => {
      tr.querySelectorAll('.field-error').forEach((e) => { e.textContent = ''; });
      const err = itemError(rows[i]);
      if (err) {
        tr.querySelector(`.field-error[data-for=${err.field}]`).textContent = err.msg;
        bad = true;
      }
    });
    for (const [k] of durFields) durErr[k].textContent = '';
    const pe = policyError(rows, durations);
    if (pe) {
      bad = true;
      if (pe.row !== undefined) body.querySelectorAll('tr')[pe.row].querySelector('.field-error[data-for=type]').textContent = pe.msg;
      else durErr[pe.field].textContent = pe.msg;
    }
    saveBtn.disabled = bad;
    return !bad;
  }

  function render() {
    fill(body, rows.map((r, i) => {
      const bind = (el, key) => {
        el.addEventListener('input', () => { rows[i][key] = el.value; check(); });
        el.addEventListener('change', () => { rows[i][key] = el.value; check(); });
        return el;
      };
      return h('tr', { class: 'cont-row' },
        h('td', null, bind(select(TARGETS, r.target, 'f-target'), 'target')),
        h('td', null, bind(select(TYPES, r.type, 'f-type'), 'type'), h('div', { class: 'field-error', dataset: { for: 'type' } })),
        h('td', null, bind(h('input', { class: 'f-threshold', value: r.threshold, size: 7 }), 'threshold'),
          h('div', { class: 'field-error', dataset: { for: 'threshold' } })),
        h('td', null, bind(h('input', { class: 'f-period', type: 'number', value: r.period, min: 1, style: 'width:5em' }), 'period'),
          h('div', { class: 'field-error', dataset: { for: 'period' } })),
        h('td', null, bind(h('input', { class: 'f-count', type: 'number', value: r.count, min: 1, style: 'width:5em' }), 'count'),
          h('div', { class: 'field-error', dataset: { for: 'count' } })),
        h('td', null, bind(h('input', { class: 'f-uris', value: r.uris, placeholder: '/a, /b or ~regex' }), 'uris'),
          h('div', { class: 'field-error', dataset: { for: 'uris' } })),
        h('td', null, h('button', { type: 'button', class: 'remove-row', onclick: () => { rows.splice(i, 1); render(); } }, '×')));
    }));
    check();
  }

  const durRow = h('div', { class: 'cont-durations' }, durFields.map(([k, label]) => {
    durInputs[k] = h('input', { id: 'f-' + k, type: 'number', value: durations[k], style: 'width:7em',
      oninput: (ev) => { durations[k] = ev.target.value; check(); } });
    durErr[k] = h('span', { class: 'field-error', dataset: { for: k } });
    return h('label', { class: 'field' }, label + ' ', durInputs[k], ' ', durErr[k]);
  }));

  const form = h('form', { class: 'cont-policy', onsubmit: async (ev) => {
    ev.preventDefault();
    formError.textContent = '';
    if (!check()) return;
    try {
      const saved = await call('PUT', '/api/v1/continuous/policies/' + enc(service), toPolicy(rows, durations));
      onSaved(saved);
    } catch (e) {
      formError.textContent = e.message;
    }
  } },
  h('table', { class: 'grid cont-items' },
    h('thead', null, h('tr', null, ['Target', 'Check', 'Threshold', 'Period (s)', 'Count', 'URIs', ''].map((x) => h('th', null, x)))),
    body),
  h('p', null, h('button', { type: 'button', class: 'add-row', onclick: () => { rows.push({ ...DEFAULT_ROW }); render(); } }, 'Add check')),
  durRow, formError,
  h('p', null, saveBtn, ' ', h('button', { type: 'button', class: 'delete-policy', onclick: async () => {
    formError.textContent = '';
    try {
      await call('DELETE', '/api/v1/continuous/policies/' + enc(service));
      onSaved(null);
    } catch (e) { formError.textContent = e.message; }
  } }, 'Delete policy')));
  render();
  return form;
}

// The page. ctx: {isCurrent() -> bool, addTimer(id), showError(e)}.
export async function continuousPage(app, ctx, service) {
  const policies = (await call('GET', '/api/v1/continuous/policies')).policies || [];
  if (!ctx.isCurrent()) return;
  const pick = h('input', { id: 'cont-service', placeholder: 'service name', value: service || '' });
  const left = h('section', { class: 'card' }, h('h2', null, 'Continuous profiling'),
    h('p', { class: 'muted' }, 'Policies start profiling by themselves when a check crosses its threshold.'),
    h('form', { class: 'cont-open', onsubmit: (ev) => { ev.preventDefault(); if (pick.value.trim()) location.hash = '#/continuous/' + enc(pick.value.trim()); } },
      pick, ' ', h('button', { type: 'submit' }, 'Open')),
    policies.length ? h('ul', { class: 'cont-policies' }, policies.map((p) => h('li', null,
      h('a', { href: '#/continuous/' + enc(p.service) }, p.service), ' ',
      h('span', { class: 'muted' }, (p.targets || []).map((t) => t.targetType).join(', ')))))
      : h('p', { class: 'muted' }, 'No policy yet.'));
  const right = h('div', { class: 'cont-main' });
  app.replaceChildren(h('div', { class: 'cols' }, left, right));
  if (!service) {
    right.append(h('section', { class: 'card' }, h('p', { class: 'muted' }, 'Open a service to edit its policy.')));
    return;
  }
  let current = null;
  try {
    current = await call('GET', '/api/v1/continuous/policies/' + enc(service));
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 404)) throw e;
  }
  if (!ctx.isCurrent()) return;
  const status = h('p', { class: 'muted policy-status' });
  const showStatus = (p) => fill(status, p ? ['uuid ', h('code', null, p.uuid.slice(0, 16) + '…')] : 'No policy for this service yet: add checks and save.');
  showStatus(current);
  const initial = current ? {
    rows: fromPolicy(current),
    durations: { executeDuration: current.executeDuration, silenceDuration: current.silenceDuration, maxTriggersPerHour: current.maxTriggersPerHour },
  } : { rows: [{ ...DEFAULT_ROW }], durations: { executeDuration: 600, silenceDuration: 1200, maxTriggersPerHour: 6 } };
  const valuesBox = h('div', { class: 'cont-values' });
  const quiet = h('p', { class: 'muted cont-quiet' });
  const trigBox = h('div', { class: 'cont-triggers' });
  right.append(
    h('section', { class: 'card' }, h('h2', null, 'Policy of ', h('code', null, service)), status,
      editor(service, initial, (saved) => { showStatus(saved); refresh(); })),
    h('section', { class: 'card' }, h('h2', null, 'Live values'), quiet, valuesBox),
    h('section', { class: 'card' }, h('h2', null, 'Triggers'), trigBox));

  async function refresh() {
    try {
      const [vals, trig] = await Promise.all([
        call('GET', '/api/v1/continuous/policies/' + enc(service) + '/values'),
        call('GET', '/api/v1/profile/triggers?limit=50&service=' + enc(service))]);
      if (!ctx.isCurrent()) return;
      fill(quiet, vals.quietUntil ? 'Quiet until ' + fmtTime(vals.quietUntil) + ' (task running or silence)' : 'Armed.');
      fill(valuesBox, vals.series.length ? vals.series.map(chart)
        : h('p', { class: 'muted' }, 'No endpoint check has seen a request yet (server-side checks only: ENDPOINT_*).'));
      fill(trigBox, timeline(trig.triggers || []));
    } catch (e) {
      if (ctx.isCurrent()) ctx.showError(e);
    }
  }
  await refresh();
  ctx.addTimer(setInterval(refresh, 2000));
}
