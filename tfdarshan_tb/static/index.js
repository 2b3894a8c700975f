// The I/O tab's entry: TensorBoard loads this module in an iframe (base
// href plugin/tfdarshan/) and calls render(). It imports nothing, so it
// runs as soon as it arrives: it asks for the chart library (the largest
// thing the page loads, 1.5 MB to fetch and compile) at once, then for
// the page's modules (page.js draws the tab), all of them together, so
// that none waits for another's import to be read. The library's download
// and compilation go on while the modules load and the data come in.

// the chart library's address (a hidden frame loads it again to keep it compiled: util.js)
export const library = new URL('./plotly.js', document.baseURI).href;

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

// page.js's own imports, asked for beside it rather than after it is read
for (const m of ['./util.js', './charts.js', './verdict.js', './table.js', './ranks.js']) import(m).catch(() => {});
const page = import('./page.js');

export async function render() {
  return (await page).render();
}
