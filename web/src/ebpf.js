// ebpf.js - agent-started eBPF profiles on the Process profiles page: the ON_CPU / OFF_CPU
// profiles an agent starts when its own continuous-profiling policy triggers
// (ContinuousProfilingService.reportProfilingTask), whose stacks arrive through
// EBPFProfilingService and are stored under /api/v1/ebpf (docs/api.md). They have no task of
// their own: they are listed by their triggers (taskKind "ebpf"), as `skyprof ebpf list` does.
// Route (deep-linkable):
//   #/process/ebpf/ID[?processId=P]   the profile: its trigger, the service's registered
//                                     processes (stacks per process), the stacks as tree +
//                                     flame graph (analysis.js), of one process when chosen,
//                                     and downloads (pprof, collapsed, speedscope, html)
import { ebpfApi } from './api.js';
import { h, fill, fmtTime } from './dom.js';
import { analysisView } from './analysis.js';

const FORMATS = ['pprof', 'collapsed', 'speedscope', 'html'];
const enc = encodeURIComponent;
const UNIT_SHORT = { count: 'samples', nanoseconds: 'ns' };

// The rows of the Process page's third list: one per agent-started profile, newest first.
export function ebpfList(triggers, selectedId) {
  if (!triggers.length) {
    return h('p', { class: 'muted', id: 'ebpf-none' }, 'No profile started by an agent-side policy yet.');
  }
  return h('table', { class: 'grid ebpf-task-list' },
    h('thead', null, h('tr', null, h('th', null, 'Target'), h('th', null, 'Service'), h('th', null, 'Instance'),
      h('th', null, 'Triggered'))),
    h('tbody', null, triggers.map((t) => h('tr', {
      class: 'ebpf-task' + (t.taskId === selectedId ? ' selected' : ''), dataset: { id: t.taskId },
      title: `process ${t.process || '?'}: ${t.text || '(no cause)'}`,
    },
    h('td', null, h('a', { href: `#/process/ebpf/${enc(t.taskId)}` }, t.target || 'eBPF')),
    h('td', null, t.service), h('td', null, t.instance || ''), h('td', null, fmtTime(t.time))))));
}

function details(id, trig, doc) {
  const kv = (k, v) => [h('dt', null, k), h('dd', null, v)];
  const t = trig || {};
  return h('dl', { class: 'kv ebpf-details' },
    kv('Profile', h('code', null, id)),
    kv('Target', t.target || (doc && doc.target) || '-'),
    kv('Service', t.service || '-'), kv('Instance', t.instance || '-'), kv('Process', t.process || '-'),
    kv('Started by', t.source === 'agent' ? 'the agent\'s continuous-profiling policy' : (t.source || '-')),
    kv('Triggered', fmtTime(t.time)),
    kv('Cause', t.text || '(no cause)'),
    (t.causes || []).length > 1 ? kv('Also', t.causes.slice(1).map((c) => h('div', null, c.text))) : null,
    doc ? kv('Uploads', `${fmtTime(doc.firstUpload)} … ${fmtTime(doc.lastUpload)}`) : kv('Uploads', 'none yet'),
    doc ? kv('Total', `${doc.total} ${doc.unit} (${doc.sampleType})`) : null,
    doc ? kv('Distinct stacks', String(doc.stacks)) : null,
    doc && doc.partial ? kv('Partial', 'the profile budget was reached: later stacks were not kept') : null);
}

