// threadline.js - where in a JFR recording each thread spent its time: one row per thread over
// the recording's time span (GET /api/v1/async-profiler/tasks/{id}/timeline), each time bucket
// coloured by the leaf function the thread was seen in most there (the colours of the request
// timeline, timeline.js). Dragging across the rows (brushing) selects a range of buckets and
// calls onRange(from, to) (ms since the epoch, inclusive) so the caller re-analyses just that
// range; "Whole recording" calls onRange(null, null). Keyboard: with the rows focused, arrow
// keys move a one-bucket selection, Shift+arrows widen it, Enter analyses it, Escape clears it.
// Every row is one <canvas> (a bucket costs one fillRect).
import { frameLabel } from './frames.js';
import { leafColor } from './timeline.js';

const ROW_H = 16;
const LABEL_W = 180;

// The frame each thread shows most often: [{name, top, share}] (share of its non-empty buckets).
export function threadTops(doc) {
  return (doc.threads || []).map((t) => {
    const by = new Map();
    for (const c of t.cells) by.set(c[1], (by.get(c[1]) || 0) + 1);
    let best = -1;
    let n = 0;
    for (const [f, k] of by) if (k > n || (k === n && f < best)) { best = f; n = k; }
    return { name: t.name, top: best >= 0 ? doc.frames[best] : '', share: t.cells.length ? n / t.cells.length : 0 };
  });
}

// The inclusive ms range of buckets a..b (any order), clamped to the recording.
export function bucketRange(doc, a, b) {
  const lo = Math.max(0, Math.min(a, b));
  const hi = Math.min((doc.buckets || 1) - 1, Math.max(a, b));
  return [doc.from + lo * doc.bucketMs, doc.from + (hi + 1) * doc.bucketMs - 1];
}

