// main.js - the skyprof web UI: hash routes, views and their wiring.
// Routes (deep-linkable):
//   #/                       landing: the latest task with profiled segments, its first profiled
//                            segment analysed (tree + flame graph); else the task list
//   #/services[/NAME]        services; instances of NAME
//   #/continuous[/SERVICE]   continuous profiling: policy editor, live values, triggers (continuous.js)
//   #/tasks                  task list and the create form
//   #/tasks/ID               a task: details, logs by instance, sampled segments
//   #/tasks/ID/analyze       ... and the analysis of the whole task
//   #/tasks/ID/segments/SEG[?span=SEG:SPANID&mode=include|exclude]
//                            ... a segment's spans and the analysis of the selected span
//   #/compare?base=SEL&target=SEL   two profiles compared (compare.js)
//   #/process[/pprof|async|ebpf/ID]  process profiles; agent-started eBPF profiles (procprof.js,
//                            ebpf.js)
//   analysis views also keep q, focus, group, agent in the query (analysis.js)
import './style.css';
import { api, cmpApi, ApiError, getToken, setToken, EXPORT_FORMATS, taskExportUrl, segmentExportUrl } from './api.js';
import { h, fill, fmtTime, statusBadge } from './dom.js';
import { analyzeQueries } from './ranges.js';
import { analysisView, setHashParams } from './analysis.js';
import { comparePage } from './compare.js';
import { timelineView } from './timeline.js';
import { processPage } from './procprof.js';
import { sparkPath, suggestedThreshold } from './spark.js';
import { continuousPage } from './continuous.js';

const app = document.getElementById('app');
const banner = document.getElementById('banner');
let generation = 0;          // bumps on every navigation; stale async work checks it
let timers = [];
let flames = [];
let views = [];             // other views with a destroy() (the request timeline)

function showError(err) {
  const msg = err instanceof ApiError || err instanceof Error ? err.message : String(err);
  banner.textContent = 'Error: ' + msg;
  banner.hidden = false;
}

function clearError() {
  banner.hidden = true;
  banner.textContent = '';
}

window.addEventListener('error', (ev) => showError(ev.message));
window.addEventListener('unhandledrejection', (ev) => showError(ev.reason));

