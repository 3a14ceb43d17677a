// flame.js - an icicle flame graph drawn with absolutely positioned <div>s (each frame is a DOM
// element with data-name = its full signature, so it can be searched, hovered and tested). A
// synthetic "all" frame joins the trees; a frame's width is its weight (count). Boxes show the
// readable label (function first, frames.js); hover shows label, full signature, weight,
// duration, self, % of parent and % of total. Click: zoom into the frame (its ancestors stay as
// full-width bars; click one of them or "Reset zoom" to go back) and report it to opts.onSelect.
// Search highlights the matching frames and shows the share of samples they cover.
import { frameLabel } from './frames.js';
import { matcher, matchShare, sharePct } from './focus.js';

const ROW = 18;

export function hue(s) {
  let h = 0;
  for (let i = 0; i < s.length; i++) h = (h * 31 + s.charCodeAt(i)) >>> 0;
  return `hsl(${10 + (h % 45)}, 85%, ${58 + (h % 17)}%)`;
}

const pct = (a, b) => (b ? ((100 * a) / b).toFixed(1) + '%' : '-');

// opts (all optional):
//   color(node, root) -> CSS colour of a frame (default: a warm hue from its signature); a diff
//                        view passes its own (node carries whatever fields its tree built)
//   search            false: no search box of its own (the caller drives highlight())
//   unit              the weight's name in the tooltip (default "dump count")
//   onSelect(node)    a frame was clicked
//   onSearch(term)    the search box changed
//   term              initial search text
// Returns {render, destroy, highlight(term), zoomTo(sig) -> bool, reset()}.
export function flameGraph(container, trees, opts = {}) {
  const color = opts.color || ((n) => hue(n.sig));
  const unit = opts.unit || 'dump count';
  const root = { sig: 'all', count: 0, duration: 0, self: 0, children: trees, parent: null };
  root.count = trees.reduce((a, n) => a + n.count, 0);
  root.duration = trees.reduce((a, n) => a + n.duration, 0);
  const link = (n) => { for (const c of n.children) { c.parent = n; link(c); } };
  link(root);

  container.classList.add('flame');
  container.innerHTML = '';
  const bar = document.createElement('div');
  bar.className = 'flame-bar';
  bar.innerHTML = (opts.search === false ? '' : '<input type="search" class="flame-search" placeholder="Search frames">') +
    '<button type="button" class="flame-reset">Reset zoom</button><span class="flame-found"></span>';
  const chart = document.createElement('div');
  chart.className = 'flame-chart';
  const tip = document.createElement('div');
  tip.className = 'flame-tip';
  tip.hidden = true;
  container.append(bar, chart, tip);

  let zoom = root;
  let term = opts.term || '';
  let pred = matcher(term);
  const input = bar.querySelector('.flame-search');
  if (input) input.value = term;

  function box(n, x, w, depth, ancestor, frag, state) {
    const e = document.createElement('div');
    e.className = 'frame' + (ancestor ? ' ancestor' : '');
    if (pred && n !== root && pred(n.sig)) e.className += ' match';
    e.style.left = x + 'px';
    e.style.width = Math.max(w, 1) + 'px';
    e.style.top = depth * ROW + 'px';
    e.style.background = color(n, root);
    e.dataset.name = n.sig;
    const label = n === root ? 'all' : frameLabel(n.sig);
    e.textContent = w > 28 ? label : '';
    e.addEventListener('mousemove', (ev) => {
      tip.hidden = false;
      tip.style.left = Math.min(ev.clientX + 14, window.innerWidth - 320) + 'px';
      tip.style.top = ev.clientY + 14 + 'px';
      tip.textContent = `${label}\n${n.sig}\n${unit}: ${n.count}\nduration: ${n.duration}\n` +
        `self: ${n.self}\nof parent: ${pct(n.count, n.parent ? n.parent.count : n.count)}\n` +
        `of total: ${pct(n.count, root.count)}`;
    });
    e.addEventListener('mouseleave', () => { tip.hidden = true; });
    e.addEventListener('click', () => {
      zoom = n;
      render();
      if (opts.onSelect && n !== root) opts.onSelect(n);
    });
    frag.appendChild(e);
    state.maxDepth = Math.max(state.maxDepth, depth);
  }

  function layout(n, x, w, depth, frag, state) {
    if (w < 0.5) return;
    box(n, x, w, depth, false, frag, state);
    let cx = x;
    for (const c of n.children) {
      const cw = n.count ? (w * c.count) / n.count : 0;
      layout(c, cx, cw, depth + 1, frag, state);
      cx += cw;
    }
  }

  function render() {
    drawnWidth = chart.clientWidth;
    const width = drawnWidth || 1000;
    const frag = document.createDocumentFragment();
    const state = { maxDepth: 0 };
    const ancestors = [];
    for (let a = zoom.parent; a; a = a.parent) ancestors.unshift(a);
    ancestors.forEach((a, i) => box(a, 0, width, i, true, frag, state));
    layout(zoom, 0, width, ancestors.length, frag, state);
    chart.innerHTML = '';
    chart.appendChild(frag);
    chart.style.height = (state.maxDepth + 1) * ROW + 'px';
    const found = bar.querySelector('.flame-found');
    if (pred) {
      const s = matchShare(trees, pred);
      found.textContent = `${term.trim()}: ${sharePct(s.hits, s.total)} of samples`;
    } else found.textContent = '';
  }

  function highlight(t) {
    term = t || '';
    pred = matcher(term);
    if (input && input.value !== term) input.value = term;
    render();
  }

  function zoomTo(sig) {
    let hit = null;
    const walk = (n) => {
      if (hit) return;
      if (n.sig === sig && n !== root) { hit = n; return; }
      n.children.forEach(walk);
    };
    walk(root);
    if (!hit) return false;
    zoom = hit;
    render();
    return true;
  }

  if (input) {
    input.addEventListener('input', (ev) => {
      highlight(ev.target.value);
      if (opts.onSearch) opts.onSearch(term);
    });
  }
  bar.querySelector('.flame-reset').addEventListener('click', () => { zoom = root; render(); });
  // Re-render on a width change only: the observer's first call (and height changes, which the
  // render itself makes) would redraw the same picture.
  let drawnWidth = -1;
  const ro = new ResizeObserver(() => { if (chart.clientWidth !== drawnWidth) render(); });
  ro.observe(chart);
  render();
  return { render, destroy: () => ro.disconnect(), highlight, zoomTo, reset: () => { zoom = root; render(); } };
}
