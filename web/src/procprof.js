// procprof.js - the Process profiles page: whole-process profiling tasks of two kinds,
//   pprof            SkyWalking's PprofTask (Go agent, libskyprof, the Python agent):
//                    events cpu/wall/heap/allocs/block/mutex/goroutine/threadcreate
//   async-profiler   SkyWalking's AsyncProfilerTask (Java agent, JFR files):
//                    events CPU/WALL/LOCK/ALLOC/CTIMER/ITIMER, optional execArgs
// Routes (deep-linkable):
//   #/process                       both task lists and the create forms
//   #/process/pprof/ID[?instances=a,b&sampleType=cpu]
//   #/process/async/ID[?instances=a,b&eventType=execution&thread=burner&from=MS&to=MS]
//                                   a task: details, per-instance progress, logs, files, and the
//                                   chosen instances' files merged into tree + flame graph
//                                   (analysis.js: search, focus, agent frames, group by function);
//                                   JFR tasks also show their threads over time (threadline.js):
//                                   brushing a range re-analyses it (from/to)
//   #/process/ebpf/ID[?processId=P] an agent-started eBPF profile (ON_CPU/OFF_CPU, ebpf.js),
//                                   listed on the page under "Started by agents"
import { procApi, api, ebpfApi } from './api.js';
import { h, fill, fmtTime, statusBadge } from './dom.js';
import { analysisView, setHashParams } from './analysis.js';
import { threadTimelineView } from './threadline.js';
import { ebpfList, ebpfDetail } from './ebpf.js';

export const PPROF_EVENTS = ['cpu', 'wall', 'heap', 'allocs', 'block', 'mutex', 'goroutine', 'threadcreate'];
const TIMED = new Set(['cpu', 'wall', 'block', 'mutex']);
const NEEDS_PERIOD = new Set(['block', 'mutex']);
export const ASYNC_EVENTS = ['CPU', 'WALL', 'LOCK', 'ALLOC', 'CTIMER', 'ITIMER'];
export const PROC_FORMATS = ['pprof', 'collapsed', 'speedscope', 'html'];
const KIND_LABEL = { pprof: 'pprof', async: 'async-profiler (JFR)' };
const enc = encodeURIComponent;

function fieldRow(name, label, control, hint) {
  return h('div', { class: 'field', dataset: { field: name } },
    h('label', null, label),
    h('div', { class: 'control' }, control, hint ? h('span', { class: 'hint' }, hint) : null,
      h('span', { class: 'field-error', role: 'alert' })));
}

function showFieldError(form, formError, err) {
  const body = err.body || {};
  const f = body.field && form.querySelector(`[data-field="${body.field}"]`);
  if (f) {
    f.classList.add('invalid');
    f.querySelector('.field-error').textContent = body.errorReason || err.message;
  } else formError.textContent = body.errorReason || err.message;
}

function clearErrors(form, formError) {
  form.querySelectorAll('.field-error').forEach((e) => { e.textContent = ''; });
  form.querySelectorAll('.field').forEach((e) => e.classList.remove('invalid'));
  formError.textContent = '';
}

// The service's instances as checkboxes (none checked = every live instance).
function instancePicker(kind, svcInput) {
  const box = h('div', { class: 'instance-picks', id: `${kind}-instances` },
    h('span', { class: 'muted' }, 'Enter a service to pick instances (none picked: every live instance).'));
  let loadedFor = null;
  const load = async () => {
    const name = svcInput.value.trim();
    if (name === loadedFor) return;
    loadedFor = name;
    if (!name) return;
    let list = [];
    try { list = await api.instances(name); } catch { list = []; }
    if (loadedFor !== name) return;
    box.replaceChildren(list.length
      ? h('span', { class: 'muted' }, 'Instances (none picked: every live instance): ')
      : h('span', { class: 'muted' }, 'No instance of this service has reported yet.'),
    ...list.map((i) => h('label', { class: 'instance-pick' },
      h('input', { type: 'checkbox', name: 'instance', value: i.name }), ' ', i.name,
      i.language ? h('span', { class: 'muted' }, ' ' + i.language) : null)));
  };
  svcInput.addEventListener('change', load);
  svcInput.addEventListener('input', () => { setTimeout(load, 300); });
  return { box, picked: () => [...box.querySelectorAll('input[name=instance]:checked')].map((c) => c.value), load };
}

