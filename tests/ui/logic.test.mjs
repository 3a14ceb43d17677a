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
