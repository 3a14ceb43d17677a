// render_bench.mjs - time to render the web UI's stack tree table and flame graph for synthetic
// analyses of 1k, 5k and 20k frames in headless Chromium (wall time until the next frame after
// rendering, so layout and paint are included). Run: node bench/web/render_bench.mjs
// (needs web/node_modules: any build of the tree installs it). Not part of ctest.
import http from 'node:http';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const webDir = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../web');
const { chromium } = createRequire(path.join(webDir, 'package.json'))('playwright-core');

const page = `<!DOCTYPE html><html><body><div id="t"></div><div id="f" style="width:1200px"></div>
<script type="module">
import { buildTrees } from '/src/tree.js';
import { treeTable } from '/src/treetable.js';
import { flameGraph } from '/src/flame.js';
function synth(n) {
  const els = [{ id: 1, parentId: 0, codeSignature: 'root', duration: 0, durationChildExcluded: 0, count: 0 }];
  const depth = [0];
  let seed = 42; const rnd = (m) => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed % m; };
  for (let i = 1; i < n; i++) { let p; do { p = rnd(i); } while (depth[p] >= 40); depth.push(depth[p] + 1);
    els.push({ id: i + 1, parentId: p + 1, codeSignature: '/srv/app/mod_' + (i % 97) + '.py.fn_' + (i % 2000) + ': ' + i,
               duration: 10, durationChildExcluded: 5, count: 1 + rnd(3) }); }
  for (let i = n - 1; i > 0; i--) els[els[i].parentId - 1].count += els[i].count;
  return { trees: [{ elements: els }] };
}
const frame = () => new Promise((r) => requestAnimationFrame(() => setTimeout(r)));
const out = [];
for (const n of [1000, 1000, 5000, 20000]) {
  const a = synth(n);
  let t0 = performance.now();
  const trees = buildTrees(a);
  treeTable(document.getElementById('t'), trees);
  await frame();
  const tree = performance.now() - t0;
  t0 = performance.now();
  const fg = flameGraph(document.getElementById('f'), trees);
  await frame();
  out.push({ n, tree_ms: Math.round(tree), flame_ms: Math.round(performance.now() - t0),
             rows_shown: document.querySelectorAll('#t tr.node:not([hidden])').length,
             frames_drawn: document.querySelectorAll('#f .frame').length });
  fg.destroy();
}
window.result = out.slice(1); // the first 1k run warms up the JIT and fonts
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
const p = await browser.newPage({ viewport: { width: 1440, height: 1000 } });
await p.goto(`http://127.0.0.1:${server.address().port}/`);
const result = await (await p.waitForFunction(() => window.result, null, { timeout: 300000 })).jsonValue();
await browser.close();
server.close();
console.log('frames   tree table ms   flame graph ms   rows shown   frames drawn');
for (const r of result) {
  console.log(`${String(r.n).padEnd(8)} ${String(r.tree_ms).padStart(13)} ${String(r.flame_ms).padStart(16)} ` +
    `${String(r.rows_shown).padStart(12)} ${String(r.frames_drawn).padStart(14)}`);
}