function pprofForm(services, onCreated) {
  const svc = h('input', { name: 'service', id: 'pp-service', list: 'pp-services', autocomplete: 'off' });
  const inst = instancePicker('pprof', svc);
  const event = h('select', { name: 'events', id: 'pp-event' }, PPROF_EVENTS.map((e) => h('option', { value: e }, e)));
  const duration = h('input', { name: 'duration', id: 'pp-duration', type: 'number', min: '1', max: '15', value: '1' });
  const period = h('input', { name: 'dumpPeriod', id: 'pp-dumpPeriod', type: 'number', min: '1', value: '' });
  const rate = h('input', { name: 'samplingRate', id: 'pp-samplingRate', type: 'number', min: '1', max: '1000', placeholder: 'agent default' });
  const durRow = fieldRow('duration', 'Duration (min)', duration);
  const periodRow = fieldRow('dumpPeriod', 'Dump period', period, 'block: rate in ns; mutex: contention fraction');
  const sync = () => {
    durRow.hidden = !TIMED.has(event.value);
    periodRow.hidden = !NEEDS_PERIOD.has(event.value);
  };
  event.addEventListener('change', sync);
  const formError = h('p', { class: 'form-error', role: 'alert' });
  const form = h('form', { class: 'create-task proc-form', id: 'pprof-form', novalidate: true },
    h('h3', null, 'New pprof task'),
    h('datalist', { id: 'pp-services' }, services.map((s) => h('option', { value: s.name }))),
    fieldRow('service', 'Service', svc), fieldRow('serviceInstanceIds', 'Instances', inst.box),
    fieldRow('events', 'Event', event, 'heap, allocs, goroutine, threadcreate: taken at once'),
    durRow, periodRow, fieldRow('samplingRate', 'Sampling rate (Hz)', rate),
    formError, h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Create pprof task')));
  sync();
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearErrors(form, formError);
    const req = { service: svc.value.trim(), events: event.value };
    const ids = inst.picked();
    if (ids.length) req.serviceInstanceIds = ids;
    req.duration = TIMED.has(event.value) ? Number(duration.value || 0) : 0;
    if (NEEDS_PERIOD.has(event.value)) req.dumpPeriod = Number(period.value || 0);
    if (rate.value) req.samplingRate = Number(rate.value);
    try {
      const res = await procApi.create('pprof', req);
      onCreated('pprof', res.id);
    } catch (e) { showFieldError(form, formError, e); }
  });
  return { form, svc, inst };
}

function asyncForm(services, onCreated) {
  const svc = h('input', { name: 'service', id: 'ap-service', list: 'ap-services', autocomplete: 'off' });
  const inst = instancePicker('async', svc);
  const events = h('span', { class: 'event-picks' }, ASYNC_EVENTS.map((e) => h('label', null,
    h('input', { type: 'checkbox', name: 'event', value: e, checked: e === 'CPU' }), ' ', e)));
  const duration = h('input', { name: 'duration', id: 'ap-duration', type: 'number', min: '1', max: '3600', value: '30' });
  const execArgs = h('input', { name: 'execArgs', id: 'ap-execArgs', placeholder: 'e.g. interval=10ms', size: '28' });
  const formError = h('p', { class: 'form-error', role: 'alert' });
  const form = h('form', { class: 'create-task proc-form', id: 'async-form', novalidate: true },
    h('h3', null, 'New async-profiler task (Java)'),
    h('datalist', { id: 'ap-services' }, services.map((s) => h('option', { value: s.name }))),
    fieldRow('service', 'Service', svc), fieldRow('serviceInstanceIds', 'Instances', inst.box),
    fieldRow('events', 'Events', events), fieldRow('duration', 'Duration (s)', duration),
    fieldRow('execArgs', 'async-profiler options', execArgs),
    formError, h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Create async-profiler task')));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearErrors(form, formError);
    const req = {
      service: svc.value.trim(),
      events: [...events.querySelectorAll('input:checked')].map((c) => c.value),
      duration: Number(duration.value || 0),
    };
    const ids = inst.picked();
    if (ids.length) req.serviceInstanceIds = ids;
    if (execArgs.value.trim()) req.execArgs = execArgs.value.trim();
    try {
      const res = await procApi.create('async', req);
      onCreated('async', res.id);
    } catch (e) { showFieldError(form, formError, e); }
  });
  return { form, svc, inst };
}

