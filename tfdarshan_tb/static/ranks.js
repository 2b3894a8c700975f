// A many-rank session's rank views: a ranks x steps heatmap of input wait,
// the ranks sorted by wait, and the host / rank filter both follow.
import {el, pct, plain, state} from './util.js';
import {amount, axis, layout, READ} from './charts.js';

// The filter bar: a host among the ranks' hosts, and a rank list ("0-15,32").
export function rankFilter(hosts, onChange) {
  const node = el('select', {id: 'tfd-rank-host'}, el('option', {value: ''}, 'all hosts'),
      ...hosts.map((h) => el('option', {value: h}, h)));
  node.value = state.node;
  const ranks = el('input', {id: 'tfd-rank-list', placeholder: 'ranks, e.g. 0-15,32', size: '18'});
  ranks.value = state.ranks;
  const apply = el('button', {id: 'tfd-rank-apply'}, 'show');
  const change = () => { state.node = node.value; state.ranks = ranks.value.trim(); onChange(); };
  node.addEventListener('change', change);
  apply.addEventListener('click', change);
  ranks.addEventListener('keydown', (e) => { if (e.key === 'Enter') change(); });
  return el('div', {class: 'bar', id: 'tfd-rank-filter'}, 'Host ', node, ' Ranks ', ranks, apply);
}

// Every cell in view, ticks on whole numbers (steps and ranks have no halves).
function wholeAxis(text, values, unit) {
  const lo = Math.min(...values), hi = Math.max(...values);
  return axis(text, {type: 'linear', range: [lo - unit / 2, hi + unit / 2], tickmode: 'linear', tick0: lo,
    dtick: unit * Math.max(1, Math.ceil((hi - lo + unit) / unit / 10))});
}

// {id, title, data, layout} of the heatmap and the per-rank bars; [] without ranks.
export function rankFigures(heat, wait) {
  const out = [];
  if (heat.ranks.length && heat.steps.length) {
    const per = heat.step_bin > 1 ? ` (downsampled: ${heat.all_steps} steps in ${heat.steps.length} columns of `
      + `${heat.step_bin}, each their sum)` : '';
    out.push({id: 'tfd-rank-heatmap', title: `Input wait per rank and step${per}`, data: [{
      type: 'heatmap', x: heat.steps, y: heat.ranks, z: heat.wait, colorscale: 'Cividis', reversescale: true,
      colorbar: {title: {text: 'seconds', side: 'right'}, thickness: 12},
      customdata: heat.ranks.map((r, i) => heat.steps.map(() => plain(heat.hosts[i]))),
      hovertemplate: 'rank %{y} (%{customdata}), step %{x}: %{z:.3s}s in file input calls<extra></extra>'}],
      layout: layout({showlegend: false, xaxis: wholeAxis('step', heat.steps, heat.step_bin),
        yaxis: wholeAxis('rank', heat.ranks, 1)})});
  }
  if (wait.ranks.length) {
    // a rank killed before writing its log is counted as far as recorded, and named so
    const names = wait.ranks.map((r, i) => (wait.partial && wait.partial[i] ? `${r} (partial)` : String(r)));
    const page = wait.total > names.length ? `, ranks ${wait.offset + 1}–${wait.offset + names.length} of ${wait.total}`
      : '';
    out.push({id: 'tfd-rank-wait', title: `Ranks by input wait (each rank's ${wait.label}${page})`, data: [{
      type: 'bar', name: 'input wait', x: names, y: wait.input_wait_share.map((w) => w == null ? null : 100 * w),
      marker: {color: READ}, customdata: wait.ranks.map((r, i) => [plain(wait.hosts[i]), pct(wait.input_wait_share[i]),
        wait.input_wait_time[i] == null ? '–' : wait.input_wait_time[i].toPrecision(3), wait.input_wait_time[i],
        wait.step_time[i]]),
      hovertemplate: 'rank %{x} on %{customdata[0]}: %{customdata[1]} of step time, %{customdata[2]} s<extra></extra>'}],
      layout: layout({showlegend: false, xaxis: axis('rank (longest wait first)', {type: 'category',
        categoryorder: 'array', categoryarray: names, range: [-0.5, names.length - 0.5]}),
        yaxis: amount('% of step time')})});
  }
  return out;
}
