// The I/O tab's entry: TensorBoard loads this module in an iframe (base
// href plugin/tfdarshan/) and calls render(). It imports nothing, so it
// runs as soon as it arrives: it asks for the chart library (the largest
// thing the page loads, 1.5 MB to fetch and compile) at once, then for
// the page's modules (page.js draws the tab), all of them together, so
// that none waits for another's import to be read. The library's download
// and compilation go on while the modules load and the data come in.

// the chart library's address (a hidden frame loads it again to keep it compiled: util.js):
// beside this module, under the address the plugin keys by the version of both (plugin.py)
export const library = new URL('./plotly.js', import.meta.url).href;

let loading = null;
export function loadPlotly() {
  if (window.Plotly) return Promise.resolve(window.Plotly);
  return loading = loading || new Promise((resolve, reject) => {
    const s = document.createElement('script');
    s.src = library;
    s.onload = () => resolve(window.Plotly);
    s.onerror = () => reject(new Error('could not load the chart library'));
    document.head.append(s);
  });
}
loadPlotly().catch(() => {});         // (render() shows the error where the charts go)

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
const runs = fetch('./runs').then((r) => r.ok ? r.json() : Promise.reject(new Error(`runs: HTTP ${r.status}`)));
runs.then(({runs}) => {
  const r = runs[runs.length - 1];
  const s = r && r.sessions[r.sessions.length - 1];
  if (!s || (s.ranks > 1 && s.ranks === s.hosts.length)) return;
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
  return (await page).render({loadPlotly, library, takeRuns, takeAnswer});
}