const eventsOf = (t) => (Array.isArray(t.events) ? t.events.join(', ') : String(t.events || ''));

function taskRow(kind, t, selected) {
  return h('tr', { class: 'proc-task' + (selected ? ' selected' : ''), dataset: { id: t.id, kind } },
    h('td', null, h('a', { href: `#/process/${kind}/${enc(t.id)}` }, eventsOf(t))),
    h('td', null, kind === 'pprof' ? 'pprof' : 'JFR'),
    h('td', null, t.service),
    h('td', null, statusBadge(t.status)),
    h('td', null, fmtTime(t.createTime)),
    h('td', { class: 'num' }, `${(t.files || []).length}/${(t.progress || []).length || '-'}`));
}

function progressTable(t) {
  const rows = t.progress || [];
  if (!rows.length) return h('p', { class: 'muted' }, 'No instance yet: the task waits for instances to report.');
  return h('table', { class: 'grid progress' },
    h('thead', null, h('tr', null, h('th', null, 'Instance'), h('th', null, 'State'), h('th', null, 'Notified'),
      h('th', null, 'Uploaded'), h('th', null, 'Why it failed'))),
    h('tbody', null, rows.map((p) => h('tr', { dataset: { instance: p.instanceName, state: p.state } },
      h('td', null, p.instanceName), h('td', null, h('span', { class: 'state state-' + p.state }, p.state)),
      h('td', null, fmtTime(p.notifiedTime)), h('td', null, fmtTime(p.uploadedTime)),
      h('td', { class: 'failed-reason' }, p.failedReason ? `${p.failedOperation || ''}: ${p.failedReason}` : '')))));
}

function logsList(t) {
  const logs = t.logs || [];
  if (!logs.length) return h('p', { class: 'muted' }, 'No logs yet: no instance has fetched the task.');
  return h('ul', { class: 'proc-logs' }, logs.map((l) => h('li', null, fmtTime(l.operationTime), ' ',
    h('b', null, l.instanceName), ' ', h('span', { class: 'op op-' + l.operationType }, l.operationType),
    l.message ? h('span', { class: 'muted' }, ' ' + l.message) : null)));
}

function filesList(kind, t) {
  const files = t.files || [];
  if (!files.length) return h('p', { class: 'muted' }, 'No file uploaded yet.');
  return h('ul', { class: 'proc-files' }, files.map((f) => h('li', null,
    h('a', { href: procApi.fileUrl(kind, t.id, f.id), download: '' }, `${f.instanceName} · ${fmtTime(f.time)}`),
    h('span', { class: 'muted' }, ` ${f.size} bytes (${kind === 'pprof' ? '.pb.gz' : '.jfr'})`))));
}

function details(kind, t) {
  const kv = (k, v) => [h('dt', null, k), h('dd', null, v)];
  return h('dl', { class: 'kv' },
    kv('Task', h('code', null, t.id)), kv('Kind', KIND_LABEL[kind]), kv('Status', statusBadge(t.status)),
    kv('Service', t.service),
    kv('Instances', t.allLiveInstances ? 'every live instance' : (t.serviceInstanceIds || []).join(', ')),
    kv('Events', eventsOf(t)),
    kv('Duration', kind === 'pprof' ? t.duration + ' min' : t.duration + ' s'),
    kind === 'pprof' && t.dumpPeriod ? kv('Dump period', String(t.dumpPeriod)) : null,
    kind === 'pprof' && t.samplingRate ? kv('Sampling rate', t.samplingRate + ' Hz') : null,
    kind === 'async' && t.execArgs ? kv('execArgs', h('code', null, t.execArgs)) : null,
    kv('Created', fmtTime(t.createTime)));
}