// The service's registered processes, with the stacks each uploaded to this profile; a process
// that uploaded stacks but is not registered (any more) is listed by its id.
function processTable(id, procs, doc, chosen) {
  const stacks = (doc && doc.processes) || {};
  const rows = procs.map((p) => ({ id: p.id, name: p.processName, instance: p.instanceName, pid: p.pid,
    lastPing: p.lastPing, st: stacks[p.id] }));
  for (const pid of Object.keys(stacks)) {
    if (!procs.some((p) => p.id === pid)) rows.push({ id: pid, name: '(not registered)', st: stacks[pid] });
  }
  if (!rows.length) return h('p', { class: 'muted' }, 'No process of this service has registered.');
  const link = (pid, text) => h('a', { href: `#/process/ebpf/${enc(id)}` + (pid ? '?processId=' + enc(pid) : '') }, text);
  return h('table', { class: 'grid ebpf-processes' },
    h('thead', null, h('tr', null, h('th', null, 'Process'), h('th', null, 'Instance'), h('th', { class: 'num' }, 'PID'),
      h('th', null, 'Last ping'), h('th', { class: 'num' }, 'On-CPU stacks'), h('th', { class: 'num' }, 'Off-CPU stacks'),
      h('th', null, ''))),
    h('tbody', null, rows.map((r) => h('tr', { class: r.id === chosen ? 'selected' : '', dataset: { process: r.id } },
      h('td', { title: r.id }, r.name), h('td', null, r.instance || ''), h('td', { class: 'num' }, r.pid ? String(r.pid) : ''),
      h('td', null, fmtTime(r.lastPing)),
      h('td', { class: 'num' }, r.st ? String(r.st.onCpuStacks) : '-'),
      h('td', { class: 'num' }, r.st ? String(r.st.offCpuStacks) : '-'),
      h('td', null, !r.st ? '' : r.id === chosen ? link('', 'all processes') : link(r.id, 'only this one'))))));
}

// The profile's detail card and analysis card in `right`.
// ctx: {current(), addTimer(id), addView(v), clearViews(), showError(e)}
export async function ebpfDetail(ctx, right, id, trig, query) {
  const chosen = query.get('processId') || '';
  const params = chosen ? { processId: chosen } : {};
  const load = () => ebpfApi.analyze(id, params).catch((e) => {
    if (e.status === 404) return null;
    throw e;
  });
  const [doc0, procs] = await Promise.all([load(),
    trig && trig.service ? ebpfApi.processes(trig.service).catch(() => []) : []]);
  if (!ctx.current()) return;
  let doc = doc0;
  const card = h('section', { class: 'card proc-detail ebpf-detail' });
  const resultCard = h('section', { class: 'card analysis-card proc-analysis ebpf-analysis' });
  right.append(card, resultCard);
  const show = () => {
    fill(card,
      h('div', { class: 'card-head' }, h('h2', null, 'eBPF profile ', (trig && trig.target) || (doc && doc.target) || '',
        ' ', h('span', { class: 'muted' }, (trig && trig.service) || '')), h('span', { class: 'muted refresh-note' })),
      trig ? null : h('p', { class: 'muted' }, 'No trigger names this profile (its trigger may have expired).'),
      details(id, trig, doc), h('h3', null, 'Processes'), processTable(id, procs, doc, chosen));
    if (!doc) {
      fill(resultCard, h('h2', null, 'Profile'), h('p', { class: 'muted empty-analysis' }, chosen
        ? 'No stacks of this process in this profile.'
        : 'No stacks uploaded yet: the profile appears when the agent uploads its stacks.'));
      return;
    }
    const short = UNIT_SHORT[doc.unit] || doc.unit || 'weight';
    const downloads = h('div', { class: 'exports' }, 'Download: ', FORMATS.map((f) =>
      h('a', { class: 'button', href: ebpfApi.downloadUrl(id, f, params), download: '', dataset: { format: f } }, f)));
    const summary = h('p', { class: 'muted analysis-label' },
      `eBPF ${doc.target} · ${doc.sampleType}${chosen ? ' · process ' + chosen.slice(0, 12) : ' · every process'}` +
      ` · total ${doc.total} ${doc.unit} · ${doc.stacks} distinct stacks`);
    ctx.clearViews();
    ctx.addView(analysisView(resultCard, doc, {
      weightOnly: true,
      unit: short,
      columns: [`Total (${short})`, `Self (${short})`, 'Total'],
      title: 'Stack',
      prelude: [summary, downloads],
      emptyText: 'No stacks in this profile.',
    }));
  };
  show();
  // Until the agent's first upload, look again every 3 s (the profile runs for seconds).
  if (!doc && !chosen) {
    card.querySelector('.refresh-note').textContent = 'waiting for the agent\'s stacks';
    const timer = setInterval(async () => {
      try {
        const d = await load();
        if (!ctx.current() || !d) return;
        clearInterval(timer);
        doc = d;
        show();
      } catch (e) {
        if (ctx.current()) ctx.showError(e);
      }
    }, 3000);
    ctx.addTimer(timer);
  }
}