function parseHash() {
  const raw = location.hash.replace(/^#\/?/, '');
  const [path, query] = raw.split('?');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  return { parts, query: new URLSearchParams(query || '') };
}

const enc = encodeURIComponent;

async function route() {
  const gen = ++generation;
  timers.forEach(clearInterval);
  timers = [];
  flames.forEach((f) => f.destroy());
  flames = [];
  views.forEach((v) => v.destroy());
  views = [];
  clearError();
  const { parts, query } = parseHash();
  document.querySelectorAll('[data-nav]').forEach((a) => a.classList.toggle('active', a.dataset.nav === (parts[0] || 'tasks')));
  try {
    if (parts.length === 0) return await landing(gen);
    if (parts[0] === 'services') return await servicesPage(gen, parts[1]);
    if (parts[0] === 'compare') return await comparePage(app, query, () => gen === generation, (f) => flames.push(f));
    if (parts[0] === 'continuous') {
      return await continuousPage(app, { isCurrent: () => gen === generation,
        addTimer: (t) => timers.push(t), showError }, parts[1]);
    }
    if (parts[0] === 'process') return await processPage(viewCtx(gen), parts[1], parts[2], query);
    if (parts[0] === 'tasks') {
      const opts = {};
      if (parts[2] === 'analyze') opts.taskAnalysis = true;
      if (parts[2] === 'segments' && parts[3]) {
        opts.segment = parts[3];
        opts.span = query.get('span');
        opts.mode = query.get('mode') === 'exclude' ? 'exclude' : 'include';
      }
      return await tasksPage(gen, parts[1], opts);
    }
    app.replaceChildren(h('p', null, 'Unknown page. ', h('a', { href: '#/tasks' }, 'Go to the task list.')));
  } catch (e) {
    if (gen !== generation) return;
    showError(e);
    if (!app.firstChild || app.textContent === 'Loading…') {
      app.replaceChildren(h('p', { class: 'muted' }, 'This view could not be loaded. ', h('a', { href: '#/tasks' }, 'Task list')));
    }
  }
}

// What a page module (procprof.js) needs from the router: its generation, timers, views.
function viewCtx(gen) {
  return {
    current: () => gen === generation,
    addTimer: (t) => timers.push(t),
    addView: (v) => flames.push(v),
    clearViews: () => { flames.forEach((f) => f.destroy()); flames = []; },
    showError,
  };
}

// ---- landing ----

function firstProfiledSpan(group) {
  return (group.spans || []).find((s) => s.profiled);
}

async function landing(gen) {
  app.replaceChildren(h('p', { class: 'muted' }, 'Looking for the latest profiled segment…'));
  const tasks = sortTasks(await api.tasks());
  for (const t of tasks.slice(0, 20)) {
    const segs = await api.segments(t.id);
    if (gen !== generation) return;
    for (const g of segs) {
      const sp = firstProfiledSpan(g);
      if (sp) {
        location.replace(`#/tasks/${enc(t.id)}/segments/${enc(sp.segmentId)}`);
        return;
      }
    }
    // Snapshots can arrive before the agent reports the trace segment itself: open the first
    // sampled segment anyway (its dumps are analysed as a whole).
    if (segs.length && segs[0].segmentId) {
      location.replace(`#/tasks/${enc(t.id)}/segments/${enc(segs[0].segmentId)}`);
      return;
    }
  }
  if (gen !== generation) return;
  location.replace('#/tasks');
}

function sortTasks(tasks) {
  return [...(tasks || [])].sort((a, b) => (Number(b.startTime) || 0) - (Number(a.startTime) || 0) ||
    (Number(b.createTime) || 0) - (Number(a.createTime) || 0));
}

// ---- services ----

async function servicesPage(gen, name) {
  const services = await api.services();
  if (gen !== generation) return;
  const list = h('table', { class: 'grid services' },
    h('thead', null, h('tr', null, h('th', null, 'Service'), h('th', null, 'Layer'), h('th', null, 'Instances'), h('th', null, 'Last seen'))),
    h('tbody', null, services.map((s) => h('tr', { class: s.name === name ? 'selected' : '' },
      h('td', null, h('a', { href: '#/services/' + enc(s.name) }, s.name)),
      h('td', null, s.layer || '-'), h('td', { class: 'num' }, s.instances ?? '-'), h('td', null, fmtTime(s.lastSeen))))));
  const left = h('section', { class: 'card' }, h('h2', null, 'Services'),
    services.length ? list : h('p', { class: 'muted' }, 'No service has reported yet. Start an agent pointed at skyprofd\'s gRPC port.'));
  const right = h('section', { class: 'card' });
  app.replaceChildren(h('div', { class: 'cols' }, left, right));
  if (!name) {
    right.append(h('p', { class: 'muted' }, 'Select a service to see its instances.'));
    return;
  }
  right.append(h('h2', null, 'Instances of ', h('code', null, name)));
  const inst = await api.instances(name);
  if (gen !== generation) return;
  right.append(inst.length ? h('table', { class: 'grid instances' },
    h('thead', null, h('tr', null, h('th', null, 'Instance'), h('th', null, 'Language'), h('th', null, 'Last heartbeat'), h('th', null, 'Properties'))),
    h('tbody', null, inst.map((i) => h('tr', null, h('td', null, i.name), h('td', null, i.language || '-'),
      h('td', null, fmtTime(i.lastHeartbeat)),
      h('td', null, h('dl', { class: 'props' }, Object.entries(i.properties || {}).map(([k, v]) => [h('dt', null, k), h('dd', null, String(v))]))))))) :
    h('p', { class: 'muted' }, 'No instances.'));
  right.append(h('p', null, h('a', { href: '#/tasks?service=' + enc(name) }, 'Profile tasks of this service')));
  const stats = await api.endpointStats(name, 900).catch(() => null);
  if (gen !== generation || !stats) return;
  right.append(endpointsCard(name, stats));
}

const SVG_NS = 'http://www.w3.org/2000/svg';

function spark(values, cls, title) {
  const svg = document.createElementNS(SVG_NS, 'svg');
  svg.setAttribute('class', 'spark ' + cls);
  svg.setAttribute('viewBox', '0 0 90 20');
  svg.setAttribute('width', '90');
  svg.setAttribute('height', '20');
  const t = document.createElementNS(SVG_NS, 'title');
  t.textContent = title;
  const p = document.createElementNS(SVG_NS, 'path');
  p.setAttribute('d', sparkPath(values, 90, 20));
  svg.append(t, p);
  return svg;
}

// Per-endpoint request rate, error rate and p50/p99 over the last 15 minutes, one point per
// minute, with a button that opens the task form pre-filled for that endpoint.
function endpointsCard(service, stats) {
  const eps = stats.endpoints || [];
  const pct = (x) => (x * 100).toFixed(x && x < 0.01 ? 2 : 1) + ' %';
  const rows = eps.map((e) => {
    const pts = e.points || [];
    const q = new URLSearchParams({ service, endpoint: e.endpoint, threshold: String(suggestedThreshold(e)) });
    return h('tr', { dataset: { endpoint: e.endpoint } },
      h('td', null, h('code', null, e.endpoint)),
      h('td', { class: 'num' }, e.rps.toFixed(e.rps < 10 ? 2 : 0)),
      h('td', null, spark(pts.map((p) => p.count), 'rate', 'requests per minute')),
      h('td', { class: 'num' }, pct(e.errorRate)),
      h('td', null, spark(pts.map((p) => (p.count ? p.errors / p.count : 0)), 'errors', 'error rate per minute')),
      h('td', { class: 'num' }, e.p50 + ' ms'),
      h('td', { class: 'num' }, e.p99 + ' ms'),
      h('td', null, spark(pts.map((p) => p.p50), 'p50', 'p50 per minute (ms)'), spark(pts.map((p) => p.p99), 'p99', 'p99 per minute (ms)')),
      h('td', null, h('a', { class: 'button profile-endpoint', href: '#/tasks?' + q.toString() }, 'Profile this endpoint')));
  });
  return h('section', { class: 'endpoints' },
    h('h2', null, 'Endpoints (last 15 min)'),
    eps.length ? h('table', { class: 'grid endpoints' },
      h('thead', null, h('tr', null, h('th', null, 'Endpoint'), h('th', null, 'Req/s'), h('th', null, ''), h('th', null, 'Errors'), h('th', null, ''),
        h('th', null, 'p50'), h('th', null, 'p99'), h('th', null, 'p50 / p99'), h('th', null, ''))),
      h('tbody', null, rows)) :
      h('p', { class: 'muted' }, 'No requests in the last 15 minutes.'));
}

// ---- tasks ----

const FIELDS = {
  service: 'Service',
  endpointName: 'Endpoint',
  startTime: 'Monitor time',
  duration: 'Monitor duration',
  minDurationThreshold: 'Min duration threshold (ms)',
  dumpPeriod: 'Dump period',
  maxSamplingCount: 'Max sampling count',
};

function field(name, input, hint) {
  return h('div', { class: 'field', dataset: { field: name } },
    h('label', { for: 'f-' + name }, FIELDS[name]),
    h('div', { class: 'control' }, input, hint ? h('span', { class: 'hint' }, hint) : null,
      h('span', { class: 'field-error', id: 'err-' + name, role: 'alert' })));
}

function select(name, values, def, suffix) {
  return h('select', { id: 'f-' + name, name }, values.map((v) => h('option', { value: v, selected: v === def }, v + (suffix || ''))));
}

function createForm(services, tasks, onCreated) {
  const svc = h('input', { id: 'f-service', name: 'service', list: 'dl-services', autocomplete: 'off' });
  const ep = h('input', { id: 'f-endpointName', name: 'endpointName', list: 'dl-endpoints', autocomplete: 'off', placeholder: 'e.g. GET:/orders' });
  const when = h('select', { id: 'f-startMode', name: 'startMode' }, h('option', { value: 'now' }, 'Monitor now'), h('option', { value: 'at' }, 'Set start time'));
  const at = h('input', { id: 'f-startTime', name: 'startTime', type: 'datetime-local', hidden: true });
  when.addEventListener('change', () => { at.hidden = when.value !== 'at'; });
  const thr = h('input', { id: 'f-minDurationThreshold', name: 'minDurationThreshold', type: 'number', value: '0', step: '1' });
  const formError = h('p', { class: 'form-error', role: 'alert' });
  // The endpoint names the service's agents reported (GET .../endpoints): a click fills the field,
  // so a task names an endpoint that requests really hit.
  const picks = h('div', { class: 'endpoint-picks', 'aria-live': 'polite' });
  const dlEndpoints = h('datalist', { id: 'dl-endpoints' }, [...new Set(tasks.map((t) => t.endpointName))].map((e) => h('option', { value: e })));
  let picksFor = null;
  const loadPicks = async () => {
    const name = svc.value.trim();
    if (name === picksFor) return;
    picksFor = name;
    picks.replaceChildren();
    if (!name) return;
    let eps = [];
    try { eps = await api.endpoints(name); } catch { eps = []; }
    if (picksFor !== name) return;
    if (!eps.length) {
      picks.append(h('span', { class: 'muted' }, 'No endpoint seen yet for this service: a task matches only the name its agents report.'));
      return;
    }
    picks.append(h('span', { class: 'muted' }, 'Endpoints seen: '),
      ...eps.slice(0, 20).map((e) => h('button', { type: 'button', class: 'endpoint-pick', title: `${e.count} requests, last ${fmtTime(e.lastSeen)}`, dataset: { endpoint: e.name }, onclick: () => { ep.value = e.name; } }, e.name, h('span', { class: 'muted' }, ' ' + e.count))));
    dlEndpoints.replaceChildren(...eps.map((e) => h('option', { value: e.name })));
  };
  svc.addEventListener('change', loadPicks);
  svc.addEventListener('input', () => { setTimeout(loadPicks, 300); });
  const form = h('form', { class: 'create-task', novalidate: true },
    h('h3', null, 'New profile task'),
    h('datalist', { id: 'dl-services' }, services.map((s) => h('option', { value: s.name }))),
    dlEndpoints,
    field('service', svc),
    field('endpointName', h('span', null, ep, picks)),
    field('startTime', h('span', null, when, ' ', at)),
    field('duration', select('duration', [5, 10, 15], 5, ' min')),
    field('minDurationThreshold', thr, 'profile only requests slower than this'),
    field('dumpPeriod', select('dumpPeriod', [10, 20, 50, 100], 10, ' ms')),
    field('maxSamplingCount', select('maxSamplingCount', [1, 2, 3, 4, 5, 6, 7, 8, 9], 5)),
    formError,
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Create task')));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    form.querySelectorAll('.field-error').forEach((e) => { e.textContent = ''; });
    form.querySelectorAll('.field').forEach((e) => e.classList.remove('invalid'));
    formError.textContent = '';
    const fd = new FormData(form);
    const num = (k) => (fd.get(k) === '' || fd.get(k) === null ? NaN : Number(fd.get(k)));
    const req = {
      service: String(fd.get('service') || '').trim(),
      endpointName: String(fd.get('endpointName') || '').trim(),
      duration: num('duration'),
      minDurationThreshold: num('minDurationThreshold'),
      dumpPeriod: num('dumpPeriod'),
      maxSamplingCount: num('maxSamplingCount'),
    };
    if (Number.isNaN(req.minDurationThreshold)) req.minDurationThreshold = 0;
    if (when.value === 'at') {
      const t = at.value ? new Date(at.value).getTime() : NaN;
      if (Number.isNaN(t)) {
        setFieldError(form, 'startTime', 'choose a start time');
        return;
      }
      req.startTime = t;
    }
    try {
      const res = await api.createTask(req);
      onCreated(res.id);
    } catch (e) {
      const body = e.body || {};
      if (body.field && form.querySelector(`[data-field="${body.field}"]`)) setFieldError(form, body.field, body.errorReason || e.message);
      else formError.textContent = body.errorReason || e.message;
    }
  });
  return form;
}

