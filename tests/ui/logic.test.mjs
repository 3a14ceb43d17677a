// logic.test.mjs - node:test unit tests of the UI's pure logic (web/src/ranges.js, tree.js):
// Include/Exclude Children time ranges and "group by function" merging.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { childSpans, excludeChildren, analyzeQueries } from '../../web/src/ranges.js';
import { buildTrees, functionOf, groupByFunction } from '../../web/src/tree.js';
import { sparkPath, suggestedThreshold } from '../../web/src/spark.js';

const span = (segmentId, spanId, parentSpanId, startTime, endTime, refs = []) =>
  ({ segmentId, spanId, parentSpanId, startTime, endTime, refs });

test('include children: one range, the span itself', () => {
  const s = span('seg', 0, -1, 1000, 1100);
  assert.deepEqual(analyzeQueries(s, [s], 'include'), [{ segmentId: 'seg', timeRange: { start: 1000, end: 1100 } }]);
});

test('exclude children: span minus merged, clipped child ranges; empty ranges dropped', () => {
  const root = span('seg', 0, -1, 1000, 1100);
  const spans = [root,
    span('seg', 1, 0, 1020, 1040), span('seg', 2, 0, 1030, 1050),   // overlapping: merged to 1020..1050
    span('seg', 3, 0, 1090, 1200),                                  // clipped to 1090..1100
    span('seg', 4, 1, 1000, 1100),                                  // grandchild: not a child of root
    span('other', 0, -1, 1060, 1070, [{ parentSegmentId: 'seg', parentSpanId: 0 }]), // cross-thread child
  ];
  assert.deepEqual(childSpans(root, spans).map((s) => s.segmentId + ':' + s.spanId), ['seg:1', 'seg:2', 'seg:3', 'other:0']);
  assert.deepEqual(excludeChildren(root, childSpans(root, spans)),
    [{ start: 1000, end: 1020 }, { start: 1050, end: 1060 }, { start: 1070, end: 1090 }]);
  const q = analyzeQueries(root, spans, 'exclude');
  assert.equal(q.length, 3);
  assert.ok(q.every((x) => x.segmentId === 'seg'));
});

test('exclude children: children covering the span leave nothing; no children leaves the span', () => {
  const root = span('seg', 0, -1, 1000, 1100);
  assert.deepEqual(excludeChildren(root, [span('seg', 1, 0, 1000, 1100)]), []);
  assert.deepEqual(excludeChildren(root, [span('seg', 1, 0, 900, 1200)]), []);
  assert.deepEqual(excludeChildren(root, []), [{ start: 1000, end: 1100 }]);
  assert.deepEqual(excludeChildren(root, [span('seg', 1, 0, 1000, 1050)]), [{ start: 1050, end: 1100 }]);
});

test('functionOf strips the line of Python/Java and native signatures', () => {
  assert.equal(functionOf('/srv/app.py.method3: 50'), '/srv/app.py.method3');
  assert.equal(functionOf('com.shop.Orders.place: 12'), 'com.shop.Orders.place');
  assert.equal(functionOf('method3 (demo_service.c:122)'), 'method3 (demo_service.c)');
  assert.equal(functionOf('clock_nanosleep@GLIBC_2.2.5 (clock_nanosleep.c:48)'), 'clock_nanosleep@GLIBC_2.2.5 (clock_nanosleep.c)');
  assert.equal(functionOf('no_line_here'), 'no_line_here');
});

const el = (id, parentId, codeSignature, duration, durationChildExcluded, count) =>
  ({ id, parentId, codeSignature, duration, durationChildExcluded, count });

test('buildTrees links elements by parentId (root parentId 0)', () => {
  const t = buildTrees({ trees: [{ elements: [el(1, 0, 'A', 40, 0, 5), el(2, 1, 'B', 40, 30, 5), el(3, 2, 'C', 10, 10, 3), el(4, 2, 'D', 0, 0, 1)] }] });
  assert.equal(t.length, 1);
  assert.equal(t[0].sig, 'A');
  assert.deepEqual(t[0].children[0].children.map((c) => c.sig), ['C', 'D']);
});

