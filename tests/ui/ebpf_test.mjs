// ebpf_test.mjs - browser test of agent-started eBPF profiles in the web UI (web/src/ebpf.js on
// the Process profiles page, linked from the Continuous page's trigger timeline) against a real
// skyprofd seeded over the real wire by tests/ui/ebpf_feed.py: a registered host process, an
// ON_CPU profile reported by the agent's policy (PROCESS_CPU 87.5 >= 50) and its stacks with
// known dump counts (ui_main 80 = ui_burn 60 + ui_wait 15 + a kernel stack 5). The test follows
// the timeline's link, checks the profile's details, processes, every frame's total and self in
// the tree, the flame graph's widths (60/80 within 1 %), the collapsed download, the one-process
// filter, and that the Process page lists the profile. Drives Chromium via playwright-core
// (/usr/bin/chromium); screenshots go to $SKP_OUT (ebpf-*.png). Prints "N passed, N failed".
import path from 'node:path';
import { session, waitFor, need, HERE } from './uilib.mjs';

const S = session('ebpf');
const WEB_DIST = need('SKP_WEB_DIST');
const PY = process.env.SKP_PYTHON || '/usr/bin/python3';
const SERVICE = 'ui-bpf';
const INSTANCE = 'bpf-1';
const MAIN = 'ui_main (bpf_app.py:20)';
const BURN = 'ui_burn (bpf_app.py:10)';
const WAIT = 'ui_wait (bpf_app.py:5)';
// root-to-frame path -> [total, self] in dump counts, as ebpf_feed.py uploads them
const WANT = {
  [MAIN]: [80, 0],
  [`${MAIN};${BURN}`]: [60, 60],
  [`${MAIN};${WAIT}`]: [15, 15],
  [`${MAIN};entry_SYSCALL_64`]: [5, 0],
  [`${MAIN};entry_SYSCALL_64;do_syscall_64`]: [5, 5],
};

const ports = await S.skyprofd('--web-root', WEB_DIST);
const BASE = `http://127.0.0.1:${ports.http}`;
const feed = S.start('ebpf_feed', PY, [path.join(HERE, 'ebpf_feed.py'), `127.0.0.1:${ports.grpc}`, SERVICE, INSTANCE], {});
const browser = await S.chromium(1280, 900);
const page = browser.pages()[0] || await browser.newPage();
const pageErrors = [];
page.on('pageerror', (e) => pageErrors.push(e.message));
const shot = (name) => page.screenshot({ path: path.join(S.OUT, `ebpf-${name}.png`), fullPage: true });
// The tree's rows as root-to-frame paths with their totals and selves.
const treeRows = () => page.$$eval('.ebpf-analysis .tree-box .stack-tree tr.node', (rs) => {
  const stack = [];
  return rs.map((r) => {
    const d = Number(r.dataset.depth);
    stack.length = d;
    stack.push(r.querySelector('.code').dataset.sig);
    return { path: stack.join(';'), total: Number(r.querySelectorAll('td.num')[0].textContent),
      self: Number(r.querySelectorAll('td.num')[1].textContent) };
  });
});
const analysed = (before) => page.waitForFunction((b) => {
  const l = document.querySelector('.ebpf-analysis .analysis-label');
  return l && l.textContent !== b && document.querySelector('.ebpf-analysis .stack-tree tr.node');
}, before || null, { timeout: 30000 });

