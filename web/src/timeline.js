// timeline.js - where in the request the time went: a segment's span bars (like SkyWalking's
// trace view) over one column per thread dump, coloured by the dump's leaf function, on one time
// axis covering the request. "Colour by" can move up the stack (a native leaf is often libc's
// sleep or a helper; a few frames up names the application's function). Dragging across the dumps (brushing) selects a time range and calls
// onRange(start, end) so the caller re-analyses just that range; "Whole segment" calls
// onRange(null, null). Keyboard: with the timeline focused, arrow keys move a selection of the
// dumps one column at a time, Shift+arrows widen it, Enter analyses it, Escape clears it.
// The dumps are drawn on a <canvas> (10,000 columns cost one fillRect each); spans are <div>s.
import { functionOf, frameLabel } from './frames.js';

const SPAN_ROW = 16;
const DUMP_H = 56;

export function leafColor(name) {
  let x = 2166136261;
  for (let i = 0; i < name.length; i++) x = Math.imul(x ^ name.charCodeAt(i), 16777619) >>> 0;
  return `hsl(${x % 360}, ${55 + (x >> 9) % 25}%, ${48 + (x >> 17) % 18}%)`;
}

// The dumps' period: the median gap between consecutive dumps (10 ms when there are < 2).
export function dumpPeriod(times) {
  const gaps = [];
  for (let i = 1; i < times.length; i++) if (times[i] > times[i - 1]) gaps.push(times[i] - times[i - 1]);
  if (!gaps.length) return 10;
  gaps.sort((a, b) => a - b);
  return gaps[gaps.length >> 1];
}

// The function of each dump's frame `level` frames above its leaf (clamped at the root):
// GET .../timeline's stacks (frame indexes, root first); '(empty stack)' for a dump without one.
export function dumpFunctions(doc, level = 0) {
  return (doc.snapshots || []).map((s) => {
    const st = doc.stacks && s.stack !== undefined ? doc.stacks[s.stack] : null;
    if (st && st.length) return functionOf(doc.frames[st[Math.max(0, st.length - 1 - level)]]);
    return s.leaf >= 0 ? functionOf(doc.frames[s.leaf]) : '(empty stack)';
  });
}

// Functions by number of dumps, most first: [{name, count, color}].
export function leafLegend(names) {
  const counts = new Map();
  for (const name of names) counts.set(name, (counts.get(name) || 0) + 1);
  return [...counts].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).map(([name, count]) => ({ name, count, color: leafColor(name) }));
}