test('group by function: siblings of one function merge, sums add, self recomputed', () => {
  const trees = buildTrees({ trees: [{ elements: [
    el(1, 0, 'route (d.c:10)', 100, 0, 10),
    el(2, 1, 'method3 (d.c:122)', 30, 10, 3),
    el(3, 1, 'method3 (d.c:123)', 60, 20, 6),
    el(4, 2, 'method2 (d.c:116)', 20, 20, 2),
    el(5, 3, 'method2 (d.c:117)', 40, 40, 4),
  ] }] });
  const g = groupByFunction(trees);
  assert.equal(g.length, 1);
  const m3 = g[0].children;
  assert.equal(m3.length, 1);
  assert.equal(m3[0].sig, 'method3 (d.c)');
  assert.equal(m3[0].count, 9);
  assert.equal(m3[0].duration, 90);
  assert.equal(m3[0].children.length, 1);
  assert.equal(m3[0].children[0].count, 6);
  assert.equal(m3[0].children[0].duration, 60);
  assert.equal(m3[0].self, 30);           // 90 - 60
  assert.equal(g[0].self, 10);            // 100 - 90
});

test('sparkPath: max at the top, min at the bottom, evenly spaced; flat and empty cases', () => {
  assert.equal(sparkPath([0, 10, 5], 12, 12, 1), 'M1.0,11.0 L6.0,1.0 L11.0,6.0');
  assert.equal(sparkPath([3, 3], 10, 20, 0), 'M0.0,10.0 L10.0,10.0');
  assert.equal(sparkPath([7], 10, 20, 0), 'M0.0,10.0');
  assert.equal(sparkPath([], 10, 20), '');
  assert.equal(sparkPath([NaN, 4], 10, 10, 0), 'M0.0,10.0 L10.0,0.0');
});

test('suggestedThreshold: the p90 rounded down to 10 ms', () => {
  assert.equal(suggestedThreshold({ p90: 237 }), 230);
  assert.equal(suggestedThreshold({ p90: 0 }), 0);
  assert.equal(suggestedThreshold(null), 0);
});

// ---- readable frames (frames.js), agent-frame folding, search share and focus (focus.js) ----
import { readFileSync } from 'node:fs';
import { parseFrame, frameLabel, frameName, foldAgentFrames, isAgentFrame } from '../../web/src/frames.js';
import { matcher, matchShare, sharePct, calleesOf, callersOf } from '../../web/src/focus.js';

// The vectors are shared with the C parser's unit test (tests/unit/common/test_frame_sig.c).
function frameVectors() {
  const text = readFileSync(new URL('../data/frame_sigs.tsv', import.meta.url), 'utf8');
  const un = (x) => (x === '-' ? '' : x);
  return text.split('\n').filter((l) => l && !l.startsWith('#')).map((l) => {
    const [sig, func, loc, lang, agent, name] = l.split('\t').map(un);
    return { sig, func, loc, lang, agent: agent === '1', name };
  });
}

test('frames: one parser per language, function first, short location (tests/data/frame_sigs.tsv)', () => {
  const cases = frameVectors();
  assert.ok(cases.length >= 30, cases.length);
  for (const c of cases) {
    const f = parseFrame(c.sig);
    assert.deepEqual([f.func, f.loc, f.lang, f.agent], [c.func, c.loc, c.lang, c.agent], c.sig);
    assert.equal(frameLabel(c.sig), c.loc ? c.func + '  ' + c.loc : c.func);
    assert.equal(frameName(c.sig), c.name, c.sig);
  }
});

