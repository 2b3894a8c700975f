// The tab's charts: one figure per question, each {id, title, data, layout},
// with one colour per mount in every chart.
import {plain} from './util.js';

// Plotly sizes a plot from its box when it draws it, and `responsive` follows
// only the window: a grid that reflows (a scrollbar appears, TensorBoard's
// sidebar opens) would leave plots wider than their cells. Follow each box.
// fresh: forget the boxes of the page drawn before.
let sizes = null;
export function followSizes(Plotly, divs, {fresh = true} = {}) {
  if (fresh && sizes) {
    sizes.disconnect();
    sizes = null;
  }
  sizes = sizes || new ResizeObserver((entries) => {
    for (const {target} of entries) {
      const drawnWidth = target._fullLayout && target._fullLayout.width;
      if (target.isConnected && drawnWidth && Math.abs(drawnWidth - target.clientWidth) >= 1) {
        Plotly.Plots.resize(target).catch(() => {});   // (rejects for a plot removed meanwhile)
      }
    }
  });
  for (const d of divs) sizes.observe(d);
}

// One colour per mount, the same in every chart: Okabe and Ito's
// colour-blind-safe set, then hues a golden angle apart.
const MOUNT_COLOURS = ['#0072B2', '#E69F00', '#009E73', '#CC79A7', '#D55E00', '#56B4E9', '#000000', '#F0E442'];
function mountColours(names) {
  const sorted = [...new Set(names)].sort();
  return new Map(sorted.map((n, i) => [n, MOUNT_COLOURS[i] || `hsl(${(i * 137.5) % 360}, 65%, 40%)`]));
}

// what is measured (not where) in slate and purple, apart from every mount colour
export const READ = '#37474F', WRITTEN = '#90A4AE', RATE = '#8E24AA';
// what Darshan's counters miss (kernel-side copies, reads through mmap): browns
export const COPIED = '#795548', MAPPED = '#BCAAA4';

const MIB = 2 ** 20;
export const hasData = (ys) => ys.some((v) => v != null && v !== 0);
// Tick labels never hidden for overflowing the figure: automargin keeps them in
// it, and Plotly's check (its default, 'hide past div') measures every label
// (a forced layout each), a fifth of a plot's drawing (benchmarks/bench_tab.py)
export const axis = (text, extra = {}) => ({title: {text}, automargin: true, ticklabeloverflow: 'allow', ...extra});
// amounts and rates: an axis from zero
export const amount = (text, extra = {}) => axis(text, {rangemode: 'tozero', ...extra});
// the legend at the foot of the figure, under the axis title (the mode bar has the top).
// The margins are what automargin settles on for a one-row legend and
// tick labels of a few characters: starting there spares Plotly a second
// layout pass in most charts (a quarter of the drawing time measured),
// and automargin still grows them for longer labels and legends.
export const layout = (extra) => ({margin: {l: 70, r: 70, t: 30, b: 80}, showlegend: true,
  legend: {orientation: 'h', x: 0, xref: 'container', y: 0, yref: 'container', yanchor: 'bottom'}, ...extra});

