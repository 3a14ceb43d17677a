// compare_test.mjs - browser test of the Compare page and the request timeline against a real
// skyprofd and two real agents: the C demo service (the seed scenario with libskyprof's native
// stack source), once fast (method3 spends 20 ms itself) and once slow (--method3-ms 200), both
// profiled by one task. Checks that the diff flame graph colours method3 as grown (red) and that
// the table of changes lists it first; that the segment page's timeline shows one column per dump
// under the span bars, and that brushing the first part of the slow request re-analyses to that
// range's frames (method3 without method2/method1, which run after its 200 ms). Screenshots go to
// $SKP_OUT. Prints "N passed, N failed".
import path from 'node:path';
import { listeningPort, need, session, waitFor } from './uilib.mjs';
import { dumpFunctions, leafLegend } from '../../web/src/timeline.js';

const S = session('compare');
const WEB_DIST = need('SKP_WEB_DIST');
const API_TOKEN = 'ui-test-token';

const ports = await S.skyprofd('--web-root', WEB_DIST, '--api-token', API_TOKEN);
const BASE = `http://127.0.0.1:${ports.http}`;
const SERVICE = 'ui-compare';

async function apiJson(method, p, body) {
  const r = await fetch(BASE + p, { method, headers: { 'Content-Type': 'application/json', Authorization: 'Bearer ' + API_TOKEN }, body: body ? JSON.stringify(body) : undefined });
  const t = await r.text();
  if (!r.ok) throw new Error(`${method} ${p}: ${r.status} ${t}`);
  return JSON.parse(t);
}

function demo(instance, method3Ms) {
  const d = S.start(instance, need('SKP_DEMO_SERVICE'), ['--port', '0', '--method3-ms', String(method3Ms)], {
    SW_AGENT_NAME: SERVICE,
    SW_AGENT_INSTANCE_NAME: instance,
    SW_AGENT_COLLECTOR_BACKEND_SERVICES: `127.0.0.1:${ports.grpc}`,
    SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL: '1',
  });
  return listeningPort(d, 'demo_service:', 30000);
}