export function threadTimelineView(container, doc, onRange) {
  const nb = Math.max(1, doc.buckets || 1);
  const t0 = Number(doc.from);
  const t1 = t0 + nb * doc.bucketMs;
  container.classList.add('threadline');
  container.dataset.t0 = String(t0);
  container.dataset.t1 = String(t1);
  container.dataset.bucketMs = String(doc.bucketMs);
  container.innerHTML = '';

  const bar = document.createElement('div');
  bar.className = 'timeline-bar';
  const whole = document.createElement('button');
  whole.type = 'button';
  whole.className = 'threadline-whole';
  whole.textContent = 'Whole recording';
  const info = document.createElement('span');
  info.className = 'threadline-range muted';
  bar.append(whole, info);

  const plot = document.createElement('div');
  plot.className = 'threadline-plot';
  plot.tabIndex = 0;
  plot.setAttribute('role', 'slider');
  plot.setAttribute('aria-label', 'threads over the recording; drag or use the arrow keys to select a range');
  const tops = threadTops(doc);
  const rows = (doc.threads || []).map((t, i) => {
    const row = document.createElement('div');
    row.className = 'threadline-row';
    row.dataset.thread = t.name;
    row.dataset.top = tops[i].top;
    const label = document.createElement('span');
    label.className = 'threadline-name';
    label.textContent = t.name;
    label.title = `${t.name}: ${t.weight} ${doc.unit || 'samples'}; mostly ${tops[i].top ? frameLabel(tops[i].top) : '-'}` +
      ` (${Math.round(tops[i].share * 100)} % of its buckets)`;
    label.style.width = LABEL_W + 'px';
    const canvas = document.createElement('canvas');
    canvas.className = 'threadline-cells';
    row.append(label, canvas);
    plot.append(row);
    return { t, canvas };
  });
  const sel = document.createElement('div');
  sel.className = 'timeline-sel threadline-sel';
  sel.hidden = true;
  const tip = document.createElement('div');
  tip.className = 'timeline-tip';
  tip.hidden = true;
  plot.append(sel, tip);

  const legend = document.createElement('div');
  legend.className = 'timeline-legend';
  const counts = new Map();
  for (const t of doc.threads || []) for (const c of t.cells) counts.set(c[1], (counts.get(c[1]) || 0) + 1);
  for (const [f, n] of [...counts].sort((a, b) => b[1] - a[1]).slice(0, 12)) {
    const item = document.createElement('span');
    item.className = 'timeline-key';
    item.dataset.name = doc.frames[f];
    item.title = doc.frames[f];
    const sw = document.createElement('i');
    sw.style.background = leafColor(doc.frames[f]);
    item.append(sw, `${frameLabel(doc.frames[f])} (${n})`);
    legend.append(item);
  }
  const note = document.createElement('p');
  note.className = 'muted threadline-note';
  note.textContent = `${(doc.threads || []).length} thread(s)` +
    (doc.threadsOmitted ? ` (${doc.threadsOmitted} quieter ones not shown)` : '') +
    ` · ${doc.samples} samples in ${nb} buckets of ${doc.bucketMs} ms` +
    (doc.untimed ? ` · ${doc.untimed} without a time` : '') + (doc.dropped ? ` · ${doc.dropped} not shown` : '');
  container.append(bar, plot, legend, note);
  if (!rows.length) {
    plot.textContent = 'No samples of this kind carry a time.';
    return { render() {}, setRange() {}, destroy() {} };
  }

  let width = 0;
  let range = null;            // [bucket a, bucket b]
  const bucketAt = (x) => Math.max(0, Math.min(nb - 1, Math.floor((x / width) * nb)));

  function draw() {
    width = Math.max(1, (plot.clientWidth || container.clientWidth || 1000) - LABEL_W);
    const dpr = window.devicePixelRatio || 1;
    const w = width / nb;
    for (const { t, canvas } of rows) {
      canvas.width = Math.max(1, Math.round(width * dpr));
      canvas.height = Math.round(ROW_H * dpr);
      canvas.style.width = width + 'px';
      canvas.style.height = ROW_H + 'px';
      const g = canvas.getContext('2d');
      g.setTransform(dpr, 0, 0, dpr, 0, 0);
      g.clearRect(0, 0, width, ROW_H);
      for (const c of t.cells) {
        g.fillStyle = leafColor(doc.frames[c[1]]);
        g.fillRect(c[0] * w, 1, Math.max(1, w - 0.25), ROW_H - 2);
      }
    }
  }

  function showRange() {
    if (!range) {
      sel.hidden = true;
      info.textContent = `${doc.samples} samples over ${t1 - t0} ms · drag across the threads to analyse a range`;
      delete container.dataset.range;
      return;
    }
    const [a, b] = [Math.min(...range), Math.max(...range)];
    sel.hidden = false;
    sel.style.left = LABEL_W + (a / nb) * width + 'px';
    sel.style.width = Math.max(2, ((b - a + 1) / nb) * width) + 'px';
    const [from, to] = bucketRange(doc, a, b);
    info.textContent = `selected ${from - t0}–${to + 1 - t0} ms of the recording`;
    container.dataset.range = from + '-' + to;
  }

  function render() { draw(); showRange(); }
  const apply = () => { if (range) onRange(...bucketRange(doc, range[0], range[1])); };

  let down = null;
  const localX = (ev) => ev.clientX - plot.getBoundingClientRect().left - LABEL_W;
  plot.addEventListener('mousedown', (ev) => { down = localX(ev); ev.preventDefault(); });
  plot.addEventListener('mousemove', (ev) => {
    const x = localX(ev);
    if (down !== null) {
      sel.hidden = false;
      sel.style.left = LABEL_W + Math.max(0, Math.min(down, x)) + 'px';
      sel.style.width = Math.abs(x - down) + 'px';
      return;
    }
    const rowEl = ev.target.closest && ev.target.closest('.threadline-row');
    const r = rowEl ? rows.find((q) => q.t.name === rowEl.dataset.thread) : null;
    const cell = r && x >= 0 ? r.t.cells.find((c) => c[0] === bucketAt(x)) : null;
    if (!cell) { tip.hidden = true; return; }
    tip.hidden = false;
    tip.style.left = LABEL_W + x + 12 + 'px';
    tip.style.top = rowEl.offsetTop + ROW_H + 'px';
    tip.textContent = `${r.t.name} · +${cell[0] * doc.bucketMs} ms\n  ${frameLabel(doc.frames[cell[1]])}: ${cell[2]} of ${cell[3]}`;
  });
  plot.addEventListener('mouseleave', () => { tip.hidden = true; });
  window.addEventListener('mouseup', onUp);
  function onUp(ev) {
    if (down === null) return;
    const x = localX(ev);
    const a = down;
    down = null;
    if (Math.abs(x - a) <= 3) { showRange(); return; }
    range = [bucketAt(Math.min(a, x)), bucketAt(Math.max(a, x))];
    showRange();
    apply();
  }
  plot.addEventListener('keydown', (ev) => {
    if (ev.key === 'Escape') { range = null; showRange(); onRange(null, null); return; }
    if (ev.key === 'Enter') { apply(); ev.preventDefault(); return; }
    if (ev.key !== 'ArrowRight' && ev.key !== 'ArrowLeft') return;
    ev.preventDefault();
    const step = ev.key === 'ArrowRight' ? 1 : -1;
    let [i, j] = range || [-1, -1];
    if (i < 0) { i = j = step > 0 ? 0 : nb - 1; } else if (ev.shiftKey) { j = Math.max(i, Math.min(nb - 1, j + step)); } else {
      i = Math.max(0, Math.min(nb - 1, i + step));
      j = Math.max(i, Math.min(nb - 1, j + step));
    }
    range = [i, j];
    showRange();
  });
  whole.addEventListener('click', () => { range = null; showRange(); onRange(null, null); });

  const ro = new ResizeObserver(() => render());
  ro.observe(plot);
  render();
  return {
    render,
    // from/to in ms (a deep link's range), mapped back to buckets
    setRange: (from, to) => {
      range = from === null || from === undefined ? null
        : [Math.floor((from - t0) / doc.bucketMs), Math.floor((to - t0) / doc.bucketMs)];
      showRange();
    },
    destroy: () => { ro.disconnect(); window.removeEventListener('mouseup', onUp); },
  };
}
