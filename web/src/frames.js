// frames.js - the one parser of code signatures the UI uses: every view (stack tree, flame graph,
// tooltips, details pane, focus view, process profiles) shows a frame as its function first and
// a short location second, with the full signature on hover and in the details pane.
//
// Signatures, by producer:
//   Python agent (SkyWalking's form)   "/srv/app/seed_app.py.do_POST: 44"      -> do_POST  seed_app.py:44
//     a method                         "/srv/app/shop.py.Cart.add: 7"          -> Cart.add  shop.py:7
//     grouped by function              "/srv/app/seed_app.py.do_POST"          -> do_POST  seed_app.py
//   native agent / pprof with files    "method3 (demo_service.c:42)"           -> method3  demo_service.c:42
//                                      "main.burnHeavy (/src/x/main.go:31)"    -> main.burnHeavy  main.go:31
//                                      "foo (libfoo.so)"                       -> foo  libfoo.so
//   no symbol                          "libfoo.so+0x1234", "0x7f00aa"          -> the same, location: module
//   JFR (async-profiler / JDK)         "com.acme.Shop.checkout:42"             -> Shop.checkout  com.acme:42
//                                      "java.lang.Thread.run"                  -> Thread.run  java.lang
//   pprof without file names           "main.spin:12" / "runtime.main"         -> main.spin  :12
//
// src/common/frame_sig.c is the C twin of this parser (the server's exports use it); both are
// checked against tests/data/frame_sigs.tsv, so a rule changed here must change there too.
// Line numbers have at most 9 digits in the Python and native forms (a longer run is no line).
//
// Agent frames: skyprof's own instrumentation (Python files under a skyprof/ package directory,
// e.g. ".../skyprof/instrument/http_server.py._skyprof_do: 34"; native frames in libskyprof or
// skyprof's _native extension) are folded into their caller by foldAgentFrames.

const PY = /^(.*\.py[cwi]?)\.([^./\s][^/]*?)(?:\s*:\s*(\d{1,9}))?$/;
const PAREN = /^(.+?) \(([^()]*)\)$/;
const ADDR = /^(.+?)\+0x[0-9a-fA-F]+$/;
const JAVA_LINE = /^([^\s:()]+):(\d+)$/;

const base = (p) => {
  const s = String(p);
  const i = s.lastIndexOf('/');
  return i >= 0 && i < s.length - 1 ? s.slice(i + 1) : s;
};

// Shortens a dotted name for display: a Go import path loses its directories
// ("github.com/x/y.(*T).M" -> "y.(*T).M"); a Java-style "pkg.sub.Class.method" keeps
// "Class.method" and returns the package as `pkg`.
function shortDotted(name, lang) {
  let n = name;
  const slash = n.lastIndexOf('/');
  if (slash >= 0 && slash < n.length - 1) n = n.slice(slash + 1);
  if (lang === 'go' || n.includes('(')) return { func: n, pkg: '' };
  const parts = n.split('.');
  if (parts.length <= 2) return { func: n, pkg: '' };
  return { func: parts.slice(-2).join('.'), pkg: parts.slice(0, -2).join('.') };
}

const cache = new Map();
const CACHE_MAX = 200000;

// parseFrame(sig) -> {sig, func, loc, file, line, lang, agent}
//   func  the function (what a label shows first)
//   loc   a short location ("seed_app.py:44", "demo.c:42", "libfoo.so", "com.acme:42"), may be ''
//   file  the file or module as the signature names it ('' when none)
//   line  the line number (0 when none)
//   lang  'python' | 'native' | 'go' | 'java' | 'address' | 'other'
//   agent true for skyprof's own instrumentation frames
export function parseFrame(sig) {
  const s = typeof sig === 'string' ? sig : String(sig);
  const hit = cache.get(s);
  if (hit) return hit;
  const f = parse(s);
  f.agent = isAgent(f);
  if (cache.size >= CACHE_MAX) cache.clear();
  cache.set(s, f);
  return f;
}

