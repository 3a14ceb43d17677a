// skywalking_ui_test.mjs - SkyWalking's own web UI (booster-ui) against skyprofd (issue 24): the
// UI built from the checkout SKYPROF_SKYWALKING_UI_SRC names (npm ci + vite build, cached in the
// build tree: about 3 minutes the first time), served by skyprofd --ui-root beside POST /graphql,
// skyprofd seeded through its real gRPC services (tests/integration/server/graphql/seed_ui.py:
// a trace-profiling task with a profiled segment, a pprof task and an async-profiler task with
// uploaded files). Chromium opens skyprofd's default dashboard and finds, in the Trace Profiling
// widget, the task, the segment and the stack frames; in the Pprof and Async Profiling widgets,
// the tasks. Without a checkout it says so and exits 77 (ctest: skipped).
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { HERE, need, session, waitFor } from './uilib.mjs';

const SRC = process.env.SKYPROF_SKYWALKING_UI_SRC;
if (!SRC || !existsSync(path.join(SRC, 'package.json'))) {
  console.log('skipped: SKYPROF_SKYWALKING_UI_SRC names no checkout of SkyWalking\'s UI ' +
              '(apache/skywalking-booster-ui: its main branch, or its tag v10.2.0 without the Pprof widget)');
  process.exit(77);
}

// The built UI, cached per checkout commit (or once for a plain folder).
function buildUi() {
  let rev = 'tree';
  try {
    rev = execFileSync('git', ['-C', SRC, 'rev-parse', 'HEAD']).toString().trim();
  } catch (e) { /* not a git checkout */ }
  const cache = path.join(need('SKP_BUILD_DIR'), 'skywalking-ui', rev);
  const dist = path.join(cache, 'src', 'dist');
  if (existsSync(path.join(dist, 'index.html'))) return dist;
  rmSync(cache, { recursive: true, force: true });
  mkdirSync(cache, { recursive: true });
  cpSync(SRC, path.join(cache, 'src'), {
    recursive: true,
    filter: (p) => !/(^|\/)(node_modules|dist|\.git)$/.test(p),
  });
  const opts = { cwd: path.join(cache, 'src'), stdio: 'inherit' };
  execFileSync('npm', ['ci', '--no-audit', '--no-fund', '--ignore-scripts'], opts);
  execFileSync('npx', ['vite', 'build'], opts);
  return dist;
}

const s = session('skywalking-ui');
let dist;
let ids;
let http;
let page;

await s.step('SkyWalking\'s UI is built (cached)', async () => {
  dist = buildUi();
});
await s.step('skyprofd serves it with --ui-root and is seeded', async () => {
  const ports = await s.skyprofd('--ui-root', dist);
  http = ports.http;
  const py = process.env.SKP_PYTHON || '/usr/bin/python3';
  const out = execFileSync(py, [path.join(HERE, '..', 'integration', 'server', 'graphql', 'seed_ui.py'),
    String(ports.grpc), String(http)], { env: process.env }).toString();
  ids = JSON.parse(out.trim().split('\n').pop());
});

// The dashboard's tab names are <input> elements (editable in edit mode): found by their value.
const tabNames = ['Trace Profiling', 'eBPF Profiling', 'Continuous Profiling', 'Async Profiling', 'Pprof'];
const bodyText = () => page.evaluate(() => document.body.innerText);
const hasText = (t) => async () => (await bodyText()).includes(t);
async function openTab(title) {
  await page.locator('input.tab-name').nth(tabNames.indexOf(title)).click();
}
// An element-plus selector of the widget's filter bar: open it, pick the option.
async function pick(selector, option) {
  await page.locator(`${selector} .el-select__wrapper`).click();
  await page.locator('.el-select-dropdown__item:visible', { hasText: option }).first().click();
  await page.keyboard.press('Escape');
}