function setFieldError(form, name, msg) {
  const f = form.querySelector(`[data-field="${name}"]`);
  f.classList.add('invalid');
  f.querySelector('.field-error').textContent = msg;
}

function taskRow(t, selectedId) {
  const end = Number(t.startTime) + Number(t.duration) * 60000;
  return h('tr', { class: t.id === selectedId ? 'selected task' : 'task', dataset: { id: t.id } },
    h('td', null, h('a', { href: '#/tasks/' + enc(t.id) }, t.endpointName)),
    h('td', null, t.service || t.serviceName || ''),
    h('td', null, statusBadge(t.status)),
    h('td', null, fmtTime(t.startTime), h('br'), h('span', { class: 'muted' }, '→ ' + fmtTime(end))));
}

function logsByInstance(logs) {
  if (!logs || !logs.length) return h('p', { class: 'muted' }, 'No logs yet: no instance has fetched the task.');
  const groups = new Map();
  for (const l of logs) {
    const k = l.instanceName || '(unknown instance)';
    if (!groups.has(k)) groups.set(k, []);
    groups.get(k).push(l);
  }
  return h('div', { class: 'logs' }, [...groups].map(([inst, ls]) => h('div', { class: 'log-group' },
    h('h4', null, inst),
    h('ul', null, ls.map((l) => h('li', null, h('span', { class: 'op op-' + l.operationType }, l.operationType), ' ', fmtTime(l.operationTime)))))));
}