test('frames: skyprof instrumentation frames are agent frames, the application\'s are not', () => {
  assert.ok(isAgentFrame('/usr/lib/python3/dist-packages/skyprof/instrument/http_server.py._skyprof_do: 34'));
  assert.ok(isAgentFrame('/work/main/python/skyprof/_tracer.py.enter: 10'));
  assert.ok(isAgentFrame('skp_sampler_tick (libskyprof.so)'));
  assert.ok(!isAgentFrame('/srv/app/examples/python/seed_app.py.do_POST: 44'));
  assert.ok(!isAgentFrame('/srv/skyprof_demo/app.py.run: 3'));
  assert.ok(!isAgentFrame('method3 (demo_service.c:42)'));
});

const n = (sig, count, children = [], self = null) =>
  ({ sig, count, duration: count * 10, self: (self ?? (count - children.reduce((a, c) => a + c.count, 0))) * 10, children });
const AG = '/x/skyprof/instrument/wsgi.py.__call__: 88';
const AG2 = '/x/skyprof/_tracer.py.enter: 5';

test('foldAgentFrames: children move to the caller, equal siblings merge, shares are unchanged', () => {
  const tree = [n('serve', 10, [
    n(AG, 7, [n('handle', 5, [n('m3', 4)]), n(AG2, 1)]),  // AG: 1 self sample; AG2: 1 self sample
    n('handle', 3, [n('m3', 1)]),
  ])];
  const out = foldAgentFrames(tree);
  assert.equal(out.length, 1);
  const serve = out[0];
  assert.equal(serve.count, 10);
  assert.deepEqual(serve.children.map((c) => [c.sig, c.count]), [['handle', 8]]);
  assert.equal(serve.self, 20);   // serve had 0 self; AG's and AG2's 1 sample each (10 ms each)
  assert.deepEqual(serve.children[0].children.map((c) => [c.sig, c.count]), [['m3', 5]]);
  const sum = (list) => list.reduce((a, c) => a + c.count, 0);
  // every node: count = self samples + children's counts (self in duration units here)
  const check = (x) => { assert.equal(x.count * 10, x.self + sum(x.children) * 10, x.sig); x.children.forEach(check); };
  check(serve);
  // the input is not modified, a root agent frame stays (no caller to fold into)
  assert.equal(tree[0].children[0].sig, AG);
  assert.deepEqual(foldAgentFrames([n(AG, 2, [n('x', 2)])]).map((r) => r.sig), [AG]);
});

test('search share counts a sample once even when several frames of its stack match', () => {
  const tree = [n('serve', 10, [n('do_POST a.py:1', 8, [n('do_POST_inner', 6)]), n('idle', 2)])];
  const s = matchShare(tree, matcher('do_post'));
  assert.deepEqual([s.hits, s.total, s.frames], [8, 10, 2]);
  assert.equal(sharePct(s.hits, s.total), '80 %');
  assert.equal(sharePct(89, 1000), '8.9 %');
  assert.equal(matcher('  '), null);
  // labels are searched too: "seed_app.py:44" matches the Python signature
  assert.ok(matcher('seed_app.py:44')('/srv/seed_app.py.do_POST: 44'));
});

test('focus: callees merge every outermost occurrence; callers are the inverted paths', () => {
  const tree = [
    n('main', 10, [n('a', 6, [n('f', 4, [n('g', 3), n('f', 1)])]), n('b', 4, [n('f', 2, [n('g', 2)])])]),
    n('f', 5, [n('h', 5)]),   // a root occurrence (no caller)
  ];
  const callees = calleesOf(tree, 'f');
  assert.equal(callees.length, 1);
  assert.equal(callees[0].count, 11);
  assert.deepEqual(callees[0].children.map((c) => [c.sig, c.count]), [['g', 5], ['f', 1], ['h', 5]]);
  const callers = callersOf(tree, 'f');
  assert.equal(callers.length, 1);
  assert.equal(callers[0].sig, 'f');
  assert.equal(callers[0].count, 11);
  assert.deepEqual(callers[0].children.map((c) => [c.sig, c.count]), [['a', 4], ['b', 2]]);
  assert.deepEqual(callers[0].children[0].children.map((c) => [c.sig, c.count]), [['main', 4]]);
  assert.equal(callers[0].self, 50);  // the root occurrence's 5 samples have no caller
  assert.deepEqual(calleesOf(tree, 'nope'), []);
  assert.deepEqual(callersOf(tree, 'nope'), []);
});

