// Shared by the tab's modules: the page's state, DOM and number helpers,
// the JSON routes, and keeping the chart library compiled. Data from logs
// (file names above all) is only ever set as text, never parsed as HTML.

// the answers index.js asked for at the frame's start (page.js's render() hands them over)
let takeAnswer = () => undefined;
export function useEarlyAnswers(take) {
  takeAnswer = take;
}

export const PAGE = 50;
// sort: null until the server names the column that matters for the session
// node, ranks: the rank views' host / rank filter
export const state = {run: null, session: null, host: '', sort: null, order: 'desc', offset: 0, q: '', step: null,
  node: '', ranks: ''};

export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

// Plotly renders a little HTML in labels: escape what came from the data.
export const plain = (s) => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

export function bytes(n) {
  if (n == null) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (Math.abs(n) >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return i ? `${n.toFixed(1)} ${units[i]}` : `${n} B`;
}
export const seconds = (s) => s == null ? '–' : s < 1e-3 ? `${(s * 1e6).toFixed(0)} µs` : s < 1 ? `${(s * 1e3).toFixed(1)} ms` : `${s.toFixed(2)} s`;
export const rate = (b) => b == null ? '–' : `${bytes(b)}/s`;
// a count with its noun in agreement: "1 file", "2 files" (measures/human.py's count)
export const count = (n, one, many = `${one}s`) => `${n.toLocaleString('en-US')} ${n === 1 ? one : many}`;
export const pct = (x) => x == null ? '–' : `${(100 * x).toFixed(1)} %`;

function query(extra = {}) {
  const p = new URLSearchParams({run: state.run, session: state.session, ...extra});
  if (state.host) p.set('host', state.host);
  for (const [k, v] of Object.entries(extra)) if (v === '' || v == null) p.delete(k);
  return p.toString();
}

export async function get(route, extra = {}) {
  const asked = `${route}?${query(extra)}`;
  // (the answer index.js asked for at the frame's start, if it asked this very question)
  const r = await (takeAnswer(asked) || fetch(`./${asked}`));
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || `${route}: HTTP ${r.status}`);
  return body;
}

// Chromium compiles a script afresh on its first two loads and keeps the
// compiled code from the second on (V8's code cache, kept by address): the
// chart library would compile again when the tab is next opened. Once the
// page is drawn, in idle time, load it once more in a hidden frame of its
// own, so the next opening finds it compiled. Once per browser and address
// (a new version of the tab is a new address).
const PRIMED = 'tfdarshan-chart-library-compiled';
// library: the address of the chart library drawn with (index.js's `libraries`).
export function keepChartLibraryCompiled(library) {
  const key = `${PRIMED}:${library.split('/').pop()}`;
  try {
    if (localStorage.getItem(key) === library) return;
    localStorage.setItem(key, library);
  } catch (e) {
    return;                               // no storage in this browser: never load it twice
  }
  requestIdleCallback(() => {
    const frame = el('iframe', {style: 'display: none', 'aria-hidden': 'true', title: 'chart library cache'});
    frame.addEventListener('load', () => {
      const doc = frame.contentDocument;
      const s = doc.createElement('script');
      s.src = library;
      s.onload = s.onerror = () => frame.remove();
      doc.head.append(s);
    }, {once: true});
    document.body.append(frame);
  }, {timeout: 2000});
}
