// flame.js - an icicle flame graph drawn with absolutely positioned <div>s (each frame is a DOM
// element with data-name, so it can be searched, hovered and tested). A synthetic "all" frame
// joins the trees; a frame's width is its dump count. Hover: signature, dump count, duration,
// self duration, % of parent and % of total. Click: zoom into the frame (its ancestors stay
// as full-width bars; click one of them or "Reset zoom" to go back). Search highlights the
// frames whose signature contains the text and shows their share of the total.

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
export function flameGraph(container, trees, opts = {}) {
  const color = opts.color || ((n) => hue(n.sig));
  const root = { sig: 'all', count: 0, duration: 0, self: 0, children: trees, parent: null };
  root.count = trees.reduce((a, n) => a + n.count, 0);
  root.duration = trees.reduce((a, n) => a + n.duration, 0);
  const link = (n) => { for (const c of n.children) { c.parent = n; link(c); } };
  link(root);

  container.classList.add('flame');
  container.innerHTML = '';
  const bar = document.createElement('div');
  bar.className = 'flame-bar';
  bar.innerHTML = '<input type="search" class="flame-search" placeholder="Search frames">' +
    '<button type="button" class="flame-reset">Reset zoom</button><span class="flame-found"></span>';
  const chart = document.createElement('div');
  chart.className = 'flame-chart';
  const tip = document.createElement('div');
  tip.className = 'flame-tip';
  tip.hidden = true;
  container.append(bar, chart, tip);

  let zoom = root;
  let term = '';

  function box(n, x, w, depth, ancestor, frag, state) {
    const e = document.createElement('div');
    e.className = 'frame' + (ancestor ? ' ancestor' : '');
    if (term && n.sig.includes(term)) {
      e.className += ' match';
      if (!ancestor) state.hits += n.count;
    }
    e.style.left = x + 'px';
    e.style.width = Math.max(w, 1) + 'px';
    e.style.top = depth * ROW + 'px';
    e.style.background = color(n, root);
    e.dataset.name = n.sig;
    e.textContent = w > 28 ? n.sig : '';
    e.addEventListener('mousemove', (ev) => {
      tip.hidden = false;
      tip.style.left = ev.clientX + 14 + 'px';
      tip.style.top = ev.clientY + 14 + 'px';
      tip.textContent = `${n.sig}\ndump count: ${n.count}\nduration: ${n.duration} ms\n` +
        `self duration: ${n.self} ms\nof parent: ${pct(n.count, n.parent ? n.parent.count : n.count)}\n` +
        `of total: ${pct(n.count, root.count)}`;
    });
    e.addEventListener('mouseleave', () => { tip.hidden = true; });
    e.addEventListener('click', () => { zoom = n; render(); });
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
    const width = chart.clientWidth || 1000;
    const frag = document.createDocumentFragment();
    const state = { maxDepth: 0, hits: 0 };
    const ancestors = [];
    for (let a = zoom.parent; a; a = a.parent) ancestors.unshift(a);
    ancestors.forEach((a, i) => box(a, 0, width, i, true, frag, state));
    layout(zoom, 0, width, ancestors.length, frag, state);
    chart.innerHTML = '';
    chart.appendChild(frag);
    chart.style.height = (state.maxDepth + 1) * ROW + 'px';
    bar.querySelector('.flame-found').textContent = term ? `matched ${pct(state.hits, root.count)} of total` : '';
  }

  bar.querySelector('.flame-search').addEventListener('input', (ev) => { term = ev.target.value; render(); });
  bar.querySelector('.flame-reset').addEventListener('click', () => { zoom = root; render(); });
  const ro = new ResizeObserver(() => render());
  ro.observe(chart);
  render();
  return { render, destroy: () => ro.disconnect() };
}
