// spark.js - sparklines for the endpoint statistics: a polyline path through the values scaled
// into a w x h box (pure, so the logic tests check it without a browser).

// SVG path "M x,y L x,y ..." for values left to right; all-equal or single values give a flat
// line in the middle; an empty list gives ''. y grows downwards (SVG), max at the top.
export function sparkPath(values, w, h, pad = 1) {
  const v = (values || []).map((x) => (Number.isFinite(x) ? x : 0));
  if (!v.length) return '';
  const max = Math.max(...v);
  const min = Math.min(...v);
  const span = max - min;
  const step = v.length > 1 ? (w - 2 * pad) / (v.length - 1) : 0;
  const y = (x) => (span === 0 ? h / 2 : pad + (h - 2 * pad) * (1 - (x - min) / span));
  return v.map((x, i) => (i ? 'L' : 'M') + (pad + i * step).toFixed(1) + ',' + y(x).toFixed(1)).join(' ');
}

// The task form's pre-filled threshold for an endpoint: its p90 rounded down to 10 ms, so the
// slowest tenth of requests get profiled.
export function suggestedThreshold(stat) {
  const p = stat && Number(stat.p90);
  return Number.isFinite(p) && p > 0 ? Math.floor(p / 10) * 10 : 0;
}
