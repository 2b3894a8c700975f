// The I/O tab's entry: TensorBoard loads this module in an iframe (base
// href plugin/tfdarshan/) and calls render(). It imports nothing, so it
// runs as soon as it arrives: it asks for the chart library the first
// session needs (the largest thing the page loads, 1.2 MB to fetch and
// evaluate: at once when this browser remembers which, else as soon as
// the session list says) and for that list, then for the page's modules
// (page.js draws the tab), all of them together, so that none waits for
// another's import to be read. The library's download and compilation go
// on while the modules load and the data come in.

// The chart library: Plotly's basic bundle (scatter and bar) draws every
// chart but one; its cartesian bundle (those and the heatmap), which a
// browser takes twice as long to evaluate, is asked for only by a
// many-rank session's rank views. Beside this module, under the address
// the plugin keys by the version of all of them (plugin.py).
export const libraries = {
  basic: new URL('./plotly-basic.js', import.meta.url).href,
  heatmap: new URL('./plotly-cartesian.js', import.meta.url).href,
};

// Whether a session is shown whole from its analysis tables, with rank
// views (a many-rank session, every host): the one view with a heatmap.
export const rankViews = (s, host = '') => !host && s.ranks > 1 && s.ranks === s.hosts.length;

// The Plotly to draw with, {Plotly, address}: one with the heatmap when
// `heatmap`. Each bundle is loaded once, and once the cartesian one is
// asked for it draws everything.
const loading = {};
export function loadPlotly(heatmap) {
  // (the basic bundle after all, should the cartesian one fail to load)
  if (!heatmap && loading.heatmap) return loading.heatmap.catch(() => load('basic'));
  return load(heatmap ? 'heatmap' : 'basic');
}
function load(kind) {
  return loading[kind] = loading[kind] || new Promise((resolve, reject) => {
    const s = document.createElement('script');
    s.src = libraries[kind];
    // (each bundle sets window.Plotly when it runs, and its load event comes right after)
    s.onload = () => resolve({Plotly: window.Plotly, address: libraries[kind]});
    s.onerror = () => reject(new Error('could not load the chart library'));
    document.head.append(s);
  });
}

// The page's first answers, asked for now, beside the modules rather than
// after them: the session the page opens first (page.js: the last run's
// last session, every host; not a many-rank session's views) at the width
// of a chart's cell as page.js's grid lays it out (cells of at least 460 px,
// 12 px apart, in a body with 16 px margins and a scrollbar). page.js takes
// an answer only for the very question it asks (util.js's get); one it never
// asks is left unread.
const early = new Map();
document.head.append(Object.assign(document.createElement('style'),
    {textContent: 'html { overflow-y: scroll; } body { margin: 16px; }'}));
export function gridCellWidth() {
  const w = document.documentElement.clientWidth - 2 * 16;
  const n = Math.max(1, Math.floor((w + 12) / (460 + 12)));
  return Math.max(100, Math.round((w - 12 * (n - 1)) / n));
}
// The bundle the first session needed at the last opening in this browser
// is asked for at once (the same log directory opens at the same session);
// at a first opening, once the session list says which.
const FIRST_LIBRARY = 'tfdarshan-first-chart-library';
const remembered = (() => {
  try {
    return localStorage.getItem(FIRST_LIBRARY);
  } catch (e) {
    return null;                          // no storage in this browser: wait for the list
  }
})();
if (Object.hasOwn(libraries, remembered)) loadPlotly(remembered === 'heatmap').catch(() => {});
const runs = fetch('./runs').then((r) => r.ok ? r.json() : Promise.reject(new Error(`runs: HTTP ${r.status}`)));
runs.then(({runs}) => {
  const r = runs[runs.length - 1];
  const s = r && r.sessions[r.sessions.length - 1];
  if (!s) return;
  const heatmap = rankViews(s);
  loadPlotly(heatmap).catch(() => {});            // (render() shows the error where the charts go)
  try {
    localStorage.setItem(FIRST_LIBRARY, heatmap ? 'heatmap' : 'basic');
  } catch (e) { /* no storage: the next opening waits for the list too */ }
  if (heatmap) return;
  const width = gridCellWidth();
  for (const [route, extra] of [['summary', {}], ['verdict', {width}], ['steps', {width}], ['histograms', {}],
    ['mounts', {limit: 50}], ['timeline', {}], ['advice', {}], ['files', {order: 'desc', offset: 0, limit: 50}]]) {
    const asked = `${route}?${new URLSearchParams({run: r.run, session: s.session, ...extra})}`;
    const answer = fetch(`./${asked}`);
    answer.catch(() => {});
    early.set(asked, answer);
  }
}, () => {});
// (each once: the first asker takes it)
let runsLeft = runs;
export function takeRuns() {
  const r = runsLeft;
  runsLeft = null;
  return r;
}
export function takeAnswer(asked) {
  const answer = early.get(asked);
  early.delete(asked);
  return answer;
}

// page.js's own imports, asked for beside it rather than after it is read
for (const m of ['./util.js', './charts.js', './verdict.js', './table.js', './ranks.js']) import(m).catch(() => {});
const page = import('./page.js');

export async function render() {
  return (await page).render({loadPlotly, rankViews, takeRuns, takeAnswer});
}
