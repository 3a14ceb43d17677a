// api.js - the skyprofd HTTP API as used by the UI. Every call resolves to parsed JSON or
// throws an ApiError carrying the HTTP status and the server's {error} / {errorReason, field}.

export class ApiError extends Error {
  constructor(message, status, body) {
    super(message);
    this.status = status;
    this.body = body || null;
  }
}

const TOKEN_KEY = 'skyprof.apiToken';

export function getToken() {
  try { return localStorage.getItem(TOKEN_KEY) || ''; } catch { return ''; }
}

export function setToken(t) {
  try { if (t) localStorage.setItem(TOKEN_KEY, t); else localStorage.removeItem(TOKEN_KEY); } catch { /* private mode */ }
}

async function call(method, path, body, meta) {
  const headers = { Accept: 'application/json' };
  const token = getToken();
  if (token) headers.Authorization = 'Bearer ' + token;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let res;
  try {
    res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (e) {
    throw new ApiError('cannot reach skyprofd (' + e.message + ')', 0);
  }
  const text = await res.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = null; }
  }
  if (!res.ok) {
    const msg = (data && (data.errorReason || data.error)) || text || res.statusText;
    throw new ApiError(msg + ' (HTTP ' + res.status + ')', res.status, data);
  }
  if (data === null && text) throw new ApiError('invalid JSON from ' + path, res.status);
  if (meta) meta.nextCursor = res.headers.get('X-Next-Cursor');
  return data;
}

// Listing routes answer one page (docs/api.md "Pagination"): follow X-Next-Cursor and join the
// pages, up to maxPages (the UI shows at most that many rows' worth).
async function callAll(path, maxPages = 20) {
  let all = [];
  let cursor = null;
  for (let i = 0; i < maxPages; i++) {
    const meta = {};
    const sep = path.includes('?') ? '&' : '?';
    const page = await call('GET', cursor ? path + sep + 'cursor=' + encodeURIComponent(cursor) : path, undefined, meta);
    if (!Array.isArray(page)) return page;
    all = all.concat(page);
    cursor = meta.nextCursor;
    if (!cursor) break;
  }
  return all;
}

const enc = encodeURIComponent;

export const api = {
  services: () => callAll('/api/v1/services'),
  instances: (svc) => callAll('/api/v1/services/' + enc(svc) + '/instances'),
  endpoints: (svc) => call('GET', '/api/v1/services/' + enc(svc) + '/endpoints?limit=50'),
  endpointStats: (svc, windowS) => call('GET', '/api/v1/services/' + enc(svc) + '/endpoints/stats' + (windowS ? '?window=' + windowS : '')),
  tasks: (service, endpoint) => {
    const q = new URLSearchParams();
    if (service) q.set('service', service);
    if (endpoint) q.set('endpointName', endpoint);
    const qs = q.toString();
    return callAll('/api/v1/profile/tasks' + (qs ? '?' + qs : ''));
  },
  task: (id) => call('GET', '/api/v1/profile/tasks/' + enc(id)),
  taskLogs: (id) => callAll('/api/v1/profile/tasks/' + enc(id) + '/logs'),
  segments: (id) => callAll('/api/v1/profile/tasks/' + enc(id) + '/segments?limit=1000'),
  createTask: (req) => call('POST', '/api/v1/profile/tasks', req),
  cancelTask: (id) => call('POST', '/api/v1/profile/tasks/' + enc(id) + '/cancel', {}),
  // params: {granularity: 'functions'} for the tree built on functions (docs/api.md "Analysis")
  analyze: (queries, params) => call('POST', '/api/v1/profile/analyze' + qs(params), queries),
  analyzeTask: (id, params) => call('GET', '/api/v1/profile/tasks/' + enc(id) + '/analyze' + qs(params)),
  analyzeSegment: (seg, params) => call('GET', '/api/v1/profile/segments/' + enc(seg) + '/analyze' + qs(params)),
};

// Process profiles (pprof and async-profiler/JFR tasks): kind is 'pprof' or 'async'.
const PROC_BASE = { pprof: '/api/v1/pprof/tasks', async: '/api/v1/async-profiler/tasks' };
const qs = (params) => {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) if (v !== undefined && v !== null && v !== '') q.set(k, v);
  const s = q.toString();
  return s ? '?' + s : '';
};
export const procApi = {
  tasks: (kind, service) => call('GET', PROC_BASE[kind] + qs({ service })),
  task: (kind, id) => call('GET', PROC_BASE[kind] + '/' + enc(id)),
  create: (kind, req) => call('POST', PROC_BASE[kind], req),
  cancel: (kind, id) => call('POST', PROC_BASE[kind] + '/' + enc(id) + '/cancel', {}),
  analyze: (kind, id, params) => call('GET', PROC_BASE[kind] + '/' + enc(id) + '/analyze' + qs(params)),
  timeline: (id, params) => call('GET', PROC_BASE.async + '/' + enc(id) + '/timeline' + qs(params)),
  downloadUrl: (kind, id, format, params) => PROC_BASE[kind] + '/' + enc(id) + '/download' + qs({ format, ...params }),
  fileUrl: (kind, id, fileId) => PROC_BASE[kind] + '/' + enc(id) + '/files/' + enc(fileId),
};

// Agent-started (threshold-triggered) eBPF profiles: ON_CPU/OFF_CPU stacks under /api/v1/ebpf.
// They are listed by their triggers (taskKind "ebpf"), as `skyprof ebpf list` does.
const EBPF_BASE = '/api/v1/ebpf/tasks/';
export const ebpfApi = {
  triggers: async (params) => {
    const doc = await call('GET', '/api/v1/profile/triggers' + qs({ limit: 10000, ...params }));
    return ((doc && doc.triggers) || []).filter((t) => t.taskKind === 'ebpf' && t.taskId);
  },
  processes: (service) => call('GET', '/api/v1/ebpf/processes' + qs({ service })),
  analyze: (id, params) => call('GET', EBPF_BASE + enc(id) + '/analyze' + qs(params)),
  downloadUrl: (id, format, params) => EBPF_BASE + enc(id) + '/download' + qs({ format, ...params }),
};

export const EXPORT_FORMATS = ['pprof', 'collapsed', 'speedscope', 'html', 'json'];

export function taskExportUrl(id, format) {
  return '/api/v1/profile/tasks/' + enc(id) + '/export?format=' + format;
}

export function segmentExportUrl(seg, format, start, end) {
  let u = '/api/v1/profile/segments/' + enc(seg) + '/export?format=' + format;
  if (start != null && end != null) u += '&start=' + start + '&end=' + end;
  return u;
}

// Compare and timeline (compare.js, timeline.js) and the process-task lists their pickers use.
export const cmpApi = {
  compare: (body) => call('POST', '/api/v1/profile/compare', body),
  timeline: (seg) => call('GET', '/api/v1/profile/segments/' + enc(seg) + '/timeline'),
  pprofTasks: () => call('GET', '/api/v1/pprof/tasks'),
  asyncTasks: () => call('GET', '/api/v1/async-profiler/tasks'),
};