function taskDetails(t) {
  const kv = (k, v) => [h('dt', null, k), h('dd', null, v)];
  return h('dl', { class: 'kv' },
    kv('Task', h('code', null, t.id)), kv('Status', statusBadge(t.status)),
    t.statusReason ? kv('Why no data', h('span', { class: 'status-reason' }, t.statusReason)) : null,
    t.triggeredBy ? kv('Started by', h('a', { class: 'triggered-by', href: '#/continuous/' + enc(t.service || '') }, t.triggeredBy)) : null,
    kv('Service', t.service || t.serviceName || ''), kv('Endpoint', t.endpointName),
    kv('Monitor time', fmtTime(t.startTime) + ' → ' + fmtTime(Number(t.startTime) + Number(t.duration) * 60000)),
    kv('Duration', t.duration + ' min'), kv('Min duration threshold', t.minDurationThreshold + ' ms'),
    kv('Dump period', t.dumpPeriod + ' ms'), kv('Max sampling count', t.maxSamplingCount));
}

function exportLinks(urlFor, note) {
  return h('div', { class: 'exports' }, 'Export: ',
    EXPORT_FORMATS.map((f) => h('a', { class: 'button', href: urlFor(f), download: '', dataset: { format: f } }, f)),
    note ? h('span', { class: 'muted' }, ' ' + note) : null);
}