export function timelineView(container, doc, spans, onRange) {
  const snaps = doc.snapshots || [];
  const times = snaps.map((s) => Number(s.time));
  const period = dumpPeriod(times);
  let t0 = Infinity;
  let t1 = -Infinity;
  for (const sp of spans) { t0 = Math.min(t0, Number(sp.startTime)); t1 = Math.max(t1, Number(sp.endTime)); }
  if (times.length) { t0 = Math.min(t0, times[0]); t1 = Math.max(t1, times[times.length - 1] + period); }
  if (!Number.isFinite(t0)) { t0 = 0; t1 = 1; }
  if (t1 <= t0) t1 = t0 + 1;
  let names = [];
  const colorOf = new Map();

  container.classList.add('timeline');
  container.dataset.t0 = String(t0);   // the axis, for tests and tools mapping times to pixels
  container.dataset.t1 = String(t1);
  container.innerHTML = '';
  const bar = document.createElement('div');
  bar.className = 'timeline-bar';
  const info = document.createElement('span');
  info.className = 'timeline-range muted';
  const whole = document.createElement('button');
  whole.type = 'button';
  whole.className = 'timeline-whole';
  whole.textContent = 'Whole segment';
  const level = document.createElement('select');
  level.className = 'timeline-level';
  level.setAttribute('aria-label', 'colour the dumps by');
  ['leaf function', '1 frame up', '2 frames up', '3 frames up', '4 frames up', '5 frames up'].forEach((t, i) => {
    const o = document.createElement('option');
    o.value = String(i);
    o.textContent = 'Colour by: ' + t;
    level.append(o);
  });
  bar.append(whole, level, info);
  const spanBox = document.createElement('div');
  spanBox.className = 'timeline-spans';
  const plot = document.createElement('div');
  plot.className = 'timeline-plot';
  plot.tabIndex = 0;
  plot.setAttribute('role', 'slider');
  plot.setAttribute('aria-label', 'thread dumps over the request; drag or use the arrow keys to select a range');
  const canvas = document.createElement('canvas');
  canvas.className = 'timeline-dumps';
  const sel = document.createElement('div');
  sel.className = 'timeline-sel';
  sel.hidden = true;
  const tip = document.createElement('div');
  tip.className = 'timeline-tip';
  tip.hidden = true;
  plot.append(canvas, sel, tip);
  const legend = document.createElement('div');
  legend.className = 'timeline-legend';
  function colourBy(lv) {
    names = dumpFunctions(doc, lv);
    colorOf.clear();
    for (const n of names) if (!colorOf.has(n)) colorOf.set(n, leafColor(n));
    legend.replaceChildren();
    for (const l of leafLegend(names).slice(0, 12)) {
      const item = document.createElement('span');
      item.className = 'timeline-key';
      item.dataset.name = l.name;
      item.title = l.name;
      const sw = document.createElement('i');
      sw.style.background = l.color;
      item.append(sw, `${l.name === '(empty stack)' ? l.name : frameLabel(l.name)} (${l.count})`);
      legend.append(item);
    }
  }
  colourBy(0);
  container.append(bar, spanBox, plot, legend);

  let width = 0;
  let range = null;            // [start, end] ms, inclusive
  const xOf = (t) => ((t - t0) / (t1 - t0)) * width;
  const tOf = (x) => t0 + (Math.max(0, Math.min(width, x)) / width) * (t1 - t0);

  function drawSpans() {
    const depth = new Map();
    const byId = new Map(spans.map((s) => [s.spanId, s]));
    const depthOf = (s) => {
      if (depth.has(s.spanId)) return depth.get(s.spanId);
      depth.set(s.spanId, 0);
      const p = byId.get(s.parentSpanId);
      const d = p && p !== s ? depthOf(p) + 1 : 0;
      depth.set(s.spanId, d);
      return d;
    };
    spanBox.innerHTML = '';
    let rows = 0;
    for (const s of spans) {
      const d = depthOf(s);
      rows = Math.max(rows, d + 1);
      const e = document.createElement('div');
      e.className = 'timeline-span' + (s.profiled ? ' profiled' : '');
      const x = xOf(Number(s.startTime));
      e.style.left = x + 'px';
      e.style.width = Math.max(2, xOf(Number(s.endTime)) - x) + 'px';
      e.style.top = d * SPAN_ROW + 'px';
      e.dataset.span = String(s.spanId);
      e.textContent = `${s.endpointName || s.peer || s.spanId} · ${Number(s.endTime) - Number(s.startTime)} ms`;
      e.title = e.textContent;
      spanBox.append(e);
    }
    spanBox.style.height = rows * SPAN_ROW + 'px';
  }

  function drawDumps() {
    const dpr = window.devicePixelRatio || 1;
    canvas.width = Math.max(1, Math.round(width * dpr));
    canvas.height = Math.round(DUMP_H * dpr);
    canvas.style.width = width + 'px';
    canvas.style.height = DUMP_H + 'px';
    const g = canvas.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, width, DUMP_H);
    const w = Math.max(1, xOf(t0 + period) - 0.5);
    let last = '';
    for (let i = 0; i < snaps.length; i++) {
      const c = colorOf.get(names[i]);
      if (c !== last) { g.fillStyle = c; last = c; }
      g.fillRect(xOf(times[i]), 0, w, DUMP_H);
    }
  }

  function showRange() {
    if (!range) {
      sel.hidden = true;
      info.textContent = `${snaps.length} dumps over ${t1 - t0} ms · drag across the dumps to analyse a range`;
      delete container.dataset.range;
      return;
    }
    sel.hidden = false;
    sel.style.left = xOf(range[0]) + 'px';
    sel.style.width = Math.max(2, xOf(range[1] + period) - xOf(range[0])) + 'px';
    const n = times.filter((t) => t >= range[0] && t <= range[1]).length;
    info.textContent = `selected ${range[0] - t0}–${range[1] - t0} ms of the request (${n} dumps)`;
    container.dataset.range = range[0] + '-' + range[1];
  }

  function render() {
    width = plot.clientWidth || container.clientWidth || 1000;
    drawSpans();
    drawDumps();
    showRange();
  }

  // Brushing: a drag of more than 3 px selects; the range snaps to whole dumps.
  let down = null;
  const localX = (ev) => ev.clientX - canvas.getBoundingClientRect().left;
  const snap = (a, b) => {
    const lo = Math.min(a, b);
    const hi = Math.max(a, b);
    const inside = times.filter((t) => t + period > lo && t <= hi);
    return inside.length ? [inside[0], inside[inside.length - 1]] : [Math.round(lo), Math.round(hi)];
  };
  const apply = () => { if (range) onRange(range[0], range[1]); };
  plot.addEventListener('mousedown', (ev) => { down = localX(ev); ev.preventDefault(); });
  plot.addEventListener('mousemove', (ev) => {
    const x = localX(ev);
    if (down !== null) {
      sel.hidden = false;
      sel.style.left = Math.min(down, x) + 'px';
      sel.style.width = Math.abs(x - down) + 'px';
      return;
    }
    const t = tOf(x);
    let i = times.findIndex((u) => u <= t && t < u + period);
    if (i < 0) { tip.hidden = true; return; }
    tip.hidden = false;
    tip.style.left = x + 12 + 'px';
    const st = doc.stacks && doc.stacks[snaps[i].stack];
    const path = st ? st.slice(-6).map((f) => frameLabel(doc.frames[f])).reverse().join('\n  ← ') : names[i];
    tip.textContent = `+${times[i] - t0} ms, dump #${snaps[i].sequence}, depth ${snaps[i].depth}\n  ${path}`;
  });
  plot.addEventListener('mouseleave', () => { tip.hidden = true; });
  window.addEventListener('mouseup', onUp);
  function onUp(ev) {
    if (down === null) return;
    const x = localX(ev);
    const a = down;
    down = null;
    if (Math.abs(x - a) <= 3) { showRange(); return; }
    range = snap(tOf(a), tOf(x));
    showRange();
    apply();
  }
  plot.addEventListener('keydown', (ev) => {
    if (!times.length) return;
    let [i, j] = range ? [times.indexOf(range[0]), times.indexOf(range[1])] : [-1, -1];
    if (ev.key === 'Escape') { range = null; showRange(); onRange(null, null); return; }
    if (ev.key === 'Enter') { apply(); ev.preventDefault(); return; }
    if (ev.key !== 'ArrowRight' && ev.key !== 'ArrowLeft') return;
    ev.preventDefault();
    const step = ev.key === 'ArrowRight' ? 1 : -1;
    if (i < 0) { i = j = step > 0 ? 0 : times.length - 1; } else if (ev.shiftKey) { j = Math.max(i, Math.min(times.length - 1, j + step)); } else {
      i = Math.max(0, Math.min(times.length - 1, i + step));
      j = Math.max(i, Math.min(times.length - 1, j + step));
    }
    range = [times[i], times[j]];
    showRange();
  });
  level.addEventListener('change', () => { colourBy(Number(level.value)); drawDumps(); });
  whole.addEventListener('click', () => { range = null; showRange(); onRange(null, null); });

  const ro = new ResizeObserver(() => render());
  ro.observe(plot);
  render();
  return {
    render,
    setRange: (a, b) => { range = a === null || a === undefined ? null : [a, b]; showRange(); },
    destroy: () => { ro.disconnect(); window.removeEventListener('mouseup', onUp); },
  };
}