// ctx: {current() -> bool, addTimer(id), addView(v with destroy()), clearViews(), showError(e)}
export async function processPage(ctx, kind, id, query) {
  const app = document.getElementById('app');
  const [pp, ap, services, bpf] = await Promise.all([procApi.tasks('pprof'), procApi.tasks('async'),
    api.services().catch(() => []), ebpfApi.triggers().catch(() => [])]);
  if (!ctx.current()) return;
  const onCreated = (k, tid) => { location.hash = `#/process/${k}/${enc(tid)}`; };
  const pf = pprofForm(services, onCreated);
  const af = asyncForm(services, onCreated);
  const forms = h('div', { class: 'proc-forms' }, pf.form, af.form);
  forms.hidden = !!id;
  const all = [...pp.map((t) => ['pprof', t]), ...ap.map((t) => ['async', t])]
    .sort((a, b) => (Number(b[1].createTime) || 0) - (Number(a[1].createTime) || 0));
  const tbody = h('tbody', null, all.map(([k, t]) => taskRow(k, t, k === kind && t.id === id)));
  const left = h('section', { class: 'card tasks-col' },
    h('div', { class: 'card-head' }, h('h2', null, 'Process profiles'),
      h('button', { type: 'button', class: 'primary', id: 'new-proc-task', onclick: () => { forms.hidden = !forms.hidden; } }, 'New task')),
    forms,
    all.length ? h('table', { class: 'grid proc-task-list' },
      h('thead', null, h('tr', null, h('th', null, 'Events'), h('th', null, 'Kind'), h('th', null, 'Service'),
        h('th', null, 'Status'), h('th', null, 'Created'), h('th', { class: 'num', title: 'files uploaded / instances' }, 'Files'))),
      tbody) : h('p', { class: 'muted' }, 'No process profiling task yet. Create one with "New task".'),
    h('h3', { id: 'ebpf-list-head' }, 'Started by agents (eBPF, threshold-triggered)'),
    ebpfList(bpf, kind === 'ebpf' ? id : null));
  const right = h('div', { class: 'detail-col' });
  app.replaceChildren(h('div', { class: 'cols' }, left, right));
  const svcParam = query.get('service');
  if (svcParam) {
    for (const f of [pf, af]) { f.svc.value = svcParam; f.inst.load(); }
    forms.hidden = false;
  }
  if (!id || !kind) {
    right.append(h('section', { class: 'card' }, h('p', { class: 'muted' },
      'Select a task to see its progress per instance and its profile, or create one: pprof for Go, C/C++ ',
      'and Python services, async-profiler for Java.')));
    return;
  }
  if (kind === 'ebpf') {
    return ebpfDetail(ctx, right, id, bpf.find((t) => t.taskId === id) ||
      (await ebpfApi.triggers({ task: id }).catch(() => []))[0], query);
  }
  let task = await procApi.task(kind, id);
  if (!ctx.current()) return;
  const progressBox = h('div', null, progressTable(task));
  const logsBox = h('div', null, logsList(task));
  const filesBox = h('div', null, filesList(kind, task));
  const live = (s) => s === 'pending' || s === 'running';
  const cancelBtn = live(task.status) ? h('button', { type: 'button', class: 'button danger', id: 'cancel-proc-task', onclick: async () => {
    cancelBtn.disabled = true;
    try {
      await procApi.cancel(kind, id);
      cancelBtn.remove();
    } catch (e) {
      cancelBtn.disabled = false;
      ctx.showError(e);
    }
  } }, 'Cancel task') : null;
  const card = h('section', { class: 'card proc-detail' },
    h('div', { class: 'card-head' }, h('h2', null, KIND_LABEL[kind], ' task ', h('span', { class: 'muted' }, task.service)),
      h('span', { class: 'muted refresh-note' }), cancelBtn),
    details(kind, task), h('h3', null, 'Progress by instance'), progressBox,
    h('h3', null, 'Logs'), logsBox, h('h3', null, 'Files'), filesBox);
  const resultCard = h('section', { class: 'card analysis-card proc-analysis' });
  right.append(card, resultCard);

  let shownFiles = -1;
  const refresh = async () => {
    const nfiles = (task.files || []).length;
    if (nfiles !== shownFiles) {
      shownFiles = nfiles;
      await analysis(ctx, kind, task, resultCard, query);
    }
  };
  await refresh();
  if (live(task.status)) {
    card.querySelector('.refresh-note').textContent = 'refreshing every 3 s while the task runs';
    const timer = setInterval(async () => {
      try {
        const t = await procApi.task(kind, id);
        if (!ctx.current()) return;
        task = t;
        progressBox.replaceChildren(progressTable(t));
        logsBox.replaceChildren(logsList(t));
        filesBox.replaceChildren(filesList(kind, t));
        card.querySelector('.kv').replaceWith(details(kind, t));
        const row = tbody.querySelector(`tr[data-kind="${kind}"][data-id="${CSS.escape(id)}"]`);
        if (row) row.replaceWith(taskRow(kind, t, true));
        if (!live(t.status)) {
          clearInterval(timer);
          card.querySelector('.refresh-note').textContent = '';
          if (cancelBtn) cancelBtn.remove();
        }
        // The analysis follows new uploads unless the user is reading a focused frame.
        if (!location.hash.includes('focus=')) await refresh();
      } catch (e) {
        if (ctx.current()) ctx.showError(e);
      }
    }, 3000);
    ctx.addTimer(timer);
  }
}