await s.step('the default dashboard opens with the five profiling tabs', async () => {
  const browser = await s.chromium(1400, 1000);
  page = await browser.newPage();
  // GraphQL answers with errors are printed (the failing field tells what skyprofd lacks).
  page.on('response', async (r) => {
    if (!r.url().endsWith('/graphql')) return;
    const txt = await r.text().catch(() => '');
    if (r.status() !== 200 || txt.includes('"errors"'))
      console.log(`graphql ${r.status()}: ${(r.request().postData() || '').slice(0, 120)} -> ${txt.slice(0, 300)}`);
  });
  await page.goto(`http://127.0.0.1:${http}/dashboard/GENERAL/Service/${ids.serviceId}/skyprof-profiling`);
  await waitFor(async () => JSON.stringify(await page.locator('input.tab-name').evaluateAll(
    (es) => es.map((e) => e.value))) === JSON.stringify(tabNames), 30000, 'the five tabs');
});

await s.step('Trace Profiling: the task, its segment and the stack frames', async () => {
  await openTab('Trace Profiling');
  // The task list (endpoint /pay), the segment list (its first segment is selected: 40 ms),
  // the segment's span table (trace id, span /pay), then Analyze draws the thread stack table.
  await waitFor(async () => (await page.locator('.profile-task-list').innerText()).includes('/pay'),
                30000, 'the task of /pay');
  await waitFor(async () => (await page.locator('.profile-segment').innerText()).includes('40 ms'),
                30000, 'the profiled segment (40 ms)');
  await waitFor(async () => (await page.locator('.profile-trace-dashboard input').first()
    .inputValue()) === 'trace-ui', 30000, 'the segment\'s trace id');
  await page.getByRole('button', { name: 'Analyze' }).click();
  for (const f of ['main.py.main: 3', 'shop.py.handle_pay: 41', 'shop.py.charge_card: 77', 'db.py.query: 12'])
    await waitFor(hasText(f), 30000, `the frame ${f}`);
  await page.screenshot({ path: path.join(s.OUT, 'skywalking-ui-trace-profiling.png') });
});

// The Pprof widget came to the UI after its v10.2.0 tag (its main branch, e.g. 2d2eeb4): a
// checkout without it shows an empty Pprof tab, which is said here rather than checked.
const hasPprofWidget = existsSync(path.join(SRC, 'src', 'views', 'dashboard', 'related', 'pprof'));
if (!hasPprofWidget)
  console.log('-    Pprof: not checked (this checkout of the UI has no Pprof widget)');
if (hasPprofWidget) await s.step('Pprof: the task and its flame graph', async () => {
  await openTab('Pprof');
  await waitFor(hasText(ids.pprofTaskId), 30000, 'the pprof task');
  await waitFor(async () => (await page.locator('.filter-selector').innerText()).includes('inst-1'),
                30000, 'the task\'s instance preselected');
  await page.getByRole('button', { name: 'Analyze' }).click();
  for (const f of ['main (app.go:5)', 'handler (app.go:12)', 'hot (hot.go:22)'])
    await waitFor(hasText(f), 30000, `the pprof frame ${f}`);
  await page.screenshot({ path: path.join(s.OUT, 'skywalking-ui-pprof.png') });
});

await s.step('Async Profiling: the task and its flame graph', async () => {
  await openTab('Async Profiling');
  await waitFor(hasText(ids.asyncTaskId), 30000, 'the async-profiler task');
  // Selecting the task asks its progress (the UI's variable taskID, see docs/skywalking-ui.md),
  // which names the instances that uploaded a recording: the instance selector offers them.
  await page.getByText(ids.asyncTaskId).first().click();
  await pick('.filter-selector', 'inst-1');
  await pick('.filter-events', 'CPU');
  await page.getByRole('button', { name: 'Analyze' }).click();
  for (const f of ['java.lang.Thread.run:840', 'JfrWorkload.burn:29'])
    await waitFor(hasText(f), 30000, `the JFR frame ${f}`);
  await page.screenshot({ path: path.join(s.OUT, 'skywalking-ui-async.png') });
});

await s.finish();