function parse(s) {
  let m = PY.exec(s);
  if (m) {
    const line = m[3] ? Number(m[3]) : 0;
    return { sig: s, func: m[2], file: m[1], line, loc: base(m[1]) + (line ? ':' + line : ''), lang: 'python' };
  }
  m = PAREN.exec(s);
  if (m) {
    const inner = m[2];
    const lm = /^(.*):(\d{1,9})$/.exec(inner);
    const file = lm ? lm[1] : inner;
    const line = lm ? Number(lm[2]) : 0;
    const lang = /\.go$/.test(file) ? 'go' : /\.py$/.test(file) ? 'python' : /\.java$/.test(file) ? 'java' : 'native';
    return { sig: s, func: lang === 'go' ? shortDotted(m[1], 'go').func : m[1], file, line,
      loc: base(file) + (line ? ':' + line : ''), lang };
  }
  m = ADDR.exec(s);
  if (m && !/\s/.test(s)) return { sig: s, func: s, file: m[1], line: 0, loc: base(m[1]), lang: 'address' };
  if (/^0x[0-9a-fA-F]+$/.test(s)) return { sig: s, func: s, file: '', line: 0, loc: '', lang: 'address' };
  m = JAVA_LINE.exec(s);
  // JFR names a lambda's hidden class "Outer$$Lambda$88+0x00007fb024007a08.846947180"; a line
  // of -1 arrives as 4294967295 (no line).
  const name = (m ? m[1] : s).replace(/\$\$Lambda\$\d+\+0x[0-9a-fA-F]+(\.\d+)?/, '$$$$Lambda');
  const line = m && Number(m[2]) < 0x7fffffff ? Number(m[2]) : 0;
  if (/^[\w$/]+(\.[\w$<>()*/-]+)+$/.test(name)) {
    const { func, pkg } = shortDotted(name, '');
    const lang = pkg ? 'java' : 'other';
    const loc = pkg ? pkg + (line ? ':' + line : '') : (line ? ':' + line : '');
    return { sig: s, func, file: '', line, loc, lang };
  }
  return { sig: s, func: name, file: '', line, loc: line ? ':' + line : '', lang: 'other' };
}

function isAgent(f) {
  if (f.lang === 'python') return /(^|\/)skyprof\/.+\.py[cwi]?$/.test(f.file);
  if (f.lang === 'native' || f.lang === 'address') return /(^|\/)(libskyprof[^/]*\.so[.\d]*|_native[^/]*\.so)$/.test(f.file) && /skyprof|_native/.test(f.file);
  return false;
}

export function isAgentFrame(sig) {
  return parseFrame(sig).agent;
}

// "do_POST  seed_app.py:44": the label a view shows (function first).
export function frameLabel(sig) {
  const f = parseFrame(sig);
  return f.loc ? f.func + '  ' + f.loc : f.func;
}

// "do_POST (seed_app.py:44)": the one-string name the server's exports write (py-spy's form);
// "main.spin:12" when the location is a line alone; an address unchanged.
export function frameName(sig) {
  const f = parseFrame(sig);
  if (f.lang === 'address') return f.sig;
  const lineOnly = f.line ? ':' + f.line : '';
  return f.loc === lineOnly ? f.func + f.loc : f.func + ' (' + f.loc + ')';
}

// The function a code signature names, without its line ("group by function" merges by it):
//   Python / Java  "/srv/app.py.method3: 50"  -> "/srv/app.py.method3"
//   JFR            "com.acme.Shop.run:42"     -> "com.acme.Shop.run"
//   native / Go    "method3 (demo.c:42)"      -> "method3 (demo.c)"
export function functionOf(sig) {
  if (typeof sig !== 'string') return String(sig);
  let m = /^(.*\S)\s*:\s*\d+$/.exec(sig);
  if (m) return m[1];
  m = /^(.*\([^()]*?):\d+\)$/.exec(sig);
  if (m) return m[1] + ')';
  return sig;
}

// Returns new nested nodes ({sig, count, duration, self, children}) with every agent frame
// folded into its caller: its children take its place among the caller's children (merged with
// equal siblings) and its self weight becomes the caller's. A node's count is unchanged, so
// every remaining frame keeps its share of the total. Agent frames without a caller (roots) stay.
export function foldAgentFrames(nodes) {
  const clone = (n) => ({ sig: n.sig, count: n.count, duration: n.duration, self: n.self, children: [] });
  // Appends n's (folded) subtree to `out` (a sibling list, merging equal sigs); returns the self
  // weight (duration) that must go to the caller when n itself is folded away.
  const addTo = (out, index, n, owner) => {
    if (owner && parseFrame(n.sig).agent) {
      owner.self += n.self;
      for (const c of n.children) addTo(out, index, c, owner);
      return;
    }
    let m = index.get(n.sig);
    if (!m) {
      m = clone(n);
      m.self = n.self;
      m._index = new Map();
      index.set(n.sig, m);
      out.push(m);
    } else {
      m.count += n.count;
      m.duration += n.duration;
      m.self += n.self;
    }
    for (const c of n.children) addTo(m.children, m._index, c, m);
  };
  const roots = [];
  const index = new Map();
  for (const n of nodes) addTo(roots, index, n, null);
  const strip = (list) => { for (const n of list) { delete n._index; strip(n.children); } };
  strip(roots);
  return roots;
}

export function hasAgentFrames(nodes) {
  const stack = [...nodes];
  while (stack.length) {
    const n = stack.pop();
    if (parseFrame(n.sig).agent) return true;
    stack.push(...n.children);
  }
  return false;
}