// The analysis of the chosen instances' files, with the kind's switches: sample type (pprof);
// event kind and thread (JFR). Choices live in the hash's query (deep links).
async function analysis(ctx, kind, task, card, query0) {
  const query = new URLSearchParams(location.hash.split('?')[1] || '');
  const files = task.files || [];
  const instances = [...new Set(files.map((f) => f.instanceName))];
  if (!files.length) {
    fill(card, h('h2', null, 'Profile'), h('p', { class: 'muted empty-analysis' },
      'No file uploaded yet: the profile appears when an instance uploads its file.'));
    return;
  }
  const chosen = (query.get('instances') || '').split(',').filter((x) => instances.includes(x));
  const params = { instances: chosen.length && chosen.length < instances.length ? chosen.join(',') : '' };
  if (kind === 'pprof') params.sampleType = query.get('sampleType') || '';
  else {
    params.eventType = query.get('eventType') || '';
    params.thread = query.get('thread') || '';
    const from = Number(query.get('from'));
    const to = Number(query.get('to'));
    if (from > 0 && to >= from) { params.from = from; params.to = to; }
  }
  card.replaceChildren(h('h2', null, 'Profile'), h('p', { class: 'muted' }, 'Analyzing…'));
  let doc;
  let tl = null;
  try {
    [doc, tl] = await Promise.all([procApi.analyze(kind, task.id, params),
      kind === 'async' ? procApi.timeline(task.id, { instances: params.instances, eventType: params.eventType })
        .catch(() => null) : null]);
  } catch (e) {
    if (!ctx.current()) return;
    fill(card, h('h2', null, 'Profile'), h('p', { class: 'error analysis-error' }, e.message));
    return;
  }
  if (!ctx.current()) return;

  const rerun = (upd) => {
    setHashParams(upd);
    analysis(ctx, kind, task, card, query0).catch(ctx.showError);
  };
  const picks = h('span', { class: 'instance-merge', id: 'merge-instances' }, h('span', { class: 'muted' }, 'Instances merged: '),
    instances.map((name) => {
      const cb = h('input', { type: 'checkbox', value: name, checked: !params.instances || chosen.includes(name) });
      cb.addEventListener('change', () => {
        const on = [...picks.querySelectorAll('input:checked')].map((c) => c.value);
        if (!on.length) { cb.checked = true; return; }   // at least one instance
        rerun({ instances: on.length === instances.length ? null : on.join(',') });
      });
      return h('label', { class: 'instance-pick' }, cb, ' ', name);
    }));
  const controls = [picks];
  const unit = doc.unit || '';
  const short = { nanoseconds: 'ns', microseconds: 'µs', milliseconds: 'ms', seconds: 's' }[unit] || unit || 'weight';
  if (kind === 'pprof') {
    const types = (doc.sampleTypes || []).map((t) => String(t).split('/')[0]);
    const sel = h('select', { id: 'sample-type' }, [...new Set(types)].map((t) => h('option', { value: t, selected: t === doc.sampleType }, t)));
    sel.addEventListener('change', () => rerun({ sampleType: sel.value }));
    controls.push(h('label', null, 'Sample type ', sel));
  } else {
    const kinds = Object.entries(doc.eventKinds || {}).filter(([, v]) => v && v.events > 0);
    const sel = h('select', { id: 'event-kind' }, kinds.map(([k, v]) => h('option', { value: k, selected: k === doc.eventType },
      `${k} (${v.events} events)`)));
    sel.addEventListener('change', () => rerun({ eventType: sel.value, thread: null }));
    const threads = doc.threads || [];
    const th = h('select', { id: 'thread-filter' }, h('option', { value: '' }, 'all threads'),
      threads.map((t) => h('option', { value: t.name, selected: t.name === doc.thread }, `${t.name} (${t.events})`)));
    if (doc.thread && !threads.some((t) => t.name === doc.thread)) th.append(h('option', { value: doc.thread, selected: true }, doc.thread));
    th.addEventListener('change', () => rerun({ thread: th.value || null }));
    controls.push(h('label', null, 'Event kind ', sel), h('label', null, 'Thread ', th));
  }
  const dl = { ...params };
  const downloads = h('div', { class: 'exports' }, 'Download: ', PROC_FORMATS.map((f) =>
    h('a', { class: 'button', href: procApi.downloadUrl(kind, task.id, f, dl), download: '', dataset: { format: f } }, f)));
  const summary = h('p', { class: 'muted analysis-label' },
    `${KIND_LABEL[kind]} · ${kind === 'pprof' ? 'sample type ' + doc.sampleType : 'event kind ' + doc.eventType}` +
    `${doc.thread ? ' · thread ' + doc.thread : ''}${params.from ? ' · range ' + (params.to - params.from + 1) + ' ms' : ''}` +
    ` · ${(doc.files || []).length} file(s) · total ${doc.total} ${unit}` +
    ` · ${doc.samples} samples`);
  let threadline = null;
  if (tl) {
    const box = h('div', { class: 'threadline-box', id: 'thread-timeline' });
    threadline = { box, tl };
  }
  const rangeNote = params.from ? h('p', { class: 'muted range-label', id: 'jfr-range' },
    `Samples from ${fmtTime(params.from)} to ${fmtTime(params.to)} only (brushed on the threads' timeline)`) : null;
  const errors = (doc.errors || []).length ? h('p', { class: 'error' }, 'Files that could not be read: ',
    doc.errors.map((e) => `${e.instanceName || e.id}: ${e.message || e.error || JSON.stringify(e)}`).join('; ')) : null;
  ctx.clearViews();
  ctx.addView(analysisView(card, doc, {
    weightOnly: true,
    unit: unit || 'weight',
    columns: [`Total (${short})`, `Self (${short})`, 'Total'],
    title: 'Stack',
    controls,
    prelude: [summary, doc.tip ? h('p', { class: 'tip' }, doc.tip) : null, errors,
      threadline ? h('h3', null, 'Threads over time') : null, threadline ? threadline.box : null, rangeNote, downloads],
    emptyText: 'No samples of this kind in the chosen files.',
  }));
  if (threadline && threadline.box.isConnected) {
    const view = threadTimelineView(threadline.box, threadline.tl, (from, to) => {
      rerun({ from: from === null ? null : String(from), to: to === null ? null : String(to) });
    });
    if (params.from) view.setRange(params.from, params.to);
    ctx.addView(view);
  }
}
