// ranges.js - the time windows sent to /api/v1/profile/analyze for a selected span, as
// SkyWalking's UI computes them:
//   Include Children: one window, [span.startTime, span.endTime].
//   Exclude Children: the span's window minus the windows of its child spans (merged when they
//   overlap, clipped to the span); empty windows are dropped.
// A child is a span of the same segment whose parentSpanId is the span's id, or a span of
// another segment whose reference points at this span (cross-thread continuation).

export function childSpans(span, allSpans) {
  return allSpans.filter((s) => {
    if (s === span) return false;
    if (s.segmentId === span.segmentId) return s.parentSpanId === span.spanId;
    return (s.refs || []).some((r) => r.parentSegmentId === span.segmentId && r.parentSpanId === span.spanId);
  });
}

export function excludeChildren(span, children) {
  const start = Number(span.startTime);
  const end = Number(span.endTime);
  const cs = children
    .map((c) => ({ start: Math.max(start, Number(c.startTime)), end: Math.min(end, Number(c.endTime)) }))
    .filter((c) => c.end >= c.start)
    .sort((a, b) => a.start - b.start);
  const merged = [];
  for (const c of cs) {
    const last = merged[merged.length - 1];
    if (last && c.start <= last.end) last.end = Math.max(last.end, c.end);
    else merged.push({ ...c });
  }
  const out = [];
  let cursor = start;
  for (const c of merged) {
    if (c.start > cursor) out.push({ start: cursor, end: c.start });
    cursor = Math.max(cursor, c.end);
  }
  if (end > cursor) out.push({ start: cursor, end });
  return out;
}

export function analyzeQueries(span, allSpans, mode) {
  const ranges = mode === 'exclude'
    ? excludeChildren(span, childSpans(span, allSpans))
    : [{ start: Number(span.startTime), end: Number(span.endTime) }];
  return ranges.map((r) => ({ segmentId: span.segmentId, timeRange: { start: r.start, end: r.end } }));
}