// A legend that wraps to several rows needs a taller foot, and automargin
// finds that out only after drawing the plot once: it then lays the plot
// out and draws it all again (the per-step chart's five entries, a third
// of the page's drawing). So the foot is worked out before drawing, as
// Plotly's horizontal legend lays its entries out (legend/draw.js): an
// entry is its text plus 40 px (swatch and gaps), 5 px apart; all in one
// row if they fit the plot's width, else in columns as wide as the widest
// entry; a row is 19 px (a 12 px font's line, at least 16, plus 3), and
// the legend 10 px more. Under the plot, the x axis's tick labels and
// title take 42 px above the legend. Automargin is kept: should a
// measurement here fall short, the chart is still right, drawn twice.
const LEGEND_FONT = '12px "Open Sans", verdana, arial, sans-serif';    // Plotly's default font
const FIGURE_HEIGHT = 300;       // .chart's height in page.js
const ENTRY_EXTRA = 40, ENTRY_GAP = 5, LEGEND_ROW = 19, LEGEND_PAD = 10, X_AXIS_FOOT = 42;
let ruler = null;
const textWidth = (text) => {
  ruler = ruler || document.createElement('canvas').getContext('2d');
  ruler.font = LEGEND_FONT;
  // (names reach Plotly escaped by plain(); it shows them unescaped)
  return ruler.measureText(text.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&')).width;
};
export function legendRows(names, plotWidth) {
  if (!names.length) return 0;
  const widths = names.map((n) => textWidth(n) + ENTRY_EXTRA);
  const widest = Math.max(...widths);
  const maxWidth = Math.max(plotWidth, 2 * ENTRY_EXTRA);
  if (widths.reduce((a, b) => a + b, 0) + (names.length - 1) * ENTRY_GAP < maxWidth) return 1;
  let rows = 0, x = 0;
  for (let i = 0; i < names.length; i++) {
    if (rows === 0 || widest + ENTRY_GAP + x - ENTRY_GAP >= maxWidth) {
      rows += 1;
      x = 0;
    }
    x += widest + ENTRY_GAP;
  }
  return rows;
}

// The figure's layout with the bottom margin its legend needs in a plot
// `width` px wide (the box it is drawn in), so that Plotly lays it out once.
export function withLegendFoot(fig, width) {
  const lay = fig.layout;
  if (lay.showlegend === false) return lay;
  const names = fig.data.filter((t) => t.showlegend !== false).map((t) => String(t.name));
  const m = lay.margin;
  const rows = legendRows(names, Math.round(width) - m.l - m.r);
  // (a legend taller than half the figure scrolls within that half)
  const legend = Math.min(rows * LEGEND_ROW + LEGEND_PAD, Math.max(30, 0.5 * (lay.height || FIGURE_HEIGHT)));
  const foot = rows ? Math.ceil(legend) + X_AXIS_FOOT : 0;
  return foot > m.b ? {...lay, margin: {...m, b: foot}} : lay;
}

// Long series as lines; a few steps as bars.
export const MANY_STEPS = 500;
// A downsampled series (the server keeps each bucket's min and max: two
// points a pixel at most) is one SVG path, not stacked, and its chart says so
// in its title. Not WebGL (scattergl): at this size it draws nothing faster,
// and where the GPU is software (headless, remote desktops) its contexts
// made the page 0.6-1.5 s slower (benchmarks/bench_tab.py); nor is the
// timeline (its ticks are a path a file), and the cartesian bundle the tab
// loads has no WebGL trace types.
export const LINE = 'scatter';
export const downsampledNote = (d) => d ? ` (${d.text})` : '';

// A step axis that shows every step: its range is set, not left to
// autorange, and each chart gets its own object (Plotly writes into the
// layout it is given, so a shared axis would carry one chart's range into another).
export function stepAxis(steps) {
  if (steps.length > MANY_STEPS) {
    return axis('step', {type: 'linear', range: [Math.min(...steps) - 0.5, Math.max(...steps) + 0.5]});
  }
  return axis('step', {type: 'category', categoryorder: 'array', categoryarray: steps, range: [-0.5, steps.length - 0.5]});
}

// A right-hand amount axis with its range set from the data: autorange on an
// overlaying axis can settle on a sliver around one value and repeat its label.
const rightAmount = (text, ys) => {
  const top = Math.max(0, ...ys.filter((v) => v != null));
  return amount(text, {overlaying: 'y', side: 'right', range: [0, top > 0 ? top * 1.08 : 1], autorange: false});
};

// The charts for a session, each {id, title, data, layout}; a chart or
// series with nothing to show is left out (an empty axis runs from -1 to 1).
export function figures(steps, hist, mounts, timeline) {
  const colours = mountColours([...Object.keys(steps.mounts), ...mounts.mounts.map((m) => m.mount)]);
  const out = [];
  if (steps.steps.length) {
    const cut = steps.downsampled;
    const many = steps.steps.length > MANY_STEPS || Boolean(cut);
    const note = downsampledNote(cut);
    const series = (name, y, color, extra = {}) => cut
      ? {type: LINE, mode: 'lines', name, x: steps.steps, y, line: {width: 1, color}}
      : many ? {type: 'scatter', mode: 'lines', name, x: steps.steps, y, line: {width: 1, color}, ...extra}
        : {type: 'bar', name, x: steps.steps, y, marker: {color}};
    const moved = [series('bytes read', steps.bytes_read, READ), series('bytes written', steps.bytes_written, WRITTEN),
      series('copied by the kernel (copy_file_range, sendfile, splice)', steps.copy_bytes || [], COPIED),
      series('read through mmap (estimate)', steps.mmap_bytes || [], MAPPED)]
        .filter((t) => hasData(t.y));
    if (moved.length) {
      const bw = steps.bandwidth.map((b) => b == null ? null : b / MIB);
      const rate = hasData(bw) ? [{type: cut ? LINE : 'scatter', mode: many ? 'lines' : 'lines+markers', name: 'bandwidth',
        x: steps.steps, y: bw, yaxis: 'y2', line: {color: RATE}, marker: {color: RATE}}] : [];
      const over = steps.over ? `, ${steps.over}` : '';
      out.push({id: 'tfd-step-chart', title: `Per step${over}: bytes and bandwidth${note}`, downsampled: Boolean(cut),
        data: [...moved, ...rate],
        layout: layout({barmode: 'stack', xaxis: stepAxis(steps.steps), yaxis: amount('bytes'),
          ...(rate.length ? {yaxis2: rightAmount('MiB/s', bw)} : {})})});
    }
    const perMount = [...colours.keys()].filter((m) => steps.mounts[m] && hasData(steps.mounts[m]))
        .map((m) => series(plain(m), steps.mounts[m], colours.get(m), {stackgroup: 'mounts', fillcolor: colours.get(m)}));
    if (perMount.length) {
      // (a downsampled chart's mounts are not stacked: one mount's maximum and another's minimum do not add up)
      out.push({id: 'tfd-step-mounts', title: `Per step and mount${steps.over ? `, ${steps.over}` : ''}: bytes read`
        + note, downsampled: Boolean(cut), data: perMount,
        layout: layout({barmode: 'stack', xaxis: stepAxis(steps.steps), yaxis: amount('bytes read')})});
    }
  }
  // each bin named by its lower bound, its whole range in the hover text
  const ranges = hist.labels.map((lo, i) => `${lo}–${hist.labels[i + 1] || '∞'} bytes`);
  const sizeBar = (name, y, color) => ({type: 'bar', name, x: hist.labels, y, marker: {color}, customdata: ranges,
    hovertemplate: `%{y} ${name} of %{customdata}<extra></extra>`});
  const sizes = [sizeBar('reads', hist.read, READ), sizeBar('writes', hist.write, WRITTEN)].filter((t) => hasData(t.y));
  if (sizes.length) {
    out.push({id: 'tfd-hist', title: 'Access sizes (POSIX)', data: sizes,
      layout: layout({barmode: 'group', xaxis: axis('request size from (bytes)', {tickangle: 0}),
        yaxis: amount('operations')})});
  }
  // per mount, read and write side by side: one bar (and legend entry) per mount
  const byMount = (fields, scale = 1) => mounts.mounts
    .map((m) => {
      const points = fields.map(([label, key]) => [label, m[key] == null ? null : m[key] / scale]).filter(([, v]) => v);
      return {type: 'bar', name: plain(m.mount), x: points.map((p) => p[0]), y: points.map((p) => p[1]),
        marker: {color: colours.get(m.mount)}};
    })
    .filter((t) => t.y.length)
    .sort((a, b) => a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
  const ops = (labels) => axis('operation', {categoryorder: 'array', categoryarray: labels});
  const moved = byMount([['read', 'bytes_read'], ['written', 'bytes_written']]);
  if (moved.length) {
    out.push({id: 'tfd-mounts', title: `Mounts: bytes moved${mounts.over ? `, ${mounts.over}` : ''}`, data: moved,
      layout: layout({barmode: 'group', xaxis: ops(['read', 'written']), yaxis: amount('bytes')})});
  }
  const speed = byMount([['read', 'read_bandwidth'], ['write', 'write_bandwidth']], MIB);
  if (speed.length) {
    out.push({id: 'tfd-mounts-bandwidth', title: 'Mounts: bandwidth (bytes / time in the calls)', data: speed,
      layout: layout({barmode: 'group', xaxis: ops(['read', 'write']), yaxis: amount('MiB/s')})});
  }
  if (timeline.available) {
    // one tick per operation at its start (most last microseconds, too short
    // for bars), a row per file; a file's ticks are one SVG path (a line
    // broken by gaps), so 20,000 operations draw as fast as 8, with the
    // cartesian bundle's own trace type
    const names = timeline.files.map((f) => plain(f.path.split('/').pop()));
    const data = timeline.files.map((f, i) => ({
      type: 'scatter', mode: 'lines', name: names[i], line: {width: 2},
      x: f.start.flatMap((s) => [s, s, null]), y: f.start.flatMap(() => [i - 0.35, i + 0.35, null]),
      customdata: f.offset.flatMap((o, j) => {
        const c = [o, f.length[j], f.op[j], f.duration[j] * 1e6];
        return [c, c, null];
      }),
      hovertemplate: '%{customdata[2]} of %{customdata[1]} bytes at offset %{customdata[0]}, %{customdata[3]:.1f} µs<extra></extra>',
    }));
    // (each file's first operations only, when the trace holds more than the chart can take)
    const cut = timeline.held > timeline.shown
      ? ` (the first ${timeline.per_file} operations of each file: ${timeline.shown} of ${timeline.held})` : '';
    out.push({id: 'tfd-timeline', title: `Busiest files: operations over time${cut}`, data,
      layout: layout({showlegend: false, xaxis: amount('seconds from the session start'),
        yaxis: axis('file', {type: 'linear', tickmode: 'array', tickvals: names.map((n, i) => i), ticktext: names,
          range: [-0.6, names.length - 0.4], zeroline: false, showgrid: false}),
        margin: {l: 160, r: 20, t: 30, b: 40}})});
  }
  return out;
}
