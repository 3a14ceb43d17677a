// ui_test.mjs - browser test of the web UI against a real skyprofd and a real data source:
// the C demo service with libskyprof (SKP_AGENT=demo), the seed scenario's
// examples/python/seed_app.py under the real Python agent (SKP_AGENT=seed: readable frames
// do_POST seed_app.py:44, the agent's own frames hidden by default, the request timeline, the
// exports' readable titles), or tests/ui/fake_agent.py, a SkyWalking v3 agent stand-in speaking
// gRPC (SKP_AGENT=fake). Drives Chromium through playwright-core
// (no browser download: /usr/bin/chromium), creates a task through the form (a validation
// error must appear beside its field), waits for sampled segments, runs Exclude Children
// analysis and checks the stack tree rows and flame graph frames by name; screenshots go to
// $SKP_OUT (<build>/test-output/ui). Prints "N passed, N failed".
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { frameLabel } from '../../web/src/frames.js';
import { harnessPorts, listeningPort, skyprofdCommand, waitFor } from './uilib.mjs';

const env = process.env;
const need = (k) => { if (!env[k]) { console.error(`missing env ${k}`); process.exit(2); } return env[k]; };
const WEB_DIST = need('SKP_WEB_DIST');
const WEB_DIR = need('SKP_WEB_DIR');
const OUT = need('SKP_OUT');
const MODE = ['demo', 'seed'].includes(env.SKP_AGENT) ? env.SKP_AGENT : 'fake';
const API_TOKEN = 'ui-test-token';
const require = createRequire(path.join(WEB_DIR, 'package.json'));
const { chromium } = require('playwright-core');

mkdirSync(OUT, { recursive: true });
const tmp = mkdtempSync(path.join(os.tmpdir(), 'skp-ui-'));
const procs = [];
let passed = 0;
let failed = 0;

function start(name, cmd, args, extraEnv, stdin = 'ignore') {
  const p = spawn(cmd, args, { env: { ...env, ...extraEnv }, stdio: [stdin, 'pipe', 'pipe'] });
  p.out = '';
  p.name = name;
  p.stdout.on('data', (d) => { p.out += d; });
  p.stderr.on('data', (d) => { p.out += d; });
  procs.push(p);
  return p;
}