function segmentsTable(taskId, groups, selectedSeg) {
  if (!groups.length) return h('p', { class: 'muted' }, 'No sampled segments yet.');
  return h('table', { class: 'grid segments' },
    h('thead', null, h('tr', null, h('th', null, 'Endpoint'), h('th', null, 'Start'), h('th', null, 'Duration (ms)'), h('th', null, 'Trace ID'), h('th', null, 'Instance'))),
    h('tbody', null, groups.map((g) => {
      const sp = firstProfiledSpan(g);
      const seg = sp ? sp.segmentId : g.segmentId;
      const isSel = (g.spans || []).some((s) => s.segmentId === selectedSeg) || g.segmentId === selectedSeg;
      return h('tr', { class: 'segment' + (isSel ? ' selected' : ''), dataset: { segment: seg } },
        h('td', null, h('a', { href: `#/tasks/${enc(taskId)}/segments/${enc(seg)}` }, (g.endpointNames || [])[0] || '-')),
        h('td', null, fmtTime(g.start)), h('td', { class: 'num' }, g.duration),
        h('td', null, h('code', null, g.traceId)), h('td', null, g.instanceName || ''));
    })));
}

async function tasksPage(gen, taskId, opts) {
  const [tasksRaw, services] = await Promise.all([api.tasks(), api.services().catch(() => [])]);
  if (gen !== generation) return;
  const tasks = sortTasks(tasksRaw);
  const { query } = parseHash();
  const svcFilter = query.get('service');
  const shown = svcFilter ? tasks.filter((t) => (t.service || t.serviceName) === svcFilter) : tasks;

  const form = createForm(services, tasks, (id) => { location.hash = '#/tasks/' + enc(id); });
  form.hidden = !!taskId && tasks.length > 0;
  if (query.get('endpoint')) {
    // "Profile this endpoint" from the service page: the form, pre-filled
    form.querySelector('#f-service').value = svcFilter || '';
    form.querySelector('#f-endpointName').value = query.get('endpoint');
    form.querySelector('#f-minDurationThreshold').value = query.get('threshold') || '0';
    form.hidden = false;
  }
  const taskTbody = h('tbody', null, shown.map((t) => taskRow(t, taskId)));
  const left = h('section', { class: 'card tasks-col' },
    h('div', { class: 'card-head' }, h('h2', null, 'Profile tasks'),
      h('button', { type: 'button', class: 'primary', id: 'new-task', onclick: () => { form.hidden = !form.hidden; } }, 'New task')),
    form,
    svcFilter ? h('p', { class: 'muted' }, 'Service ', h('code', null, svcFilter), ' · ', h('a', { href: '#/tasks' }, 'all services')) : null,
    shown.length ? h('table', { class: 'grid task-list' },
      h('thead', null, h('tr', null, h('th', null, 'Endpoint'), h('th', null, 'Service'), h('th', null, 'Status'), h('th', null, 'Monitor time'))),
      taskTbody) : h('p', { class: 'muted' }, 'No tasks yet. Create one with "New task".'));
  const right = h('div', { class: 'detail-col' });
  app.replaceChildren(h('div', { class: 'cols' }, left, right));
  if (!taskId) {
    right.append(h('section', { class: 'card' }, h('p', { class: 'muted' }, 'Select a task to see its logs, sampled segments and profile.')));
    return;
  }
  let task = tasks.find((t) => t.id === taskId);
  if (!task) task = await api.task(taskId);
  if (gen !== generation) return;

  const logsBox = h('div', null, logsByInstance(task.logs));
  // Cancel ends the task's window now: agents are no longer handed it (docs/api.md).
  const cancelBtn = (task.status === 'pending' || task.status === 'running')
    ? h('button', { type: 'button', class: 'button danger', id: 'cancel-task', onclick: async () => {
      cancelBtn.disabled = true;
      try {
        await api.cancelTask(taskId);
        const t = await api.task(taskId);
        if (gen !== generation) return;
        taskCard.querySelector('.kv').replaceWith(taskDetails(t));
        const row = taskTbody.querySelector(`tr[data-id="${CSS.escape(taskId)}"]`);
        if (row) row.replaceWith(taskRow(t, taskId));
        cancelBtn.remove();
      } catch (e) {
        cancelBtn.disabled = false;
        if (gen === generation) showError(e);
      }
    } }, 'Cancel task')
    : null;
  const taskCard = h('section', { class: 'card task-detail' },
    h('div', { class: 'card-head' }, h('h2', null, 'Task ', h('span', { class: 'muted' }, task.endpointName)),
      cancelBtn,
      h('a', { class: 'button', id: 'analyze-task', href: `#/tasks/${enc(taskId)}/analyze` }, 'Analyze whole task')),
    taskDetails(task), h('h3', null, 'Logs by instance'), logsBox);
  const segBox = h('div', null, h('p', { class: 'muted' }, 'Loading segments…'));
  const segCard = h('section', { class: 'card' },
    h('div', { class: 'card-head' }, h('h2', null, 'Sampled segments'), h('span', { class: 'muted refresh-note' })), segBox);
  right.append(taskCard, segCard);

  let groups = await api.segments(taskId);
  if (gen !== generation) return;
  segBox.replaceChildren(segmentsTable(taskId, groups, opts.segment));

  // While the task is pending or running, refresh its status, logs and segments.
  if (task.status === 'pending' || task.status === 'running') {
    segCard.querySelector('.refresh-note').textContent = 'refreshing every 3 s while the task runs';
    const timer = setInterval(async () => {
      try {
        const [t, segs] = await Promise.all([api.task(taskId), api.segments(taskId)]);
        if (gen !== generation) return;
        groups = segs;
        segBox.replaceChildren(segmentsTable(taskId, segs, opts.segment));
        logsBox.replaceChildren(logsByInstance(t.logs || await api.taskLogs(taskId)));
        const row = taskTbody.querySelector(`tr[data-id="${CSS.escape(taskId)}"]`);
        if (row) row.replaceWith(taskRow(t, taskId));
        taskCard.querySelector('.kv').replaceWith(taskDetails(t));
        if (t.status === 'finished' || t.status === 'cancelled') {
          clearInterval(timer);
          segCard.querySelector('.refresh-note').textContent = '';
        }
      } catch (e) {
        if (gen === generation) showError(e);
      }
    }, 3000);
    timers.push(timer);
  }

  if (opts.taskAnalysis) {
    const card = h('section', { class: 'card analysis-card' });
    right.append(card);
    await runAnalysis(gen, card, 'Whole task ' + taskId, (p) => api.analyzeTask(taskId, p), (f) => taskExportUrl(taskId, f));
    return;
  }
  if (opts.segment) await segmentView(gen, right, taskId, groups, opts);
}

