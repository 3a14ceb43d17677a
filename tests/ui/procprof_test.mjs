// procprof_test.mjs - browser test of the Process profiles page (web/src/procprof.js) against a
// real skyprofd and real producers: tests/ui/proc_agent.py uploads a Go runtime/pprof profile
// (burnHeavy 3x burnLight; allocateBuffers on the heap) for two instances and a JFR recording of
// JfrWorkload.java made by the JDK (spinHot on thread "burner", allocateLongs, a contended lock).
// Tasks are created through the page's forms; the test checks per-instance progress and logs,
// the tree and flame graph (readable labels), the sample-type switch (pprof), the event-kind
// switch, thread filter and threads-over-time timeline with brushing (JFR), instance merging by checkbox, downloads, deep links, and saves
// screenshots to $SKP_OUT (<build>/test-output/ui/procprof-*.png). Window: 1,280 px wide.
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { session, waitFor, need, HERE } from './uilib.mjs';

const S = session('procprof');
const WEB_DIST = need('SKP_WEB_DIST');
const TOKEN = 'procprof-token';
const GO = 'ui-go';
const JAVA = 'ui-java';

const ports = await S.skyprofd('--web-root', WEB_DIST, '--api-token', TOKEN);
const BASE = `http://127.0.0.1:${ports.http}`;
const agent = S.start('proc_agent', process.env.SKP_PYTHON || '/usr/bin/python3',
  [path.join(HERE, 'proc_agent.py'), `127.0.0.1:${ports.grpc}`, GO, JAVA, S.tmp], {});
const browser = await S.chromium(1280, 900);
const page = browser.pages()[0] || await browser.newPage();
const pageErrors = [];
page.on('pageerror', (e) => pageErrors.push(e.message));
const foreign = [];   // requests to anything but skyprofd
browser.on('request', (r) => { if (!/^(data:|about:)/.test(r.url()) && !r.url().startsWith(BASE + '/')) foreign.push(r.url()); });
await page.addInitScript((t) => localStorage.setItem('skyprof.apiToken', t), TOKEN);
const shot = (name, p = page) => p.screenshot({ path: path.join(S.OUT, `procprof-${name}.png`), fullPage: true });
const rows = (p = page) => p.$$eval('.proc-analysis .tree-box .stack-tree tr.node', (rs) => rs.map((r) => ({
  sig: r.querySelector('.code').dataset.sig,
  fn: r.querySelector('.code .fn').textContent,
  loc: (r.querySelector('.code .loc') || { textContent: '' }).textContent,
  total: Number(r.querySelectorAll('td.num')[0].textContent),
  self: Number(r.querySelectorAll('td.num')[1].textContent),
  depth: Number(r.dataset.depth),
})));
const rootTotal = (rs) => rs.filter((r) => r.depth === 0).reduce((a, r) => a + r.total, 0);
const label = () => page.textContent('.proc-analysis .analysis-label');
// Waits until the analysis shows (a new one after `before`, the old label, when given).
const analysed = async (before) => {
  await page.waitForFunction((b) => {
    const l = document.querySelector('.proc-analysis .analysis-label');
    return l && l.textContent !== b && document.querySelector('.proc-analysis .stack-tree tr.node');
  }, before || null, { timeout: 60000 });
};