async function step(name, fn) {
  const t0 = Date.now();
  try {
    await fn();
    passed++;
    console.log(`ok   ${name} (${((Date.now() - t0) / 1000).toFixed(2)}s)`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name} (${((Date.now() - t0) / 1000).toFixed(2)}s)\n${e.stack || e}`);
  }
}

async function stopAll() {
  for (const p of procs.reverse()) {
    if (p.exitCode === null && p.signalCode === null) {
      p.kill('SIGTERM');
      await Promise.race([new Promise((r) => p.once('exit', r)), new Promise((r) => setTimeout(r, 15000))]);
      if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
    }
    for (const marker of ['ERROR: AddressSanitizer', 'runtime error:', 'ERROR: LeakSanitizer']) {
      if (p.out.includes(marker)) {
        failed++;
        console.log(`FAIL ${p.name}: sanitizer report\n${p.out.slice(-4000)}`);
        break;
      }
    }
  }
}

// ---- the system under test ----
// skyprofd through the tests' one launcher (tests/harness/skp_harness.py start_skyprofd), which
// prints its ports as one JSON line and copies skyprofd's output to stderr when it stops.
const ports = await harnessPorts(start(...skyprofdCommand(tmp, '--web-root', WEB_DIST,
  '--api-token', API_TOKEN)));
const BASE = `http://127.0.0.1:${ports.http}`;

let SERVICE;
let ENDPOINT;
let demoPort = 0;
let expectInclude;   // frames the Include Children tree must show
let expectExclude;   // frames the Exclude Children tree must show
let forbidExclude;   // frames it must not show
let groupedName;     // a function name after "group by function"
let labelOf;         // [signature regex, function, location regex] of a frame the labels must show
let calledBy;        // [focused function regex, a caller regex]
if (MODE === 'demo') {
  SERVICE = 'ui-demo';
  ENDPOINT = '/';
  const demo = start('demo_service', need('SKP_DEMO_SERVICE'), ['--port', '0'], {
    SW_AGENT_NAME: SERVICE,
    SW_AGENT_COLLECTOR_BACKEND_SERVICES: `127.0.0.1:${ports.grpc}`,
    SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL: '1',
  });
  demoPort = await listeningPort(demo, 'demo_service:', 30000);
  // Sampling is statistical: one request spends 60 ms in method3 (20 of them in method1) and
  // ~500 ms elsewhere, so only frames seen in every profiled request are required.
  expectInclude = [/^handle_seed_request \(/, /^method3 \(/];
  expectExclude = expectInclude;
  forbidExclude = [];
  groupedName = /^method3 \(demo_service\.c\)$/;
  labelOf = [/^method3 \(demo_service\.c:\d+\)$/, 'method3', /^demo_service\.c:\d+$/];
  calledBy = [/^method3 \(/, /^handle_seed_request \(/];
} else if (MODE === 'seed') {
  // The seed scenario as a user runs it (make demo): seed_app.py with the skyprof package built
  // for the system interpreter, its service "provider", endpoint "/".
  SERVICE = 'provider';
  ENDPOINT = '/';
  const preload = env.SKP_SEED_PRELOAD ? { LD_PRELOAD: env.SKP_SEED_PRELOAD, PYTHONMALLOC: 'malloc',
    ASAN_OPTIONS: 'detect_leaks=0:abort_on_error=0', UBSAN_OPTIONS: 'print_stacktrace=1:halt_on_error=1' } : {};
  const app = start('seed_app', need('SKP_SEED_PYTHON'),
    [path.join(need('SKP_SOURCE_DIR'), 'examples', 'python', 'seed_app.py'), '0'], {
      PYTHONPATH: need('SKP_SEED_PYTHONPATH') + (env.PYTHONPATH ? ':' + env.PYTHONPATH : ''),
      PYTHONUNBUFFERED: '1',
      SEED_LOG_LEVEL: 'INFO',
      SW_AGENT_COLLECTOR_BACKEND_SERVICES: `127.0.0.1:${ports.grpc}`,
      SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL: '1',
      ...preload,
    });
  demoPort = await listeningPort(app, 'seed_app:', 60000);
  // do_POST calls method3() at line 43 (method3, line 28 -> method2 -> method1), then sleeps
  // 0.5 s at line 44: most dumps are "do_POST  seed_app.py:44".
  // (method3 by any of its lines: 28 is its own 20 ms, 29 the 40 ms in method2 below it.)
  expectInclude = [/seed_app\.py\.method3: 2[89]$/, /\/examples\/python\/seed_app\.py\.do_POST: 44$/];
  expectExclude = expectInclude;
  forbidExclude = [];
  groupedName = /seed_app\.py\.method3$/;
  labelOf = [/seed_app\.py\.do_POST: 4[34]$/, 'do_POST', /^seed_app\.py:4[34]$/];
  calledBy = [/seed_app\.py\.method3: 2[89]$/, /seed_app\.py\.do_POST: 43$/];
} else {
  SERVICE = 'ui-shop';
  ENDPOINT = '/orders';
  start('fake_agent', env.SKP_PYTHON || '/usr/bin/python3',
    [path.join(path.dirname(new URL(import.meta.url).pathname), 'fake_agent.py'),
      `127.0.0.1:${ports.grpc}`, SERVICE, 'ui-shop-1', ENDPOINT, '3'], {});
  expectInclude = [/\.method3: 50$/, /\.method2: 40$/, /\.method1: 30$/];
  expectExclude = [/\.handle: 12$/, /\.method3: 50$/, /\.method2: 40$/];
  forbidExclude = [/\.method1: 30$/];
  groupedName = /^\/srv\/shop\/app\.py\.method3$/;
  labelOf = [/\.method3: 50$/, 'method3', /^app\.py:50$/];
  calledBy = [/\.method2: 40$/, /\.method3: 50$/];
}

// Demo mode: keep requests flowing until the task has segments (a request that arrives before
// the agent activates the task is not profiled).
let traffic = false;
async function pumpTraffic() {
  // seed_app serves one request at a time (socketserver.TCPServer): one in flight.
  const conc = MODE === 'seed' ? [1] : [1, 2, 3];
  while (traffic) {
    await Promise.all(conc.map(() => fetch(`http://127.0.0.1:${demoPort}/`, { method: 'POST', body: '{}' })
      .then((r) => r.text()).catch(() => null)));
  }
}

const userDir = mkdtempSync(path.join(os.tmpdir(), 'skp-ui-chromium-'));
const browser = await chromium.launchPersistentContext(userDir, {
  executablePath: '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  viewport: { width: 1440, height: 1000 },
});
const page = browser.pages()[0] || await browser.newPage();
const pageErrors = [];
page.on('pageerror', (e) => pageErrors.push(e.message));
const shot = (name) => page.screenshot({ path: path.join(OUT, `${MODE}-${name}.png`), fullPage: true });
const texts = (sel) => page.$$eval(sel, (els) => els.map((e) => e.textContent));
const frameNames = () => page.$$eval('.flame .frame', (els) => els.map((e) => e.dataset.name));
// Tree rows show a readable label (function first); the full signature is the row's data-sig.
const treeNames = () => page.$$eval('.analysis-card .tree-box .stack-tree tr.node:not([hidden]) td.sig .code', (els) => els.map((e) => e.dataset.sig));
// [data-sig, count] of every tree row of the main view.
const treeCounts = () => page.$$eval('.analysis-card .tree-box .stack-tree tr.node', (rows) => rows.map((r) =>
  [r.querySelector('.code').dataset.sig, Number(r.querySelectorAll('td.num')[2].textContent)]));
const hasAll = (names, res) => res.every((re) => names.some((n) => re.test(n)));
const hasNone = (names, res) => res.every((re) => !names.some((n) => re.test(n)));

let taskId = null;
let excludeUrl = null;

try {
  await step('landing without profiled tasks shows the task list and the create form', async () => {
    await page.goto(BASE + '/');
    await page.waitForURL(/#\/tasks$/, { timeout: 20000 });
    await page.waitForSelector('form.create-task:not([hidden])');
  });

  await step('services view: the agent\'s service and instance with language and properties', async () => {
    await waitFor(async () => {
      await page.goto(BASE + '/#/services');
      await page.waitForSelector('table.services, .card p.muted', { timeout: 5000 });
      return (await texts('table.services td a')).includes(SERVICE);
    }, 30000, 'service listed');
    await page.click(`table.services a:text-is("${SERVICE}")`);
    await page.waitForSelector('table.instances tbody tr');
    const row = (await texts('table.instances tbody tr'))[0];
    if (MODE === 'fake' && !(row.includes('ui-shop-1') && row.includes('python') && row.includes('ui-test-host'))) throw new Error('instance row: ' + row);
    await shot('services');
  });

  await step('without the API token the server\'s refusal is shown; the token box fixes it', async () => {
    await page.goto(BASE + '/#/tasks');
    await page.waitForSelector('form.create-task:not([hidden])');
    await page.fill('#f-service', SERVICE);
    await page.fill('#f-endpointName', ENDPOINT);
    await page.click('form.create-task button[type=submit]');
    await page.waitForFunction(() => document.querySelector('.form-error').textContent.length > 0);
    const msg = await page.textContent('.form-error');
    if (!/401/.test(msg)) throw new Error('form error: ' + msg);
    await page.fill('#api-token', API_TOKEN);
    await page.press('#api-token', 'Enter');
    const stored = await page.evaluate(() => localStorage.getItem('skyprof.apiToken'));
    if (stored !== API_TOKEN) throw new Error('token not stored: ' + stored);
  });

  await step('create form: a validation error appears beside its field', async () => {
    await page.goto(BASE + '/#/tasks');
    await page.waitForSelector('form.create-task:not([hidden])');
    await page.fill('#f-service', SERVICE);
    await page.fill('#f-endpointName', '');
    await page.click('form.create-task button[type=submit]');
    await page.waitForFunction(() => document.querySelector('#err-endpointName').textContent.length > 0);
    const msg = await page.textContent('#err-endpointName');
    if (!/endpoint name cannot be empty/.test(msg)) throw new Error('endpoint error: ' + msg);
    if (!(await page.$('.field.invalid[data-field="endpointName"]'))) throw new Error('field not marked invalid');
    await page.fill('#f-endpointName', ENDPOINT);
    await page.fill('#f-minDurationThreshold', '-1');
    await page.click('form.create-task button[type=submit]');
    await page.waitForFunction(() => document.querySelector('#err-minDurationThreshold').textContent.length > 0);
    if ((await page.textContent('#err-endpointName')) !== '') throw new Error('old error not cleared');
    await shot('form-validation');
  });

  await step('create a task through the form; it is listed with its status', async () => {
    await page.fill('#f-minDurationThreshold', '0');
    await page.selectOption('#f-duration', '5');
    await page.selectOption('#f-dumpPeriod', '10');
    await page.selectOption('#f-maxSamplingCount', '5');
    await page.click('form.create-task button[type=submit]');
    await page.waitForURL(/#\/tasks\/[^/]+$/, { timeout: 15000 });
    taskId = decodeURIComponent(page.url().split('#/tasks/')[1]);
    const row = await page.waitForSelector(`table.task-list tr.task.selected`);
    const t = await row.textContent();
    if (!t.includes(ENDPOINT) || !t.includes(SERVICE) || !/pending|running/.test(t)) throw new Error('task row: ' + t);
  });

  await step('sampled segments appear while the task runs (auto-refresh), logs grouped by instance', async () => {
    if (MODE !== 'fake') { traffic = true; pumpTraffic(); }
    try {
      await page.waitForSelector('table.segments tr.segment', { timeout: 120000 });
    } finally {
      traffic = false;
    }
    await page.waitForSelector('.log-group h4', { timeout: 20000 });
    const ops = await texts('.log-group .op');
    if (!ops.includes('NOTIFIED')) throw new Error('logs: ' + ops);
    const seg = await page.textContent('table.segments tr.segment');
    if (!seg.includes(ENDPOINT)) throw new Error('segment row: ' + seg);
    await shot('task');
  });

  await step('new-task form offers the endpoints seen for the service; a click picks one', async () => {
    await page.goto(BASE + '/#/tasks');
    await page.waitForSelector('form.create-task:not([hidden])');
    await page.fill('#f-endpointName', '');
    await page.fill('#f-service', SERVICE);
    await page.dispatchEvent('#f-service', 'change');
    const pick = await page.waitForSelector(`.endpoint-picks button.endpoint-pick[data-endpoint="${ENDPOINT}"]`, { timeout: 30000 });
    await pick.click();
    const v = await page.inputValue('#f-endpointName');
    if (v !== ENDPOINT) throw new Error('endpoint field after pick: ' + v);
    await shot('endpoint-picks');
    await page.goto(BASE + '/#/tasks/' + encodeURIComponent(taskId));
    await page.waitForSelector('table.segments tr.segment', { timeout: 20000 });
  });

  await step('open a profiled segment: spans marked profiled, analysis shown at once', async () => {
    // Pick a segment whose spans are already reported (the segment report can lag the dumps).
    const segId = await waitFor(async () => {
      const r = await fetch(`${BASE}/api/v1/profile/tasks/${encodeURIComponent(taskId)}/segments`);
      const g = (await r.json()).find((x) => (x.spans || []).some((sp) => sp.profiled));
      return g && g.spans.find((sp) => sp.profiled).segmentId;
    }, 60000, 'a sampled segment with profiled spans');
    await page.click(`table.segments tr.segment[data-segment="${segId}"] a`, { timeout: 30000 });
    await page.waitForSelector('.segment-detail .badge.profiled');
    await page.waitForSelector('.stack-tree tr.node', { timeout: 30000 });
    const names = await treeNames();
    if (!hasAll(names, expectInclude)) throw new Error('include tree: ' + names.join(' | '));
    if (MODE === 'fake') {
      const spans = await page.$$('.spans tbody tr');
      if (spans.length !== 3) throw new Error('spans: ' + spans.length);
    }
  });

  if (MODE === 'seed') {
    await step('seed: the request timeline, one column per dump under the span bar, coloured by function', async () => {
      await page.waitForSelector('.timeline-card:not([hidden]) canvas.timeline-dumps', { timeout: 30000 });
      const span = await page.textContent('.timeline-span');
      if (!span.startsWith('/ ·')) throw new Error('span bar: ' + span);
      const seg = /segments\/([^?/]+)/.exec(page.url())[1];
      const tl = await (await fetch(`${BASE}/api/v1/profile/segments/${seg}/timeline`)).json();
      const info = await page.textContent('.timeline-range');
      if (!info.startsWith(`${tl.snapshots.length} dumps`) || tl.snapshots.length < 10) throw new Error(`timeline: ${info} (API ${tl.snapshots.length})`);
      // Leaves: do_POST's sleep line for most dumps, method1..3 for the first 60 ms.
      const keys = await page.$$eval('.timeline-key', (els) => els.map((e) => [e.dataset.name, e.textContent]));
      const post = keys.find(([n]) => /seed_app\.py\.do_POST$/.test(n));
      if (!post || !post[1].startsWith('do_POST  seed_app.py') || !keys.some(([n]) => /seed_app\.py\.method\d$/.test(n))) throw new Error('legend: ' + JSON.stringify(keys));
      await page.locator('.timeline-card').screenshot({ path: path.join(OUT, 'seed-timeline.png') });
    });
  }

  await step('Exclude Children analysis: tree rows and flame graph frames by name', async () => {
    await page.check('#mode-exclude');
    await page.click('#analyze');
    await page.waitForFunction(() => /Exclude Children/.test(document.querySelector('.analysis-label')?.textContent || ''));
    await page.waitForSelector('.stack-tree tr.node');
    const names = await treeNames();
    if (!hasAll(names, expectExclude) || !hasNone(names, forbidExclude)) throw new Error('exclude tree: ' + names.join(' | '));
    if (MODE === 'fake' && !/2 time ranges/.test(await page.textContent('.analysis-label'))) throw new Error('ranges: ' + await page.textContent('.analysis-label'));
    const frames = await frameNames();
    if (!frames.includes('all') || !hasAll(frames, expectExclude) || !hasNone(frames, forbidExclude)) throw new Error('flame frames: ' + frames.join(' | '));
    const nums = await page.$$eval('.stack-tree tr.node', (rows) => rows.map((r) => [...r.querySelectorAll('td.num')].map((c) => Number(c.textContent))));
    if (!nums.every((n) => n.length === 3 && n.every((v) => Number.isFinite(v)))) throw new Error('numbers: ' + JSON.stringify(nums));
    if ((await page.$$('.stack-tree tr.top-slow')).length < 1) throw new Error('no top-slow highlight');
    excludeUrl = page.url();
    if (!/mode=exclude/.test(excludeUrl)) throw new Error('url: ' + excludeUrl);
    await shot('segment-exclude');
  });

  await step('flame graph: hover tooltip, click to zoom, search', async () => {
    const target = (await frameNames()).find((n) => expectExclude[1].test(n));
    const el = page.locator(`.flame .frame[data-name="${target}"]:not(.ancestor)`).first();
    await el.hover();
    const tip = await page.textContent('.flame-tip');
    if (!/dump count: \d+/.test(tip) || !/self: -?\d+/.test(tip) || !/of total: [\d.]+%/.test(tip) ||
        !tip.includes(target) || !tip.startsWith(labelOf[1])) throw new Error('tip: ' + tip);
    await el.click();
    const chartW = await page.$eval('.flame-chart', (c) => c.clientWidth);
    const w = await page.locator(`.flame .frame[data-name="${target}"]`).last().evaluate((e) => e.getBoundingClientRect().width);
    if (w < chartW * 0.95) throw new Error(`zoomed width ${w} of ${chartW}`);
    await page.click('.flame-reset');
  });

  await step('labels show the function first, a short location second, the signature on hover', async () => {
    const row = page.locator('.analysis-card .tree-box .stack-tree tr.node .code').filter({ hasText: labelOf[1] }).first();
    const sig = await row.getAttribute('data-sig');
    if (!labelOf[0].test(sig) || (await row.getAttribute('title')) !== sig) throw new Error('row sig/title: ' + sig);
    const fn = await row.locator('.fn').textContent();
    const loc = await row.locator('.loc').textContent();
    if (fn !== labelOf[1] || !labelOf[2].test(loc)) throw new Error(`label: "${fn}" "${loc}"`);
    // every flame box wide enough for text shows the same readable label (or nothing when narrow)
    const boxes = await page.$$eval('.flame .frame:not(.ancestor)', (els) => els.map((e) => [e.dataset.name, e.textContent]));
    const bad = boxes.filter(([name, text]) => name !== 'all' && text !== '' && text !== frameLabel(name));
    if (bad.length || !boxes.some(([name, text]) => name !== 'all' && text !== '')) throw new Error('flame box texts: ' + JSON.stringify(bad.length ? bad : boxes));
    // the details pane: a click on the label shows the full signature
    await row.click();
    await page.waitForSelector('#frame-details:not([hidden])');
    if ((await page.textContent('#frame-details .full-sig')) !== sig) throw new Error('details: ' + await page.textContent('#frame-details'));
  });

  await step('search highlights frames in the tree and the flame graph and reports their share', async () => {
    await page.fill('#frame-search', 'method3');
    await page.waitForFunction(() => /^method3: [\d.]+ % of samples/.test(document.querySelector('#search-share').textContent));
    const share = await page.textContent('#search-share');
    const m = /^method3: ([\d.]+) %/.exec(share);
    // expected from the tree itself: method3's rows (outermost) over the roots' total
    const rows = await treeCounts();
    const depthOf = await page.$$eval('.analysis-card .tree-box .stack-tree tr.node', (rs) => rs.map((r) => Number(r.dataset.depth)));
    const total = rows.filter((_, i) => depthOf[i] === 0).reduce((a, r) => a + r[1], 0);
    const hits = rows.filter((r) => /method3/.test(r[0])).reduce((a, r) => a + r[1], 0);
    if (Math.abs(Number(m[1]) - (100 * hits) / total) > 0.51) throw new Error(`share ${share} vs ${hits}/${total}`);
    if (!(await page.$$('.flame .frame.match')).length) throw new Error('no flame match');
    if (!(await page.$$('.stack-tree tr.match')).length) throw new Error('no tree match');
    if (!/[?&]q=method3/.test(page.url())) throw new Error('search not in the URL: ' + page.url());
    await shot('search');
    // keyboard: Escape clears the search, "/" focuses the box
    await page.locator('#frame-search').press('Escape');
    if ((await page.inputValue('#frame-search')) !== '' || (await page.$$('.flame .frame.match')).length) throw new Error('Esc did not clear');
    await page.keyboard.press('/');
    if (!(await page.evaluate(() => document.activeElement && document.activeElement.id === 'frame-search'))) throw new Error('"/" did not focus the search');
    await page.locator('#frame-search').press('Escape');
  });

  await step('focus on a frame shows its callers (called by) and callees', async () => {
    const sig = (await treeNames()).find((x) => calledBy[0].test(x));
    await page.locator(`.analysis-card .tree-box .code[data-sig="${sig}"]`).first().click();
    await page.click('#focus-frame');
    await page.waitForSelector('#focus-view:not([hidden]) .focus-callers tr.node');
    const callers = await page.$$eval('#focus-view .focus-callers tr.node .code', (els) => els.map((e) => e.dataset.sig));
    if (callers[0] !== sig || !callers.slice(1).some((c) => calledBy[1].test(c))) throw new Error('callers: ' + callers.join(' | '));
    const callees = await page.$$eval('#focus-view .focus-callees tr.node .code', (els) => els.map((e) => e.dataset.sig));
    if (callees[0] !== sig) throw new Error('callees: ' + callees.join(' | '));
    if (!page.url().includes('focus=')) throw new Error('focus not in the URL');
    await shot('focus');
    // a deep link restores search and focus
    const url = page.url().replace(/([?&])q=[^&]*&?/, '$1') + '&q=' + encodeURIComponent(labelOf[1]);
    const p2 = await browser.newPage();
    await p2.goto(url);
    await p2.waitForSelector('#focus-view:not([hidden]) .focus-callers tr.node', { timeout: 30000 });
    await p2.waitForFunction((fn) => document.querySelector('#search-share').textContent.startsWith(fn + ':'), labelOf[1]);
    if ((await p2.inputValue('#frame-search')) !== labelOf[1]) throw new Error('deep-linked search');
    await p2.close();
    await page.keyboard.press('Escape');
    await page.waitForSelector('#focus-view', { state: 'hidden' });
  });

  await step('hide agent frames (on by default) folds skyprof\'s frames into their caller, shares unchanged', async () => {
    if (!(await page.isChecked('#hide-agent'))) throw new Error('switch off by default');
    const hidden = await treeCounts();
    const isAgent = (sig) => /\/skyprof\/instrument\//.test(sig);
    if (hidden.some((r) => isAgent(r[0]))) throw new Error('agent frame shown: ' + hidden.map((r) => r[0]).join(' | '));
    await page.uncheck('#hide-agent');
    const shown = await treeCounts();
    if (!page.url().includes('agent=0')) throw new Error('agent switch not in the URL');
    if (MODE !== 'demo' && !shown.some((r) => isAgent(r[0]))) throw new Error('agent frame not shown when the switch is off');
    // the weight of every application frame is the same either way (summed over its rows)
    const sumBy = (rows) => rows.filter((r) => !isAgent(r[0])).reduce((m, [s, c]) => m.set(s, (m.get(s) || 0) + c), new Map());
    const a = sumBy(hidden);
    const b = sumBy(shown);
    if (a.size !== b.size || [...a].some(([s, c]) => b.get(s) !== c)) throw new Error('weights differ: ' + JSON.stringify([...a]) + ' vs ' + JSON.stringify([...b]));
    await shot('agent-frames-shown');
    await page.keyboard.press('a');
    if (!(await page.isChecked('#hide-agent')) && MODE !== 'demo') throw new Error('"a" did not toggle the switch');
    if (!(await page.isChecked('#hide-agent'))) await page.check('#hide-agent');
  });

  await step('tree: collapse and expand', async () => {
    const before = (await page.$$('.stack-tree tr.node:not([hidden])')).length;
    await page.click('.tree-tools button[data-act="collapse"]');
    const collapsed = (await page.$$('.stack-tree tr.node:not([hidden])')).length;
    await page.click('.tree-tools button[data-act="expand"]');
    const after = (await page.$$('.stack-tree tr.node:not([hidden])')).length;
    if (!(collapsed < before && after === before)) throw new Error(`${before} ${collapsed} ${after}`);
    // The first root's toggle hides its subtree and shows it again.
    await page.click('.stack-tree tr.node >> nth=0 >> .toggle');
    const folded = (await page.$$('.stack-tree tr.node:not([hidden])')).length;
    await page.click('.stack-tree tr.node >> nth=0 >> .toggle');
    const unfolded = (await page.$$('.stack-tree tr.node:not([hidden])')).length;
    if (!(folded < before && unfolded === before)) throw new Error(`toggle: ${before} ${folded} ${unfolded}`);
  });

  await step('group by function shows the server\'s tree built on functions', async () => {
    // The durations of a function are computed by the server on the function tree
    // (?granularity=functions), not summed from the line rows.
    const resp = page.waitForResponse((r) => r.url().includes('granularity=functions'), { timeout: 15000 });
    await page.check('#group-by-function');
    const doc = await (await resp).json();
    await page.waitForFunction((src) => [...document.querySelectorAll('.analysis-card .tree-box .stack-tree tr.node td.sig .code')]
      .some((e) => new RegExp(src).test(e.dataset.sig)), groupedName.source, { timeout: 15000 });
    const rows = await page.$$eval('.analysis-card .tree-box .stack-tree tr.node', (rs) => rs.map((r) =>
      [r.querySelector('.code').dataset.sig, Number(r.querySelectorAll('td.num')[0].textContent)]));
    const served = doc.trees.flatMap((t) => t.elements).filter((e) => groupedName.test(e.codeSignature)).map((e) => Number(e.duration));
    const shown = rows.filter(([s]) => groupedName.test(s)).map(([, d]) => d);
    if (!shown.length || !shown.every((d) => served.includes(d))) throw new Error('grouped durations ' + JSON.stringify(shown) + ' vs server ' + JSON.stringify(served));
    await page.uncheck('#group-by-function');
    await page.waitForFunction((src) => ![...document.querySelectorAll('.analysis-card .tree-box .stack-tree tr.node td.sig .code')]
      .some((e) => new RegExp(src).test(e.dataset.sig)), groupedName.source, { timeout: 15000 });
  });

  await step('export links download pprof (gzip) and a self-contained HTML flame graph', async () => {
    const hrefs = await page.$$eval('.exports a', (as) => Object.fromEntries(as.map((a) => [a.dataset.format, a.href])));
    for (const f of ['pprof', 'collapsed', 'speedscope', 'html', 'json']) if (!hrefs[f]) throw new Error('no link for ' + f);
    const p = await page.request.get(hrefs.pprof);
    const body = await p.body();
    if (p.status() !== 200 || body[0] !== 0x1f || body[1] !== 0x8b) throw new Error('pprof ' + p.status());
    const html = await (await page.request.get(hrefs.html)).text();
    if (!html.startsWith('<!DOCTYPE html>') || /https?:\/\//.test(html)) throw new Error('html export');
    // The exported file renders its flame graph offline (no network: set as the page content).
    const p3 = await browser.newPage();
    await p3.route('**/*', (r) => r.abort());
    await p3.setContent(html);
    await p3.waitForSelector('.f[data-name]');
    const names = await p3.$$eval('.f', (els) => els.map((e) => e.dataset.name));
    // Readable titles: every labelled box reads as the UI's label of its signature (the server's
    // C parser and frames.js agree), the full signature stays in data-name and the tooltip.
    const boxes = await p3.$$eval('.f', (els) => els.map((e) => [e.dataset.name, e.textContent]));
    const wrong = boxes.filter(([n, t]) => n !== 'all' && t !== '' && t !== frameLabel(n));
    if (wrong.length || !boxes.some(([n, t]) => n !== 'all' && t !== '')) throw new Error('html export titles: ' + JSON.stringify(wrong.length ? wrong : boxes));
    if (MODE === 'seed') {
      const texts = boxes.map(([, t]) => t);
      if (!texts.includes('do_POST  seed_app.py:44')) throw new Error('html export: no do_POST title: ' + texts.join(' | '));
      const col = await (await page.request.get(hrefs.collapsed)).text();
      if (!/^.*;do_POST \(seed_app\.py:44\)(;[^ ]*)? \d+$/m.test(col) || /\/examples\/python\//.test(col)) throw new Error('collapsed export: ' + col.slice(0, 400));
      await p3.screenshot({ path: path.join(OUT, 'seed-export-html.png') });
    }
    await p3.close();
    if (!names.includes('all') || !hasAll(names, expectExclude)) throw new Error('html export frames: ' + names.join(' | '));
  });

  await step('whole-task analysis', async () => {
    await page.click('#analyze-task');
    await page.waitForURL(/\/analyze$/);
    await page.waitForFunction(() => /Whole task/.test(document.querySelector('.analysis-label')?.textContent || ''), null, { timeout: 30000 });
    await page.waitForSelector('.stack-tree tr.node', { timeout: 30000 });
    if (!hasAll(await treeNames(), expectInclude)) throw new Error('task tree');
  });

  await step('deep link restores the segment, span and Exclude mode', async () => {
    await page.goto('about:blank');
    await page.goto(excludeUrl);
    await page.waitForFunction(() => /Exclude Children/.test(document.querySelector('.analysis-label')?.textContent || ''), null, { timeout: 30000 });
    if (!(await page.isChecked('#mode-exclude'))) throw new Error('mode radio');
  });

  await step('landing opens the latest task\'s first profiled segment: tree and flame graph, no clicks', async () => {
    const p2 = await browser.newPage();
    await p2.goto(BASE + '/');
    await p2.waitForURL(/#\/tasks\/[^/]+\/segments\//, { timeout: 30000 });
    await p2.waitForSelector('.stack-tree tr.node', { timeout: 30000 });
    await p2.waitForSelector('.flame .frame');
    const frames = await p2.$$eval('.flame .frame', (els) => els.map((e) => e.dataset.name));
    if (!hasAll(frames, expectInclude)) throw new Error('landing frames: ' + frames.join(' | '));
    if (!p2.url().includes(encodeURIComponent(taskId))) throw new Error('landing task: ' + p2.url());
    await p2.screenshot({ path: path.join(OUT, `${MODE}-landing.png`), fullPage: true });
    await p2.close();
  });

  await step('service page: endpoint statistics with sparklines; "Profile this endpoint" pre-fills the form', async () => {
    await waitFor(async () => {
      await page.goto(BASE + '/#/services/' + encodeURIComponent(SERVICE));
      await page.waitForSelector('section.endpoints', { timeout: 5000 });
      return (await page.$(`table.endpoints tr[data-endpoint="${ENDPOINT}"]`)) !== null;
    }, 30000, 'endpoint row');
    const row = `table.endpoints tr[data-endpoint="${ENDPOINT}"]`;
    const sparks = await page.$$eval(row + ' svg.spark path', (ps) => ps.map((p) => p.getAttribute('d')));
    if (sparks.length !== 4 || !sparks.every((d) => /^M[\d.]+,[\d.]+( L[\d.]+,[\d.]+)+$/.test(d))) throw new Error('sparklines: ' + JSON.stringify(sparks));
    await shot('endpoints');
    await page.click(row + ' a.profile-endpoint');
    await page.waitForSelector('form.create-task:not([hidden])');
    const svc = await page.inputValue('#f-service');
    const ep = await page.inputValue('#f-endpointName');
    if (svc !== SERVICE || ep !== ENDPOINT) throw new Error('pre-filled: ' + svc + ' ' + ep);
  });

  await step('API errors are shown, never a blank page', async () => {
    await page.goto(BASE + '/#/tasks/no-such-task');
    await page.waitForSelector('#banner:not([hidden])');
    const b = await page.textContent('#banner');
    if (!/Error: .*404/.test(b)) throw new Error('banner: ' + b);
    if (!(await page.$('table.task-list, .tasks-col'))) throw new Error('page blank');
    await page.goto(BASE + '/#/services/no-such-service');
    await page.waitForSelector('#banner:not([hidden])');
  });

  await step('cancel a running task from its page: status cancelled, no agent gets it any more', async () => {
    const r = await fetch(`${BASE}/api/v1/profile/tasks`, {
      method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: 'Bearer ' + API_TOKEN },
      body: JSON.stringify({ service: 'svc-ui-cancel', endpointName: '/cancel-me', duration: 15,
        minDurationThreshold: 0, dumpPeriod: 10, maxSamplingCount: 5 }),
    });
    if (r.status !== 201) throw new Error('create: ' + r.status + ' ' + await r.text());
    const id = (await r.json()).id;
    await page.goto(BASE + '/#/tasks/' + encodeURIComponent(id));
    await page.click('#cancel-task', { timeout: 20000 });
    await page.waitForFunction(() => /cancelled/.test(document.querySelector('.task-detail .kv')?.textContent || ''), null, { timeout: 20000 });
    if (await page.$('#cancel-task')) throw new Error('cancel button still shown');
    const t = await (await fetch(`${BASE}/api/v1/profile/tasks/${encodeURIComponent(id)}`)).json();
    if (t.status !== 'cancelled' || !t.cancelledTime) throw new Error('task after cancel: ' + JSON.stringify(t));
    await shot('task-cancelled');
  });

  await step('no uncaught page errors', async () => {
    if (pageErrors.length) throw new Error(pageErrors.join('\n'));
  });
} finally {
  await browser.close().catch(() => {});
  await stopAll();
  rmSync(tmp, { recursive: true, force: true });
  rmSync(userDir, { recursive: true, force: true });
}
if (failed) {
  for (const p of procs) console.log(`---- ${p.name} output (tail) ----\n${p.out.slice(-3000)}`);
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