const browser = await S.chromium(1280, 1000);
const page = browser.pages()[0] || await browser.newPage();
const pageErrors = [];
page.on('pageerror', (e) => pageErrors.push(e.message));
await page.addInitScript((t) => localStorage.setItem('skyprof.apiToken', t), API_TOKEN);
const shot = (name) => page.screenshot({ path: path.join(S.OUT, `compare-${name}.png`), fullPage: true });
const rgb = (s) => (/rgba?\((\d+), (\d+), (\d+)/.exec(s) || [0, 0, 0, 0]).slice(1).map(Number);

let taskId;
const seg = {};     // instance -> profiled segment id of one request
const segStart = {}; // segment id -> the request's start (ms)

// For a failed check on the timeline: each dump's time from the request's start and the five
// functions nearest its leaf (leaf last), so that a CI log shows what the segment held.
function describeDumps(tl, start) {
  const fn = (f) => String(f).replace(/ \(.*$/, '');
  return tl.snapshots.map((x) => {
    const fr = (tl.stacks[x.stack] || []).map((i) => fn(tl.frames[i]));
    return `  +${x.time - start} ms: ${fr.slice(-5).join(' > ')}`;
  }).join('\n');
}
let traffic = true;

try {
  await S.step('a fast (method3 20 ms) and a slow (method3 200 ms) demo service, one task profiling both', async () => {
    const [fastPort, slowPort] = await Promise.all([demo('fast-1', 20), demo('slow-1', 200)]);
    taskId = (await apiJson('POST', '/api/v1/profile/tasks', { service: SERVICE, endpointName: '/', duration: 5,
      minDurationThreshold: 0, dumpPeriod: 10, maxSamplingCount: 9 })).id;
    const pump = async (port) => {
      while (traffic) {
        await fetch(`http://127.0.0.1:${port}/`, { method: 'POST', body: '{}' }).then((r) => r.text()).catch(() => null);
      }
    };
    const pumps = [pump(fastPort), pump(slowPort)];
    try {
      await waitFor(async () => {
        const groups = await apiJson('GET', `/api/v1/profile/tasks/${encodeURIComponent(taskId)}/segments`);
        for (const g of groups) {
          const sp = (g.spans || []).find((s) => s.profiled);
          // a whole request: its entry span covers method3 and the 500 ms after it
          if (!sp || g.duration < 500 || seg[g.instanceName]) continue;
          // profiled from its start (the task may become active in the middle of a request), and
          // not thinned by a stalled sampler (a loaded ASan run once kept a fast request with
          // few dumps of its 500 ms sleep: method2's share then "shrank" more than method3 grew)
          const tl = await apiJson('GET', `/api/v1/profile/segments/${encodeURIComponent(sp.segmentId)}/timeline`);
          const whole = tl.snapshots.length >= 0.5 * (g.duration / 10);
          if (tl.snapshots.length && tl.snapshots[0].time - Number(g.start) <= 100 && whole) {
            seg[g.instanceName] = sp.segmentId;
            segStart[sp.segmentId] = Number(g.start);
          }
        }
        return seg['fast-1'] && seg['slow-1'];
      }, 120000, 'a profiled request of each instance');
    } finally {
      traffic = false;
      await Promise.all(pumps);
    }
  });

  await S.step('compare: method3 is coloured as grown and listed first among the changes', async () => {
    await page.goto(`${BASE}/#/compare?base=${encodeURIComponent('segment:' + seg['fast-1'])}&target=${encodeURIComponent('segment:' + seg['slow-1'])}`);
    await page.waitForSelector('table.changes tr.change', { timeout: 30000 });
    const first = await page.$eval('table.changes tr.change', (r) => [r.dataset.sig, Number(r.dataset.delta)]);
    // fast: ~60 of ~560 ms in method3; slow: ~240 of ~740 ms (+22 points); dumps a loaded machine
    // skips make it smaller, so only "grew, and first" is required
    if (!/^method3 \(/.test(first[0]) || !(first[1] > 0.03)) throw new Error('first change: ' + first);
    const colour = await page.$eval(`.cmp-flame .frame[data-name="${first[0]}"]`, (e) => getComputedStyle(e).backgroundColor);
    const [r, g, b] = rgb(colour);
    if (!(r > b + 60 && r > g + 40)) throw new Error('method3 frame not red: ' + colour);
    // a frame whose share fell (the 500 ms after method3 is a smaller part of the slow request)
    const blue = await page.$$eval('.cmp-flame .frame', (els) => els.filter((e) => {
      const m = /rgba?\((\d+), (\d+), (\d+)/.exec(getComputedStyle(e).backgroundColor);
      return m && +m[3] > +m[1] + 40;
    }).length);
    if (blue < 1) throw new Error('no frame coloured as shrunk');
    const sides = await page.textContent('.cmp-sides');
    if (!sides.includes(seg['fast-1']) || !sides.includes(seg['slow-1'])) throw new Error('sides: ' + sides);
    await page.locator('.cmp-result').screenshot({ path: path.join(S.OUT, 'compare-diff-result.png') });
    await shot('diff');
  });

  await S.step('compare form: picking segments from the task fills the selectors', async () => {
    await page.goto(`${BASE}/#/compare`);
    await page.waitForSelector('#cmp-base-task option', { state: 'attached' });
    await page.waitForFunction(() => document.querySelector('#cmp-base').value.startsWith('segment:'));
    await page.fill('#cmp-base', 'segment:' + seg['slow-1']);
    await page.fill('#cmp-target', 'segment:' + seg['fast-1']);
    await page.click('#cmp-go');
    await page.waitForSelector('table.changes tr.change');
    const first = await page.$eval('table.changes tr.change', (r) => [r.dataset.sig, Number(r.dataset.delta)]);
    if (!/^method3 \(/.test(first[0]) || !(first[1] < -0.03)) throw new Error('reversed first change: ' + first);
  });

  await S.step('timeline: one column per dump under the span bars; a brushed range re-analyses to its frames', async () => {
    const s = seg['slow-1'];
    await page.goto(`${BASE}/#/tasks/${encodeURIComponent(taskId)}/segments/${encodeURIComponent(s)}`);
    await page.waitForSelector('.timeline-card:not([hidden]) canvas.timeline-dumps', { timeout: 30000 });
    await page.waitForSelector('.analysis-card .tree-box');
    const spans = await page.$$eval('.timeline-span', (els) => els.length);
    if (spans < 1) throw new Error('no span bar');
    const info = await page.textContent('.timeline-range');
    const nDumps = Number((/^(\d+) dumps/.exec(info) || [])[1]);
    const tl = await apiJson('GET', `/api/v1/profile/segments/${encodeURIComponent(s)}/timeline`);
    if (nDumps !== tl.snapshots.length || nDumps < 1) throw new Error(`timeline info: ${info} (API: ${tl.snapshots.length} dumps)`);
    // The native leaf is libc's sleep under sleep_ms; how many frames up method3 is depends on
    // the build (spend is a tail call in release, a frame of its own at -O1) and on which of the
    // short windows of method2 and method1 a loaded machine's dumps hit. So each "colour by"
    // level's legend is checked against the API's stacks, and some level must name both method3
    // and the 500 ms after it (handle_seed_request).
    let named = false;
    for (let lv = 0; lv <= 5; lv++) {
      await page.selectOption('.timeline-level', String(lv));
      const keys = await page.$$eval('.timeline-key', (els) => els.map((e) => e.dataset.name));
      // the page's legend is the API's dumps at that level (names by count, the first 12)
      const want = leafLegend(dumpFunctions(tl, lv)).slice(0, 12).map((l) => l.name);
      if (keys.join('|') !== want.join('|')) {
        throw new Error(`legend at level ${lv}: ${keys} (API: ${want})\n${describeDumps(tl, segStart[s])}`);
      }
      if (keys.some((k) => /^method3 \(/.test(k)) && keys.some((k) => /^handle_seed_request \(/.test(k))) named = true;
    }
    if (!named) throw new Error(`no level names method3 and handle_seed_request\n${describeDumps(tl, segStart[s])}`);
    // brush over the dumps taken in method3's own 200 ms (method3 on the stack, method2 not):
    // their times come from the API, the axis from the view (data-t0/t1), whatever dumps a loaded
    // machine skipped
    const own = tl.snapshots.filter((x) => {
      const fr = tl.stacks[x.stack].map((i) => tl.frames[i]);
      return fr.some((f) => /^method3 \(/.test(f)) && !fr.some((f) => /^method[12] \(/.test(f));
    }).map((x) => x.time);
    if (own.length < 2) throw new Error('fewer than 2 dumps in method3 itself: ' + own.length);
    const [t0, t1] = await page.$eval('.timeline', (e) => [Number(e.dataset.t0), Number(e.dataset.t1)]);
    const box = await page.$eval('canvas.timeline-dumps', (c) => { c.scrollIntoView({ block: 'center' }); const r = c.getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; });
    const xAt = (t) => box[0] + ((t - t0) / (t1 - t0)) * box[2];
    const y = box[1] + box[3] / 2;
    await page.mouse.move(xAt(own[0]) + 0.5, y);
    await page.mouse.down();
    await page.mouse.move((xAt(own[0]) + xAt(own[own.length - 1])) / 2, y, { steps: 4 });
    await page.mouse.move(Math.max(xAt(own[own.length - 1]) + 0.5, xAt(own[0]) + 5), y, { steps: 4 });
    await page.mouse.up();
    await page.waitForFunction(() => /brushed/.test((document.querySelector('.analysis-label') || {}).textContent || ''), null, { timeout: 30000 });
    await page.waitForSelector('.analysis-card .tree-box .stack-tree tr.node');
    const range = await page.$eval('.timeline', (e) => e.dataset.range);
    if (!/^\d+-\d+$/.test(range)) throw new Error('range: ' + range);
    const sigs = await page.$$eval('.analysis-card .tree-box .stack-tree tr.node td.sig .code', (els) => els.map((e) => e.dataset.sig));
    if (!sigs.some((x) => /^method3 \(/.test(x))) throw new Error('brushed tree lacks method3: ' + sigs);
    if (sigs.some((x) => /^method[12] \(/.test(x))) throw new Error('brushed tree has frames from after the range: ' + sigs);
    await page.locator('.timeline-card').screenshot({ path: path.join(S.OUT, 'compare-timeline.png') });
    await shot('timeline-page');
    // "Whole segment" goes back to every dump: the root holds more dumps than the brushed range
    const firstCount = () => page.$eval('.analysis-card .tree-box .stack-tree tr.node', (r) => Number(r.querySelectorAll('td.num')[2].textContent));
    const brushedCount = await firstCount();
    await page.click('.timeline-whole');
    await page.waitForFunction(() => /all dumps/.test((document.querySelector('.analysis-label') || {}).textContent || ''), null, { timeout: 30000 });
    await page.waitForSelector('.analysis-card .tree-box .stack-tree tr.node');
    const wholeCount = await firstCount();
    if (!(wholeCount > brushedCount)) throw new Error(`whole segment: root count ${wholeCount}, brushed ${brushedCount}`);
  });

  await S.step('no page errors', async () => {
    if (pageErrors.length) throw new Error(pageErrors.join('\n'));
  });
} finally {
  traffic = false;
  await S.finish();
}
