// compare_logic.test.mjs - node:test unit tests of the pure parts of the Compare page and the
// request timeline (web/src/compare.js, timeline.js): selectors in the CLI's text form, the merged
// tree as flame graph nodes, the change colours, the dumps' functions up the stack and the period.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseSelector, formatSelector, diffTrees, diffColor, FULL_AT } from '../../web/src/compare.js';
import { dumpFunctions, dumpPeriod, leafLegend } from '../../web/src/timeline.js';

test('selectors: kinds, ranges, types, bare ids; round trip', () => {
  assert.deepEqual(parseSelector('seg-1'), { kind: 'segment', segmentId: 'seg-1' });
  assert.deepEqual(parseSelector('segment:a.b@10..20'), { kind: 'segment', segmentId: 'a.b', timeRange: { start: 10, end: 20 } });
  assert.deepEqual(parseSelector('task:1_c3Zj/=.1@5..5'), { kind: 'task', taskId: '1_c3Zj/=.1', timeRange: { start: 5, end: 5 } });
  assert.deepEqual(parseSelector('pprof:t1#cpu'), { kind: 'pprof', taskId: 't1', sampleType: 'cpu' });
  assert.deepEqual(parseSelector('jfr:t2#alloc'), { kind: 'jfr', taskId: 't2', eventType: 'alloc' });
  for (const s of ['segment:a.b@10..20', 'task:t@1..2', 'pprof:t#cpu', 'jfr:t', 'segment:x']) {
    assert.equal(formatSelector(parseSelector(s)), s);
  }
  for (const bad of ['', 'segment:', 'segment:x@20..10', 'segment:x@a..b', 'pprof:x@1..2', 'task:x#cpu']) {
    assert.throws(() => parseSelector(bad), Error, bad);
  }
});

test('diff trees: nested by parentId, width = mean share, one-side nodes kept', () => {
  const doc = { nodes: [
    { id: 1, parentId: 0, codeSignature: 'main', base: 10, target: 20, baseShare: 1, targetShare: 1, delta: 0 },
    { id: 2, parentId: 1, codeSignature: 'slow', base: 1, target: 10, baseShare: 0.1, targetShare: 0.5, delta: 0.4 },
    { id: 3, parentId: 1, codeSignature: 'gone', base: 4, target: 0, baseShare: 0.4, targetShare: 0, delta: -0.4 },
  ] };
  const [root] = diffTrees(doc);
  assert.equal(root.sig, 'main');
  assert.equal(root.count, 1000);
  assert.deepEqual(root.children.map((c) => [c.sig, c.count, c.delta]), [['slow', 300, 0.4], ['gone', 200, -0.4]]);
  assert.ok(root.children.reduce((a, c) => a + c.count, 0) <= root.count);
});

test('diff colours: red grows, blue shrinks, grey unchanged, stronger with the change', () => {
  const hsl = (c) => /^hsl\((\d+), (\d+)%, (\d+)%\)$/.exec(c).slice(1).map(Number);
  const [hUp, sUp, lUp] = hsl(diffColor(FULL_AT));
  const [hDown] = hsl(diffColor(-FULL_AT));
  assert.equal(hUp, 0);
  assert.equal(hDown, 215);
  assert.equal(hsl(diffColor(0))[1], 8);
  const [, sSmall, lSmall] = hsl(diffColor(0.02));
  assert.ok(sSmall < sUp && lSmall > lUp);
  assert.deepEqual(diffColor(1), diffColor(FULL_AT));
});

test('timeline: functions up the stack, period, legend', () => {
  const doc = {
    frames: ['main (a.c:1)', 'method3 (a.c:30)', 'sleep_ms (a.c:9)', 'clock_nanosleep@GLIBC (x.c)'],
    stacks: [[0, 1, 2, 3], [0, 2, 3], []],
    snapshots: [{ time: 0, stack: 0, leaf: 3 }, { time: 10, stack: 0, leaf: 3 }, { time: 20, stack: 1, leaf: 3 },
      { time: 30, stack: 2, leaf: -1 }],
  };
  assert.deepEqual(dumpFunctions(doc, 0), ['clock_nanosleep@GLIBC (x.c)', 'clock_nanosleep@GLIBC (x.c)', 'clock_nanosleep@GLIBC (x.c)', '(empty stack)']);
  assert.deepEqual(dumpFunctions(doc, 2), ['method3 (a.c)', 'method3 (a.c)', 'main (a.c)', '(empty stack)']);
  assert.deepEqual(dumpFunctions(doc, 9), ['main (a.c)', 'main (a.c)', 'main (a.c)', '(empty stack)']);
  assert.deepEqual(leafLegend(dumpFunctions(doc, 2)).map((l) => [l.name, l.count]),
    [['method3 (a.c)', 2], ['(empty stack)', 1], ['main (a.c)', 1]]);
  assert.equal(dumpPeriod([0, 10, 20, 35, 45]), 10);
  assert.equal(dumpPeriod([5]), 10);
});
