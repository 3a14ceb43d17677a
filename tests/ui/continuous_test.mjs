// continuous_test.mjs - browser test of the Continuous profiling page (web/src/continuous.js)
// against a real skyprofd (200 ms slots) fed real trace segments over gRPC by
// tests/ui/continuous_feed.py (/slow at 300 ms, /fast at 5 ms): the policy editor shows each
// rule's text beside its field and keeps Save disabled, a refusal by the server shows its
// errorReason, a saved policy is what the API returns, the live chart of /slow crosses its
// threshold line, the trigger appears in the timeline with its cause and links to the trace
// task, whose page says what started it. Drives Chromium via playwright-core (/usr/bin/chromium);
// screenshots go to $SKP_OUT. Prints "N passed, N failed".
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';

const env = process.env;
const need = (k) => { if (!env[k]) { console.error(`missing env ${k}`); process.exit(2); } return env[k]; };
const HERE = path.dirname(new URL(import.meta.url).pathname);
const HARNESS = path.join(HERE, '..', 'harness', 'skp_harness.py');
const WEB_DIST = need('SKP_WEB_DIST');
const OUT = need('SKP_OUT');
const PY = env.SKP_PYTHON || '/usr/bin/python3';
const require = createRequire(path.join(need('SKP_WEB_DIR'), 'package.json'));
const { chromium } = require('playwright-core');
const SERVICE = 'ui-cont';

mkdirSync(OUT, { recursive: true });
const tmp = mkdtempSync(path.join(os.tmpdir(), 'skp-ui-cont-'));
const procs = [];
let passed = 0;
let failed = 0;

function start(name, cmd, args, stdin = 'ignore') {
  const p = spawn(cmd, args, { env, stdio: [stdin, 'pipe', 'pipe'] });
  p.out = '';
  p.name = name;
  p.stdout.on('data', (d) => { p.out += d; });
  p.stderr.on('data', (d) => { p.out += d; });
  procs.push(p);
  return p;
}