function spanKey(s) {
  return s.segmentId + ':' + s.spanId;
}

async function segmentView(gen, right, taskId, groups, opts) {
  const group = groups.find((g) => (g.spans || []).some((s) => s.segmentId === opts.segment) || g.segmentId === opts.segment);
  if (!group) {
    right.append(h('section', { class: 'card' }, h('p', { class: 'error' }, 'Segment ', h('code', null, opts.segment), ' is not among the sampled segments of this task.')));
    return;
  }
  const spans = group.spans || [];
  if (!spans.some((s) => s.profiled)) {
    // No span information yet (the segment report may lag the snapshots): analyse every dump
    // of the segment.
    const resultCard = h('section', { class: 'card analysis-card' });
    right.append(h('section', { class: 'card segment-detail' },
      h('div', { class: 'card-head' }, h('h2', null, 'Trace ', h('code', { id: 'trace-id' }, group.traceId || '-'))),
      h('p', { class: 'muted' }, 'The spans of this segment have not been reported (yet); the analysis covers all of its thread dumps.')),
    tlCard(), resultCard);
    addTimeline(gen, right.querySelector('.timeline-card'), opts.segment, [], resultCard);
    await runAnalysis(gen, resultCard, 'Segment ' + opts.segment + ' · all dumps',
      (p) => api.analyzeSegment(opts.segment, p), (f) => segmentExportUrl(opts.segment, f));
    return;
  }
  let selected = spans.find((s) => spanKey(s) === opts.span) ||
    spans.find((s) => s.segmentId === opts.segment && s.profiled) || spans.find((s) => s.profiled) || spans[0];
  let mode = opts.mode;

  const analyzeBtn = h('button', { type: 'button', class: 'primary', id: 'analyze' }, 'Analyze');
  const modeInc = h('input', { type: 'radio', name: 'mode', value: 'include', id: 'mode-include', checked: mode === 'include' });
  const modeExc = h('input', { type: 'radio', name: 'mode', value: 'exclude', id: 'mode-exclude', checked: mode === 'exclude' });
  const byId = new Map(spans.map((s) => [spanKey(s), s]));
  const depthOf = (s) => {
    let d = 0;
    let cur = s;
    const seen = new Set();
    while (cur && cur.parentSpanId >= 0 && !seen.has(cur)) {
      seen.add(cur);
      cur = byId.get(cur.segmentId + ':' + cur.parentSpanId);
      if (cur) d++;
    }
    return d;
  };
  const tbody = h('tbody', null, spans.map((s) => {
    const row = h('tr', { class: 'span' + (s === selected ? ' selected' : '') + (s.profiled ? ' profiled' : ''), dataset: { key: spanKey(s) } },
      h('td', null, h('input', { type: 'radio', name: 'span', value: spanKey(s), checked: s === selected, 'aria-label': 'select span' })),
      h('td', { class: 'sig', style: `padding-left:${6 + depthOf(s) * 14}px` }, s.endpointName || s.peer || '-'),
      h('td', null, s.type || ''), h('td', null, s.component || ''),
      h('td', { class: 'num' }, Number(s.endTime) - Number(s.startTime)),
      h('td', null, fmtTime(s.startTime)),
      h('td', null, s.profiled ? h('span', { class: 'badge profiled' }, 'profiled') : h('span', { class: 'badge not-profiled' }, 'not profiled')),
      h('td', null, h('code', { class: 'small' }, s.segmentId)));
    row.addEventListener('click', () => select(s));
    return row;
  }));
  function select(s) {
    selected = s;
    tbody.querySelectorAll('tr').forEach((r) => {
      const on = r.dataset.key === spanKey(s);
      r.classList.toggle('selected', on);
      r.querySelector('input').checked = on;
    });
    analyzeBtn.disabled = !s.profiled;
    analyzeBtn.title = s.profiled ? '' : 'this span\'s segment was not profiled';
  }
  const card = h('section', { class: 'card segment-detail' },
    h('div', { class: 'card-head' }, h('h2', null, 'Trace ', h('code', { id: 'trace-id' }, group.traceId)),
      h('a', { class: 'button', id: 'compare-segment', href: '#/compare?base=' + enc('segment:' + opts.segment) }, 'Compare with…')),
    h('div', { class: 'toolbar' },
      h('label', null, modeInc, ' Include Children'), h('label', null, modeExc, ' Exclude Children'), analyzeBtn),
    h('table', { class: 'grid spans' },
      h('thead', null, h('tr', null, h('th', null, ''), h('th', null, 'Span'), h('th', null, 'Type'), h('th', null, 'Component'), h('th', null, 'Duration (ms)'), h('th', null, 'Start'), h('th', null, 'Profiled'), h('th', null, 'Segment'))),
      tbody));
  const resultCard = h('section', { class: 'card analysis-card' });
  const timeline = tlCard();
  right.append(card, timeline, resultCard);
  addTimeline(gen, timeline, opts.segment, spans.filter((s) => s.segmentId === opts.segment), resultCard);
  select(selected);
  [modeInc, modeExc].forEach((r) => r.addEventListener('change', () => { mode = r.value; }));

  const run = async () => {
    if (!selected || !selected.profiled) return;
    const queries = analyzeQueries(selected, spans, mode);
    setHashParams({ span: spanKey(selected), mode });
    const label = `Span "${selected.endpointName || selected.spanId}" of segment ${selected.segmentId} · ${mode === 'exclude' ? 'Exclude' : 'Include'} Children · ${queries.length} time range${queries.length === 1 ? '' : 's'}`;
    const s0 = Number(selected.startTime);
    const e0 = Number(selected.endTime);
    const seg = selected.segmentId;
    if (!queries.length) {
      resultCard.replaceChildren(h('h2', null, 'Profile'), h('p', { class: 'tip' }, 'The child spans cover the whole span: nothing left to analyse.'));
      return;
    }
    await runAnalysis(gen, resultCard, label, (p) => api.analyze(queries, p), (f) => segmentExportUrl(seg, f, s0, e0),
      mode === 'exclude' ? '(exports cover the span\'s whole time range)' : '');
  };
  analyzeBtn.addEventListener('click', () => { run().catch(showError); });
  // Opening a segment analyses its selected profiled span at once (deep links and the landing page).
  if (selected && selected.profiled) await run();
  else resultCard.append(h('p', { class: 'muted' }, 'Select a profiled span and press Analyze.'));
}

