// bench_compare_timeline.mjs - issue 17's rendering targets, measured in the page (headless
// Chromium, playwright-core from web/node_modules, /usr/bin/chromium): time from the call until
// the next frame has been painted for
//   * a 100,000-node flame graph: today's renderer (flame.js, hue colours) and the diff flame
//     graph of the Compare page (compare.js: diffTrees of a 100,000-node merged tree + flame.js
//     with the change colours), side by side;
//   * a 10,000-snapshot request timeline (timeline.js: span bars + one canvas column per dump);
// each run 10 times after a warm-up; median, min and max printed. Target: 500 ms each. Each time
// includes building the view's nodes from the API's JSON shape (flame: nested nodes from a flat
// list; diff: diffTrees of the compare answer). On a loaded machine the minimum is the figure
// closest to the view's own cost; the median shows what a user waits.
// Run: node bench/web/bench_compare_timeline.mjs   (not part of ctest)
import http from 'node:http';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const webDir = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../web');
const { chromium } = createRequire(path.join(webDir, 'package.json'))('playwright-core');
const N_NODES = Number(process.argv[2]) || 100000;
const N_SNAPS = Number(process.argv[3]) || 10000;

const page = `<!DOCTYPE html><html><body style="width:1280px"><div id="f" style="width:1240px"></div>
<div id="t" style="width:1240px"></div>
<script type="module">
import { flameGraph } from '/src/flame.js';
import { diffTrees, diffColor } from '/src/compare.js';
import { timelineView } from '/src/timeline.js';
let seed = 42;
const rnd = (m) => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed % m; };
const sig = (i) => '/srv/app/mod_' + (i % 97) + '.py.fn_' + (i % 3000) + ': ' + (i % 400);
// A random tree of n nodes (depth <= 40), parents first, weights summing up the tree.
function shape(n) {
  const parent = [-1], depth = [0];
  for (let i = 1; i < n; i++) { let p; do { p = rnd(i); } while (depth[p] >= 40); parent.push(p); depth.push(depth[p] + 1); }
  const w = Array.from({ length: n }, () => 1 + rnd(3)), w2 = Array.from({ length: n }, () => 1 + rnd(5));
  for (let i = n - 1; i > 0; i--) { w[parent[i]] += w[i]; w2[parent[i]] += w2[i]; }
  return { parent, w, w2 };
}
function nested(s) {
  const nodes = s.parent.map((p, i) => ({ sig: sig(i), count: s.w[i], duration: s.w[i] * 10, self: 0, children: [] }));
  s.parent.forEach((p, i) => { if (p >= 0) nodes[p].children.push(nodes[i]); });
  return [nodes[0]];
}
function compareDoc(s) {
  const tb = s.w[0], tt = s.w2[0];
  return { base: { total: tb }, target: { total: tt }, nodes: s.parent.map((p, i) => ({ id: i + 1, parentId: p + 1,
    codeSignature: sig(i), base: s.w[i], target: s.w2[i], baseShare: s.w[i] / tb, targetShare: s.w2[i] / tt,
    delta: s.w2[i] / tt - s.w[i] / tb })) };
}
function timelineDoc(n) {
  const frames = Array.from({ length: 60 }, (_, i) => sig(i));
  const stacks = Array.from({ length: 200 }, () => Array.from({ length: 3 + rnd(20) }, () => rnd(60)));
  const t0 = 1700000000000;
  return { frames, stacks, snapshots: Array.from({ length: n }, (_, i) => { const st = rnd(200);
    return { time: t0 + i * 10, sequence: i, depth: stacks[st].length, leaf: stacks[st][stacks[st].length - 1], stack: st }; }) };
}
const spans = (n) => [{ spanId: 0, parentSpanId: -1, startTime: 1700000000000, endTime: 1700000000000 + n * 10, endpointName: '/', profiled: true },
  { spanId: 1, parentSpanId: 0, startTime: 1700000000000 + n * 2, endTime: 1700000000000 + n * 6, endpointName: 'SELECT', profiled: false }];
const frame = () => new Promise((r) => requestAnimationFrame(() => setTimeout(r)));
async function time(fn) { const t0 = performance.now(); const v = fn(); await frame(); const ms = performance.now() - t0; v.destroy(); return ms; }
const s = shape(${N_NODES});
const doc = compareDoc(s);
const tl = timelineDoc(${N_SNAPS});
const f = document.getElementById('f'), t = document.getElementById('t');
const runs = { today: [], diff: [], timeline: [] };
for (let i = 0; i < 11; i++) {
  const a = await time(() => flameGraph(f, nested(s)));
  const b = await time(() => flameGraph(f, diffTrees(doc), { color: (n) => diffColor(n.delta) }));
  const c = await time(() => timelineView(t, tl, spans(${N_SNAPS}), () => {}));
  if (i) { runs.today.push(a); runs.diff.push(b); runs.timeline.push(c); }
}
window.result = { runs, drawn: document.querySelectorAll('#f .frame').length };
</script></body></html>`;

const server = http.createServer((req, res) => {
  if (req.url === '/') { res.setHeader('Content-Type', 'text/html'); res.end(page); return; }
  const f = path.join(webDir, path.normalize(req.url).replace(/^(\.\.[/\\])+/, ''));
  try {
    const body = readFileSync(f);
    res.setHeader('Content-Type', f.endsWith('.js') ? 'text/javascript' : 'text/plain');
    res.end(body);
  } catch { res.statusCode = 404; res.end(); }
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
const p = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
p.on('pageerror', (e) => { console.error('page error:', e.message); process.exitCode = 1; });
await p.goto(`http://127.0.0.1:${server.address().port}/`);
const { runs, drawn } = await (await p.waitForFunction(() => window.result, null, { timeout: 600000 })).jsonValue();
await browser.close();
server.close();
const med = (v) => [...v].sort((a, b) => a - b)[v.length >> 1];
const row = (name, v) => console.log(`${name.padEnd(56)} ${med(v).toFixed(0).padStart(9)} ${Math.min(...v).toFixed(0).padStart(6)} ${Math.max(...v).toFixed(0).padStart(6)}`);
console.log(`load average: ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`);
console.log(`${'view (10 runs, ms; target 500 ms)'.padEnd(56)} ${'median'.padStart(9)} ${'min'.padStart(6)} ${'max'.padStart(6)}`);
row(`flame graph, ${N_NODES} nodes: today's view (flame.js, hues)`, runs.today);
row(`diff flame graph, ${N_NODES} merged nodes (compare.js)`, runs.diff);
row(`request timeline, ${N_SNAPS} dumps (timeline.js)`, runs.timeline);
console.log(`(frames drawn by the last flame graph: ${drawn}; frames narrower than half a pixel are not drawn)`);