async function waitFor(pred, timeoutMs, what) {
  const end = Date.now() + timeoutMs;
  let last;
  while (Date.now() < end) {
    try {
      const v = await pred();
      if (v) return v;
    } catch (e) { last = e; }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}${last ? ' (last error: ' + last.message + ')' : ''}`);
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

const srv = start('skyprofd', PY, [HARNESS, 'skyprofd', tmp, '--web-root', WEB_DIST,
  '--continuous-slot-ms', '200'], 'pipe');
const ports = await waitFor(() => {
  const m = /^(\{"grpc".*\})$/m.exec(srv.out);
  if (srv.exitCode !== null) throw new Error('skyprofd exited:\n' + srv.out);
  return m ? JSON.parse(m[1]) : null;
}, 90000, 'skyprofd ports from the harness');
const BASE = `http://127.0.0.1:${ports.http}`;
const apiGet = async (p) => { const r = await fetch(BASE + p); return [r.status, await r.json()]; };

const userDir = mkdtempSync(path.join(os.tmpdir(), 'skp-ui-chromium-'));
const browser = await chromium.launchPersistentContext(userDir, {
  executablePath: '/usr/bin/chromium', headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  viewport: { width: 1440, height: 1000 },
});
const page = browser.pages()[0] || await browser.newPage();
const pageErrors = [];
page.on('pageerror', (e) => pageErrors.push(e.message));
const shot = (name) => page.screenshot({ path: path.join(OUT, `continuous-${name}.png`), fullPage: true });
const row = '.cont-items tbody tr:first-child';
const errorOf = (field) => page.$eval(`${row} .field-error[data-for=${field}]`, (e) => e.textContent);

try {
  await step('empty page: no policy, an editor with one default check', async () => {
    await page.goto(`${BASE}/#/continuous/${SERVICE}`);
    await page.waitForSelector('form.cont-policy');
    const st = await page.textContent('.policy-status');
    if (!/No policy/.test(st)) throw new Error(st);
    if ((await page.$$('.cont-items tbody tr')).length !== 1) throw new Error('rows');
    await page.waitForSelector('.cont-triggers :text("No trigger yet.")');
  });

  await step('validation beside the fields (OAP\'s texts), Save disabled until fixed', async () => {
    await page.fill(`${row} .f-count`, '30');
    await waitFor(async () => (await errorOf('count')) === 'count must be small than period', 5000, 'count error');
    if (!(await page.$eval('.save-policy', (b) => b.disabled))) throw new Error('save enabled');
    await page.fill(`${row} .f-count`, '3');
    await page.fill(`${row} .f-threshold`, 'fast');
    await waitFor(async () => (await errorOf('threshold')) === 'parsing threshold error', 5000, 'threshold error');
    if ((await errorOf('count')) !== '') throw new Error('count error stayed');
    await page.selectOption(`${row} .f-type`, 'ENDPOINT_ERROR_RATE');
    await page.fill(`${row} .f-threshold`, '150');
    await waitFor(async () => (await errorOf('threshold')) === 'the endpoint error rate should in [0-100]', 5000, 'rate error');
    await page.fill('#f-executeDuration', '0');
    await waitFor(async () => (await page.textContent('.field-error[data-for=executeDuration]')) === 'executeDuration must be in [1-900] seconds', 5000, 'execute error');
    await shot('validation');
  });

  await step('the server\'s refusal (errorReason) is shown', async () => {
    await page.selectOption(`${row} .f-type`, 'ENDPOINT_AVG_RESPONSE_TIME');
    await page.fill(`${row} .f-threshold`, '200');
    await page.fill('#f-executeDuration', '5');
    await page.fill('#f-silenceDuration', '10');
    await page.fill(`${row} .f-uris`, '~(');
    await waitFor(async () => !(await page.$eval('.save-policy', (b) => b.disabled)), 5000, 'save enabled');
    await page.click('.save-policy');
    await waitFor(async () => /check ENDPOINT_AVG_RESPONSE_TIME in TRACE error: parsing uriRegex error/.test(await page.textContent('form.cont-policy .form-error')), 10000, 'server errorReason');
  });

  await step('a saved policy is what the API returns', async () => {
    await page.fill(`${row} .f-uris`, '/slow');
    await page.click('.save-policy');
    await waitFor(async () => /uuid/.test(await page.textContent('.policy-status')), 10000, 'uuid shown');
    const [st, p] = await apiGet(`/api/v1/continuous/policies/${SERVICE}`);
    const it = p.targets[0].checkItems[0];
    if (st !== 200 || p.targets[0].targetType !== 'TRACE' || it.type !== 'ENDPOINT_AVG_RESPONSE_TIME' ||
      it.threshold !== '200' || it.period !== 10 || it.count !== 3 || it.uriList[0] !== '/slow' ||
      p.executeDuration !== 5 || p.silenceDuration !== 10) throw new Error(JSON.stringify(p));
    if (!(await page.textContent('.policy-status')).includes(p.uuid.slice(0, 16))) throw new Error('uuid');
  });

  start('feed', PY, [path.join(HERE, 'continuous_feed.py'), `127.0.0.1:${ports.grpc}`, SERVICE, '300']);

  await step('the live chart of /slow crosses its threshold line', async () => {
    const el = await waitFor(() => page.$('.cont-series[data-uri="/slow"]:not([data-hits="0"])'), 30000, 'a /slow chart with slots over the threshold');
    const d = await el.$eval('path.values', (p) => p.getAttribute('d'));
    if (!/^M[\d.]+,[\d.]+/.test(d)) throw new Error('path ' + d);
    if (!(await el.$('line.threshold')) || !(await el.$('circle.hit'))) throw new Error('threshold line / hit dots');
    if (await page.$('.cont-series[data-uri="/fast"]')) throw new Error('/fast is not named by the policy');
    await shot('chart');
  });

  let taskHref = null;
  await step('the trigger in the timeline, with its cause and a link to the task', async () => {
    const li = await waitFor(() => page.$('.cont-trigger'), 30000, 'a trigger in the timeline');
    const text = await li.textContent();
    if (!/TRACE/.test(text) || !/triggered by ENDPOINT_AVG_RESPONSE_TIME of \/slow: 30\d ms ≥ 200 ms \(\d+ of 2 s\)/.test(text)) throw new Error(text);
    taskHref = await li.$eval('a.task-link', (a) => a.getAttribute('href'));
    if (!/^#\/tasks\//.test(taskHref)) throw new Error(taskHref);
    await page.waitForSelector('.cont-quiet:text-matches("Quiet until")');
    await shot('trigger');
  });

  await step('the task page says what started it', async () => {
    await page.click('.cont-trigger a.task-link');
    await page.waitForURL(/#\/tasks\//);
    const el = await page.waitForSelector('a.triggered-by', { timeout: 15000 });
    const t = await el.textContent();
    if (!/^triggered by ENDPOINT_AVG_RESPONSE_TIME of \/slow: /.test(t)) throw new Error(t);
    const ep = await page.textContent('dl.kv');
    if (!/\/slow/.test(ep) || !/200 ms/.test(ep)) throw new Error(ep);
    await shot('task');
  });

  await step('delete the policy from the page', async () => {
    await page.goto(`${BASE}/#/continuous/${SERVICE}`);
    await page.waitForSelector('form.cont-policy');
    await page.click('.delete-policy');
    await waitFor(async () => /No policy/.test(await page.textContent('.policy-status')), 10000, 'no policy');
    const [st] = await apiGet(`/api/v1/continuous/policies/${SERVICE}`);
    if (st !== 404) throw new Error('still there: ' + st);
  });

  await step('no page errors', async () => {
    if (pageErrors.length) throw new Error(pageErrors.join('\n'));
  });
} finally {
  await browser.close();
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
  rmSync(tmp, { recursive: true, force: true });
  rmSync(userDir, { recursive: true, force: true });
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