try {
  await S.step('the producers are ready (Go build + run, JDK recording)', async () => {
    await waitFor(() => {
      if (agent.exitCode !== null) throw new Error('proc_agent exited:\n' + agent.out);
      return agent.out.includes('proc_agent: ready');
    }, 400000, 'proc_agent ready');
  });

  await S.step('Process profiles page: navigation, empty list, both forms', async () => {
    await page.goto(BASE + '/#/process');
    await page.waitForSelector('#pprof-form');
    await page.waitForSelector('#async-form');
    if (!(await page.$('nav a[data-nav="process"].active'))) throw new Error('nav link not active');
    const ev = await page.$$eval('#pp-event option', (os) => os.map((o) => o.value));
    if (ev.join() !== 'cpu,wall,heap,allocs,block,mutex,goroutine,threadcreate') throw new Error('pprof events: ' + ev);
    const jev = await page.$$eval('#async-form input[name=event]', (os) => os.map((o) => o.value));
    if (jev.join() !== 'CPU,WALL,LOCK,ALLOC,CTIMER,ITIMER') throw new Error('async events: ' + jev);
  });

  await S.step('pprof form: the server\'s refusal appears beside its field', async () => {
    await page.click('#pprof-form button[type=submit]');
    await page.waitForFunction(() => document.querySelector('#pprof-form [data-field="service"] .field-error').textContent.length > 0);
    const msg = await page.textContent('#pprof-form [data-field="service"] .field-error');
    if (!/service/.test(msg)) throw new Error('error: ' + msg);
  });

  let cpuUrl;
  await S.step('create a pprof cpu task with the instance picker; progress per instance; tree shows the busy function', async () => {
    await page.fill('#pp-service', GO);
    await page.dispatchEvent('#pp-service', 'change');
    await page.waitForSelector('#pprof-instances input[value="go-1"]', { timeout: 30000 });
    const names = await page.$$eval('#pprof-instances input[name=instance]', (os) => os.map((o) => o.value).sort());
    if (names.join() !== 'go-1,go-2') throw new Error('instances offered: ' + names);
    await page.selectOption('#pp-event', 'cpu');
    await page.fill('#pp-duration', '1');
    await page.click('#pprof-form button[type=submit]');
    await page.waitForURL(/#\/process\/pprof\/[^/?]+$/, { timeout: 15000 });
    await page.waitForFunction(() => document.querySelectorAll('table.progress tr[data-state="uploaded"]').length === 2, null, { timeout: 60000 });
    await analysed();
    const rs = await rows();
    const heavy = rs.find((r) => r.fn === 'main.burnHeavy');
    if (!heavy || !/^main\.go:\d+$/.test(heavy.loc)) throw new Error('tree: ' + rs.map((r) => r.fn + ' ' + r.loc).join(' | '));
    if (!/\(.*main\.go:\d+\)$/.test(heavy.sig)) throw new Error('full signature: ' + heavy.sig);
    const frames = await page.$$eval('.proc-analysis .flame .frame', (els) => els.map((e) => e.textContent));
    if (!frames.some((t) => t.startsWith('main.burnHeavy'))) throw new Error('flame labels: ' + frames.join(' | '));
    if (!/sample type cpu/.test(await label()) || !/nanoseconds/.test(await label())) throw new Error('label: ' + await label());
    const logs = await page.textContent('ul.proc-logs');
    if (!/NOTIFIED/.test(logs) || !/EXECUTION_FINISHED/.test(logs)) throw new Error('logs: ' + logs);
    if ((await page.$$('ul.proc-files li')).length !== 2) throw new Error('files');
    cpuUrl = page.url();
    await shot('pprof-cpu');
  });

  // (Which of burnHeavy/burnLight got more CPU is the producer's business, tested in
  // integration_server_pprof; with 2 s of burning on a loaded machine a few samples can swap it.)
  await S.step('search reports the busy function\'s share, as the tree adds it up', async () => {
    await page.fill('#frame-search', 'burnHeavy');
    await page.waitForFunction(() => /^burnHeavy: [\d.]+ % of samples/.test(document.querySelector('#search-share').textContent));
    const share = Number(/([\d.]+) %/.exec(await page.textContent('#search-share'))[1]);
    const rs = await rows();
    const sum = (fn) => rs.filter((r) => r.fn === fn).reduce((a, r) => a + r.total, 0);
    const heavy = sum('main.burnHeavy');
    if (!(heavy > 0)) throw new Error('burnHeavy has no weight');
    if (Math.abs(share - (100 * heavy) / rootTotal(rs)) > 0.51) throw new Error(`share ${share} vs ${heavy}/${rootTotal(rs)}`);
    await page.fill('#frame-search', '');
  });

  await S.step('instances merged by checkbox: one instance is half of two', async () => {
    const both = rootTotal(await rows());
    const before = await label();
    await page.uncheck('#merge-instances input[value="go-2"]');
    await analysed(before);
    const one = rootTotal(await rows());
    if (one * 2 !== both) throw new Error(`one ${one}, both ${both}`);
    if (!/instances=go-1/.test(page.url())) throw new Error('url: ' + page.url());
    const href = await page.getAttribute('.exports a[data-format="collapsed"]', 'href');
    if (!/instances=go-1/.test(href)) throw new Error('download ignores the instances: ' + href);
    const before2 = await label();
    await page.check('#merge-instances input[value="go-2"]');
    await analysed(before2);
    if (rootTotal(await rows()) !== both) throw new Error('re-merged total');
  });

  await S.step('sample-type switch (samples/count) re-analyses', async () => {
    const types = await page.$$eval('#sample-type option', (os) => os.map((o) => o.value));
    if (!types.includes('samples') || !types.includes('cpu')) throw new Error('types: ' + types);
    const before = await label();
    await page.selectOption('#sample-type', 'samples');
    await analysed(before);
    if (!/sample type samples/.test(await label())) throw new Error('label: ' + await label());
    if (!(await rows()).some((r) => r.fn === 'main.burnHeavy')) throw new Error('tree after switch');
    if (!/sampleType=samples/.test(page.url())) throw new Error('url: ' + page.url());
  });

  await S.step('downloads: pprof (gzip), collapsed, speedscope, html', async () => {
    const hrefs = await page.$$eval('.proc-analysis .exports a', (as) => Object.fromEntries(as.map((a) => [a.dataset.format, a.href])));
    for (const f of ['pprof', 'collapsed', 'speedscope', 'html']) if (!hrefs[f]) throw new Error('no link ' + f);
    const pb = await (await page.request.get(hrefs.pprof)).body();
    if (pb[0] !== 0x1f || pb[1] !== 0x8b || gunzipSync(pb).length < 10) throw new Error('pprof download');
    const col = await (await page.request.get(hrefs.collapsed)).text();
    if (!/main\.burnHeavy.* \d+$/m.test(col)) throw new Error('collapsed: ' + col.slice(0, 300));
    const sp = JSON.parse(await (await page.request.get(hrefs.speedscope)).text());
    if (!sp.profiles || !sp.shared) throw new Error('speedscope');
    const html = await (await page.request.get(hrefs.html)).text();
    if (!html.startsWith('<!DOCTYPE html>') || !html.includes('main.burnHeavy')) throw new Error('html');
  });

  await S.step('a heap task: alloc_space shows the allocating function', async () => {
    await page.goto(BASE + '/#/process');
    await page.waitForSelector('#pprof-form');
    await page.fill('#pp-service', GO);
    await page.selectOption('#pp-event', 'heap');
    if (await page.isVisible('#pp-duration')) throw new Error('duration shown for an at-once event');
    await page.click('#pprof-form button[type=submit]');
    await page.waitForURL(/#\/process\/pprof\/[^/?]+$/, { timeout: 15000 });
    await analysed();
    const before = await label();
    await page.selectOption('#sample-type', 'alloc_space');
    await analysed(before);
    const rs = await rows();
    if (!rs.some((r) => r.fn === 'main.allocateBuffers')) throw new Error('heap tree: ' + rs.map((r) => r.fn).join(' | '));
    if (!/bytes/.test(await label())) throw new Error('unit: ' + await label());
  });

  await S.step('an event the producer cannot run: the instance shows failed with the agent\'s reason', async () => {
    await page.goto(BASE + '/#/process');
    await page.waitForSelector('#pprof-form');
    await page.fill('#pp-service', GO);
    await page.selectOption('#pp-event', 'block');
    await page.fill('#pp-duration', '1');
    await page.fill('#pp-dumpPeriod', '1000');
    await page.click('#pprof-form button[type=submit]');
    await page.waitForURL(/#\/process\/pprof\/[^/?]+$/, { timeout: 15000 });
    await page.waitForFunction(() => document.querySelectorAll('table.progress tr[data-state="failed"]').length === 2, null, { timeout: 60000 });
    const why = await page.textContent('table.progress .failed-reason');
    if (!/not produced by the test's Go program/.test(why)) throw new Error('reason: ' + why);
    if (!(await page.$('.proc-analysis .empty-analysis'))) throw new Error('empty analysis message');
    // Cancel ends the task's window: the status turns cancelled and the button goes away.
    await page.click('#cancel-proc-task');
    await page.waitForFunction(() => /cancelled/.test(document.querySelector('.proc-detail .kv').textContent), null, { timeout: 30000 });
    await page.waitForSelector('#cancel-proc-task', { state: 'detached' });
  });

  let jfrUrl;
  await S.step('create an async-profiler task (CPU + ALLOC): the execution tree shows spinHot', async () => {
    await page.goto(BASE + '/#/process');
    await page.waitForSelector('#async-form');
    await page.fill('#ap-service', JAVA);
    await page.dispatchEvent('#ap-service', 'change');
    await page.waitForSelector('#async-instances input[value="jvm-1"]', { timeout: 30000 });
    await page.check('#async-form input[name=event][value=ALLOC]');
    await page.fill('#ap-duration', '10');
    await page.fill('#ap-execArgs', 'interval=10ms');
    await page.click('#async-form button[type=submit]');
    await page.waitForURL(/#\/process\/async\/[^/?]+$/, { timeout: 15000 });
    await page.waitForSelector('table.progress tr[data-state="uploaded"]', { timeout: 60000 });
    await analysed();
    if (!/event kind execution/.test(await label())) throw new Error('label: ' + await label());
    const rs = await rows();
    const top = rs.reduce((a, r) => (r.self > a.self ? r : a), { self: -1 });
    if (!/spinHot/.test(top.fn)) throw new Error('heaviest self: ' + top.fn + ' in ' + rs.map((r) => r.fn).join(' | '));
    if (!(await page.textContent('.proc-detail')).includes('interval=10ms')) throw new Error('execArgs not shown');
    jfrUrl = page.url();
    await shot('jfr-execution');
  });

  await S.step('JFR threads over time: burner and the other threads in their own rows; brushing re-analyses that range', async () => {
    await page.waitForSelector('#thread-timeline .threadline-row[data-thread="burner"]', { timeout: 60000 });
    const tops = Object.fromEntries(await page.$$eval('#thread-timeline .threadline-row',
      (rs) => rs.map((r) => [r.dataset.thread, r.dataset.top])));
    // One row per thread of the server's timeline, no more, no fewer. The recording decides
    // which threads have execution samples: a loaded machine may take none of the allocating
    // thread (or of any thread but burner), so the rows are checked against it, not a fixed list.
    const tid = /#\/process\/async\/([^/?]+)/.exec(page.url())[1];
    const tl = await (await page.request.get(`${BASE}/api/v1/async-profiler/tasks/${tid}/timeline?eventType=execution`)).json();
    const names = (tl.threads || []).map((t) => t.name).sort();
    if (JSON.stringify(Object.keys(tops).sort()) !== JSON.stringify(names)) {
      throw new Error('rows ' + JSON.stringify(Object.keys(tops)) + ', timeline threads ' + JSON.stringify(names));
    }
    // burner spins in spinHot; every other thread shows its own functions.
    if (!/spinHot/.test(tops.burner || '')) throw new Error('burner row: ' + JSON.stringify(tops));
    const others = Object.entries(tops).filter(([t]) => t !== 'burner');
    if (others.some(([, top]) => /spinHot/.test(top))) throw new Error('other rows: ' + JSON.stringify(tops));
    await shot('jfr-threads');
    const all = rootTotal(await rows());
    const before = await label();
    // Drag across the middle of burner's row.
    const box = await page.$eval('#thread-timeline .threadline-row[data-thread="burner"] canvas', (c) => {
      const r = c.getBoundingClientRect();
      return { x: r.left, y: r.top + r.height / 2, w: r.width };
    });
    await page.mouse.move(box.x + box.w * 0.3, box.y);
    await page.mouse.down();
    await page.mouse.move(box.x + box.w * 0.45, box.y, { steps: 4 });
    await page.mouse.move(box.x + box.w * 0.6, box.y, { steps: 4 });
    await page.mouse.up();
    await analysed(before);
    const m = /[?&]from=(\d+)&to=(\d+)/.exec(page.url());
    if (!m) throw new Error('url after brushing: ' + page.url());
    if (!/range \d+ ms/.test(await label())) throw new Error('label: ' + await label());
    await page.waitForSelector('#jfr-range');
    const rs = await rows();
    const part = rootTotal(rs);
    if (!(part > 0 && part < all)) throw new Error(`range total ${part} of ${all}`);
    if (!rs.some((r) => /spinHot/.test(r.fn))) throw new Error('range tree: ' + rs.map((r) => r.fn).join(' | '));
    // The same range through the API gives the same total; the selection stays drawn.
    const id = /#\/process\/async\/([^/?]+)/.exec(page.url())[1];
    const api = await (await page.request.get(`${BASE}/api/v1/async-profiler/tasks/${id}/analyze?eventType=execution&from=${m[1]}&to=${m[2]}`)).json();
    if (api.total !== part) throw new Error(`API total ${api.total}, page ${part}`);
    await page.waitForSelector('#thread-timeline .threadline-sel:not([hidden])');
    await shot('jfr-threads-range');
    const b2 = await label();
    await page.click('#thread-timeline .threadline-whole');
    await analysed(b2);
    if (/from=/.test(page.url()) || rootTotal(await rows()) !== all) throw new Error('whole recording: ' + page.url());
  });

  await S.step('JFR thread filter: "burner" keeps that thread\'s samples only', async () => {
    const all = rootTotal(await rows());
    const opts = await page.$$eval('#thread-filter option', (os) => os.map((o) => o.value));
    if (!opts.includes('burner')) throw new Error('threads: ' + opts);
    const before = await label();
    await page.selectOption('#thread-filter', 'burner');
    await analysed(before);
    const rs = await rows();
    if (!/thread burner/.test(await label()) || !(rootTotal(rs) <= all)) throw new Error('filtered: ' + await label());
    if (rs.some((r) => /allocate/.test(r.fn))) throw new Error('another thread\'s frame: ' + rs.map((r) => r.fn).join(' | '));
    if (!/thread=burner/.test(page.url())) throw new Error('url: ' + page.url());
    const href = await page.getAttribute('.exports a[data-format="collapsed"]', 'href');
    const col = await (await page.request.get(BASE + href)).text();
    if (!/spinHot/.test(col) || /allocate/.test(col)) throw new Error('download ignores the thread');
  });

  await S.step('JFR event-kind switch: alloc shows the allocating method in bytes', async () => {
    const kinds = await page.$$eval('#event-kind option', (os) => os.map((o) => o.value));
    if (!kinds.includes('alloc') || !kinds.includes('execution')) throw new Error('kinds: ' + kinds);
    const before = await label();
    await page.selectOption('#event-kind', 'alloc');
    await analysed(before);
    const rs = await rows();
    if (!rs.some((r) => /allocate/.test(r.fn))) throw new Error('alloc tree: ' + rs.map((r) => r.fn).join(' | '));
    if (!/event kind alloc/.test(await label()) || !/bytes/.test(await label())) throw new Error('label: ' + await label());
    if (/thread=/.test(page.url())) throw new Error('thread kept across kinds: ' + page.url());
    await shot('jfr-alloc');
  });

  await S.step('deep links restore the switches (event kind, thread; pprof instances)', async () => {
    const p2 = await browser.newPage();
    await p2.goto(jfrUrl + '?eventType=execution&thread=burner&q=spinHot');
    await p2.waitForFunction(() => /thread burner/.test(document.querySelector('.proc-analysis .analysis-label')?.textContent || ''), null, { timeout: 60000 });
    if ((await p2.inputValue('#thread-filter')) !== 'burner' || (await p2.inputValue('#event-kind')) !== 'execution') throw new Error('selects');
    await p2.waitForFunction(() => /^spinHot: /.test(document.querySelector('#search-share').textContent));
    await p2.goto(cpuUrl + '?instances=go-2');
    await p2.waitForSelector('.proc-analysis .stack-tree tr.node', { timeout: 60000 });
    if ((await p2.isChecked('#merge-instances input[value="go-1"]')) || !(await p2.isChecked('#merge-instances input[value="go-2"]'))) throw new Error('instance boxes');
    await p2.close();
  });

  await S.step('readable at 1,280 px: no horizontal scrolling', async () => {
    await page.goto(cpuUrl);
    await page.waitForSelector('.proc-analysis .stack-tree tr.node', { timeout: 60000 });
    const over = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    if (over > 0) throw new Error('page wider than the window by ' + over + ' px');
    await shot('list');
  });

  await S.step('no uncaught page errors; no request to another host', async () => {
    if (pageErrors.length) throw new Error(pageErrors.join('\n'));
    if (foreign.length) throw new Error('requests to other hosts: ' + foreign.join(' '));
  });
} finally {
  await S.finish();
}
