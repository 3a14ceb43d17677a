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
              '(apache/skywalking-booster-ui, e.g. its tag v10.2.0)');
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

async function openTab(title) {
  await page.getByText(title, { exact: true }).first().click();
}

await s.step('the default dashboard opens with the five profiling tabs', async () => {
  const browser = await s.chromium(1400, 1000);
  page = await browser.newPage();
  await page.goto(`http://127.0.0.1:${http}/dashboard/GENERAL/Service/${ids.serviceId}/skyprof-profiling`);
  for (const t of ['Trace Profiling', 'eBPF Profiling', 'Continuous Profiling', 'Async Profiling', 'Pprof'])
    await waitFor(() => page.getByText(t, { exact: true }).first().isVisible(), 30000, `tab ${t}`);
});

await s.step('Trace Profiling: the task, its segment and the stack frames', async () => {
  await openTab('Trace Profiling');
  await waitFor(() => page.getByText('/pay').first().isVisible(), 30000, 'the task of /pay');
  await page.getByText('/pay').first().click();
  await waitFor(async () => (await page.content()).includes('seg-ui') ||
                            (await page.getByText('40').count()) > 0, 30000, 'the profiled segment');
  const seg = page.getByText('/pay');
  await seg.nth((await seg.count()) - 1).click();
  await waitFor(async () => (await page.content()).includes('handle_pay'), 30000,
                'a frame of the segment (shop.py.handle_pay)');
  await page.screenshot({ path: path.join(s.OUT, 'skywalking-ui-trace-profiling.png') });
});

await s.step('Pprof and Async Profiling: the tasks are listed', async () => {
  await openTab('Pprof');
  await waitFor(async () => (await page.content()).includes('CPU'), 30000, 'the pprof task (CPU)');
  await page.screenshot({ path: path.join(s.OUT, 'skywalking-ui-pprof.png') });
  await openTab('Async Profiling');
  await waitFor(async () => (await page.content()).includes('CPU'), 30000, 'the async-profiler task');
  await page.screenshot({ path: path.join(s.OUT, 'skywalking-ui-async.png') });
});

await s.finish();