// Where in the request the time went (timeline.js): brushing a range re-analyses just that range.
const tlCard = () => h('section', { class: 'card timeline-card', hidden: true });
async function addTimeline(gen, card, seg, spans, resultCard) {
  const doc = await cmpApi.timeline(seg).catch(() => null);
  if (gen !== generation || !doc || !doc.snapshots.length) return;
  const box = h('div', { class: 'timeline-box' });
  fill(card, h('h2', null, 'Request timeline'), h('p', { class: 'muted' }, 'One column per thread dump, coloured by its leaf function, under the segment\'s spans. Drag across the dumps to analyse that range.'), box);
  card.hidden = false;
  views.push(timelineView(box, doc, spans, (a, b) => {
    const all = a === null;
    runAnalysis(gen, resultCard, all ? `Segment ${seg} · all dumps` : `Segment ${seg} · ${a}–${b} ms (brushed on the timeline)`,
      (p) => (all ? api.analyzeSegment(seg, p) : api.analyze([{ segmentId: seg, timeRange: { start: a, end: b } }], p)),
      (f) => (all ? segmentExportUrl(seg, f) : segmentExportUrl(seg, f, a, b))).catch(showError);
  }));
}

// fetcher(params) fetches the analysis; params {granularity: 'functions'} gives the tree built on
// functions, which "Group by function" shows (durations computed on it by the server).
async function runAnalysis(gen, card, label, fetcher, exportUrl, exportNote) {
  card.replaceChildren(h('h2', null, 'Profile'), h('p', { class: 'muted' }, 'Analyzing…'));
  const analysis = await fetcher();
  if (gen !== generation) return;
  flames.forEach((f) => f.destroy());
  flames = [analysisView(card, analysis, {
    fetchByFunction: () => fetcher({ granularity: 'functions' }),
    prelude: [h('p', { class: 'muted analysis-label' }, label),
      analysis.tip ? h('p', { class: 'tip', id: 'analysis-tip' }, analysis.tip) : null,
      exportLinks(exportUrl, exportNote)],
    emptyText: analysis.tip ? '' : 'No snapshots in this time range.',
  })];
}

// ---- boot ----

const tokenInput = document.getElementById('api-token');
tokenInput.value = getToken();
tokenInput.addEventListener('change', () => setToken(tokenInput.value.trim()));
document.getElementById('token-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  setToken(tokenInput.value.trim());
});
window.addEventListener('hashchange', route);
route();