// ---- continuous.js: the policy editor's rules (skyprofd's texts) and the chart geometry ----
import { itemError, policyError, toPolicy, fromPolicy, chartGeometry } from '../../web/src/continuous.js';

test('continuous: item rules in OAP order with its texts', () => {
  const it = (o) => ({ type: 'ENDPOINT_AVG_RESPONSE_TIME', threshold: '200', period: 10, count: 3, uris: '', ...o });
  assert.equal(itemError(it()), null);
  assert.equal(itemError(it({ threshold: '200.5' })), null);
  assert.deepEqual(itemError(it({ period: 0 })), { field: 'period', msg: 'period must be bigger than zero' });
  assert.deepEqual(itemError(it({ count: 0 })), { field: 'count', msg: 'count must bigger than zero' });
  assert.deepEqual(itemError(it({ count: 11 })), { field: 'count', msg: 'count must be equal to or smaller than period' });
  assert.deepEqual(itemError(it({ threshold: 'x' })), { field: 'threshold', msg: 'parsing threshold error' });
  assert.deepEqual(itemError(it({ type: 'PROCESS_CPU', threshold: '101' })),
    { field: 'threshold', msg: 'the process CPU percent should in [0-100]' });
  assert.deepEqual(itemError(it({ type: 'SYSTEM_LOAD', threshold: '-1' })),
    { field: 'threshold', msg: 'the system load must bigger than zero' });
  assert.deepEqual(itemError(it({ type: 'PROCESS_CPU', threshold: '50', uris: '/a' })),
    { field: 'uris', msg: 'uriList and uriRegex apply to HTTP and ENDPOINT items only' });
  const rows = [it({ target: 'TRACE' }), it({ target: 'TRACE' })];
  assert.equal(policyError(rows, { executeDuration: 60, silenceDuration: 0, maxTriggersPerHour: 6 }).msg,
    'contains multiple same monitor type ENDPOINT_AVG_RESPONSE_TIME in TRACE');
});

test('continuous: editor rows <-> SkyWalking input shape', () => {
  const rows = [{ target: 'TRACE', type: 'ENDPOINT_P99_RESPONSE_TIME', threshold: ' 500 ', period: '10', count: '4', uris: '/a, /b' },
    { target: 'TRACE', type: 'ENDPOINT_ERROR_RATE', threshold: '5', period: 6, count: 2, uris: '~^/api/' },
    { target: 'ON_CPU', type: 'PROCESS_CPU', threshold: '80', period: 10, count: 3, uris: '' }];
  const p = toPolicy(rows, { executeDuration: '60', silenceDuration: '0', maxTriggersPerHour: '2' });
  assert.deepEqual(p, { targets: [
    { targetType: 'TRACE', checkItems: [
      { type: 'ENDPOINT_P99_RESPONSE_TIME', threshold: '500', period: 10, count: 4, uriList: ['/a', '/b'] },
      { type: 'ENDPOINT_ERROR_RATE', threshold: '5', period: 6, count: 2, uriRegex: '^/api/' }] },
    { targetType: 'ON_CPU', checkItems: [{ type: 'PROCESS_CPU', threshold: '80', period: 10, count: 3 }] }],
  executeDuration: 60, silenceDuration: 0, maxTriggersPerHour: 2 });
  assert.deepEqual(fromPolicy(p).map((r) => r.uris), ['/a, /b', '~^/api/', '']);
});

test('continuous: chart geometry: gaps for empty slots, hits at or above the threshold', () => {
  const g = chartGeometry([null, 100, 250, null, 200, 50], 200, 102, 52, 1);
  assert.deepEqual(g.hits, [2, 4]);
  assert.equal(g.path.split('M').length - 1, 2); // two runs: a gap at slot 3
  assert.ok(g.thresholdY > 1 && g.thresholdY < 51);
  assert.equal(chartGeometry([], 10, 100, 50).path, '');
});