let seed = null;
try {
  await S.step('the agent registers, triggers an ON_CPU profile and uploads its stacks', async () => {
    seed = await waitFor(() => {
      const m = /^(\{"taskId".*\})$/m.exec(feed.out);
      if (!m && feed.exitCode !== null) throw new Error('ebpf_feed exited:\n' + feed.out);
      return m ? JSON.parse(m[1]) : null;
    }, 60000, 'ebpf_feed');
  });

  await S.step('the trigger timeline links the profile; the link opens it', async () => {
    await page.goto(`${BASE}/#/continuous/${SERVICE}`);
    const link = await page.waitForSelector('.cont-trigger a.task-link', { timeout: 20000 });
    const text = await link.textContent();
    if (!text.includes('ON_CPU') || !text.includes(seed.taskId)) throw new Error('link text: ' + text);
    await link.click();
    await waitFor(async () => page.url().endsWith('#/process/ebpf/' + encodeURIComponent(seed.taskId)), 10000, 'route');
    await analysed();
    await shot('profile');
  });

  await S.step('details: target, trigger, cause, uploads, total', async () => {
    const kv = await page.$$eval('.ebpf-details dt', (dts) => Object.fromEntries(dts.map((d) =>
      [d.textContent, d.nextElementSibling.textContent])));
    const want = { Profile: seed.taskId, Target: 'ON_CPU', Service: SERVICE, Instance: INSTANCE, Process: 'python3',
      Total: '80 count (samples)', 'Distinct stacks': '3' };
    for (const [k, v] of Object.entries(want)) if (kv[k] !== v) throw new Error(`${k}: ${kv[k]} != ${v}`);
    if (!/PROCESS_CPU/.test(kv.Cause) || !/agent/.test(kv['Started by'])) throw new Error(JSON.stringify(kv));
  });

  await S.step('processes: the registered process with its stacks', async () => {
    const row = await page.$eval(`.ebpf-processes tr[data-process="${seed.processId}"]`, (r) =>
      [...r.querySelectorAll('td')].map((td) => td.textContent));
    if (row[0] !== 'python3' || row[1] !== INSTANCE || row[2] !== '4242' || row[4] !== '3' || row[5] !== '0') {
      throw new Error('process row: ' + row.join(' | '));
    }
  });

  await S.step('tree: every frame with its dump counts (total and self)', async () => {
    const rows = await treeRows();
    const got = Object.fromEntries(rows.map((r) => [r.path, [r.total, r.self]]));
    if (rows.length !== Object.keys(WANT).length) throw new Error('rows: ' + JSON.stringify(got));
    for (const [p, v] of Object.entries(WANT)) {
      if (!got[p] || got[p][0] !== v[0] || got[p][1] !== v[1]) throw new Error(`${p}: ${JSON.stringify(got[p])} != ${v}`);
    }
    const label = await page.textContent('.ebpf-analysis .analysis-label');
    if (!label.includes('total 80 count') || !label.includes('every process')) throw new Error(label);
  });

  await S.step('flame graph: the frames, widths in proportion to their counts', async () => {
    const w = await page.$$eval('.ebpf-analysis .flame .frame', (els) => Object.fromEntries(els.map((e) =>
      [e.dataset.name, e.getBoundingClientRect().width])));
    for (const sig of [MAIN, BURN, WAIT, 'do_syscall_64']) if (!(w[sig] > 0)) throw new Error('no frame ' + sig + ': ' + JSON.stringify(w));
    const r = w[BURN] / w[MAIN];
    if (Math.abs(r - 60 / 80) > 0.01) throw new Error(`burn/main width ${r}`);
    const labels = await page.$$eval('.ebpf-analysis .flame .frame', (els) => els.map((e) => e.textContent));
    if (!labels.some((t) => t.startsWith('ui_burn'))) throw new Error('labels: ' + labels.join(' | '));
  });

  await S.step('downloads: the four formats; collapsed holds the stacks', async () => {
    const links = await page.$$eval('.ebpf-analysis .exports a', (as) => as.map((a) => [a.dataset.format, a.getAttribute('href')]));
    if (links.map((l) => l[0]).join(',') !== 'pprof,collapsed,speedscope,html') throw new Error(JSON.stringify(links));
    const href = links.find((l) => l[0] === 'collapsed')[1];
    const res = await fetch(BASE + href);
    const lines = new Set((await res.text()).trim().split('\n'));
    for (const want of [`${MAIN};${BURN} 60`, `${MAIN};${WAIT} 15`, `${MAIN};entry_SYSCALL_64;do_syscall_64 5`]) {
      if (!lines.has(want)) throw new Error(`collapsed lacks "${want}": ${[...lines].join(' | ')}`);
    }
    const pp = await fetch(BASE + links.find((l) => l[0] === 'pprof')[1]);
    if (pp.status !== 200 || (await pp.arrayBuffer()).byteLength < 20) throw new Error('pprof ' + pp.status);
  });

  await S.step('one process: the analysis of the chosen process (processId)', async () => {
    const before = await page.textContent('.ebpf-analysis .analysis-label');
    await page.click(`.ebpf-processes tr[data-process="${seed.processId}"] a`);
    await analysed(before);
    const label = await page.textContent('.ebpf-analysis .analysis-label');
    if (!label.includes('process ' + seed.processId.slice(0, 12))) throw new Error(label);
    if (!page.url().includes('processId=' + seed.processId)) throw new Error(page.url());
    const hrefs = await page.$$eval('.ebpf-analysis .exports a', (as) => as.map((a) => a.getAttribute('href')));
    if (!hrefs.every((u) => u.includes('processId=' + seed.processId))) throw new Error(hrefs.join(' '));
    const got = Object.fromEntries((await treeRows()).map((r) => [r.path, r.total]));
    if (got[MAIN] !== 80 || got[`${MAIN};${BURN}`] !== 60) throw new Error(JSON.stringify(got));
  });

  await S.step('the Process page lists the agent-started profile; its link opens it', async () => {
    await page.goto(`${BASE}/#/process`);
    const row = await page.waitForSelector(`.ebpf-task-list tr.ebpf-task[data-id="${seed.taskId}"]`, { timeout: 15000 });
    const cells = await row.$$eval('td', (tds) => tds.map((td) => td.textContent));
    const title = await row.getAttribute('title');
    if (cells[0] !== 'ON_CPU' || cells[1] !== SERVICE || cells[2] !== INSTANCE || !/^process python3: .*PROCESS_CPU/.test(title)) {
      throw new Error('row: ' + cells.join(' | ') + ' title ' + title);
    }
    await shot('list');
    await row.$eval('a', (a) => a.click());
    await analysed();
    const got = Object.fromEntries((await treeRows()).map((r) => [r.path, r.self]));
    if (got[`${MAIN};${BURN}`] !== 60 || got[`${MAIN};${WAIT}`] !== 15) throw new Error(JSON.stringify(got));
    if (!(await page.$(`.ebpf-task-list tr.ebpf-task.selected[data-id="${seed.taskId}"]`))) throw new Error('not selected');
  });

  await S.step('no page errors', async () => {
    if (pageErrors.length) throw new Error(pageErrors.join('\n'));
  });
} finally {
  await S.finish();
}
