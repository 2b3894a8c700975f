// The I/O tab. TensorBoard loads this module in an iframe (base href
// plugin/tfdarshan/) and calls render(). Everything it shows comes from the
// plugin's JSON routes; charts use the Plotly that the plotly package ships,
// served by the plugin. Data from logs (file names above all) is only ever
// set as text, never parsed as HTML.

const PAGE = 50;
const state = {run: null, session: null, host: '', sort: 'bytes_read', order: 'desc', offset: 0, q: ''};

// ------------------------------------------------------------------ helpers
function el(tag, attrs = {}, ...children) {
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
const plain = (s) => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

function bytes(n) {
  if (n == null) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (Math.abs(n) >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return i ? `${n.toFixed(1)} ${units[i]}` : `${n} B`;
}
const seconds = (s) => s == null ? '–' : s < 1e-3 ? `${(s * 1e6).toFixed(0)} µs` : s < 1 ? `${(s * 1e3).toFixed(1)} ms` : `${s.toFixed(2)} s`;
const rate = (b) => b == null ? '–' : `${bytes(b)}/s`;
const pct = (x) => x == null ? '–' : `${(100 * x).toFixed(1)} %`;

function query(extra = {}) {
  const p = new URLSearchParams({run: state.run, session: state.session, ...extra});
  if (state.host) p.set('host', state.host);
  return p.toString();
}

async function get(route, extra = {}) {
  const r = await fetch(`./${route}?${query(extra)}`);
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || `${route}: HTTP ${r.status}`);
  return body;
}

let plotlyLoading = null;
function loadPlotly() {
  if (window.Plotly) return Promise.resolve(window.Plotly);
  if (plotlyLoading) return plotlyLoading;
  return plotlyLoading = new Promise((resolve, reject) => {
    const s = el('script', {src: './plotly.js'});
    s.onload = () => resolve(window.Plotly);
    s.onerror = () => reject(new Error('could not load the chart library'));
    document.head.append(s);
  });
}

const CSS = `
body { font-family: Roboto, Arial, sans-serif; margin: 16px; color: #212121; }
h2 { font-size: 15px; font-weight: 500; margin: 20px 0 8px; }
.bar { display: flex; gap: 12px; align-items: center; flex-wrap: wrap; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; margin: 12px 0; }
.card { border: 1px solid #ddd; border-radius: 6px; padding: 8px 12px; min-width: 120px; }
.card .v { font-size: 18px; font-weight: 500; }
.card .k { font-size: 11px; color: #666; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(460px, 1fr)); gap: 12px; }
.grid > div { min-width: 0; }
.chart { height: 300px; border: 1px solid #eee; }
table { border-collapse: collapse; width: 100%; font-size: 12px; }
th, td { border-bottom: 1px solid #eee; padding: 4px 6px; text-align: right; white-space: nowrap; }
th { cursor: pointer; user-select: none; background: #fafafa; position: sticky; top: 0; }
td.path, th.path, td.tier { text-align: left; max-width: 520px; overflow: hidden; text-overflow: ellipsis; }
.muted { color: #777; font-size: 12px; }
.error { color: #b00020; }
.advice li { margin: 6px 0; }
.level-HIGH { color: #b00020; } .level-WARN { color: #b26a00; } .level-INFO { color: #1565c0; }
`;

// --------------------------------------------------------------- the page
export async function render() {
  // timings for benchmarks/bench_tab.py: from render() to a complete page
  window.__tfdTimings = {start: performance.now()};
  // the chart library is the largest thing the page loads: start at once
  loadPlotly().catch(() => {});
  document.head.append(el('style', {}, CSS));
  const root = el('div', {id: 'tfd-root'});
  document.body.append(root);
  let runs;
  try {
    runs = (await fetch('./runs').then((r) => r.json())).runs;
  } catch (e) {
    root.append(el('p', {class: 'error'}, `Could not list sessions: ${e.message}`));
    return;
  }
  if (!runs.length) {
    root.append(el('p', {}, 'No tfdarshan data in this log directory yet.'));
    return;
  }
  const selRun = el('select', {id: 'tfd-run'});
  const selSession = el('select', {id: 'tfd-session'});
  const selHost = el('select', {id: 'tfd-host'});
  root.append(el('div', {class: 'bar'}, 'Run ', selRun, ' Session ', selSession, ' Host / rank ', selHost));
  const body = el('div', {id: 'tfd-body'});
  root.append(body);

  for (const r of runs) selRun.append(el('option', {value: r.run}, r.run));
  const fillSessions = () => {
    const r = runs.find((x) => x.run === selRun.value);
    selSession.replaceChildren(...r.sessions.map((s) => el('option', {value: s.session}, s.session)));
    selSession.value = r.sessions[r.sessions.length - 1].session;
    fillHosts();
  };
  const fillHosts = () => {
    const r = runs.find((x) => x.run === selRun.value);
    const s = r.sessions.find((x) => x.session === selSession.value);
    // a multi-rank job: "all 4 ranks" is the job's total, each rank its own view
    const all = s.ranks > 1 ? `all ${s.hosts.length} (${s.ranks} ranks)` : `all (${s.hosts.length})`;
    selHost.replaceChildren(el('option', {value: ''}, all),
        ...s.hosts.map((h, i) => el('option', {value: h}, (s.labels || [])[i] || h)));
    show();
  };
  const show = () => {
    Object.assign(state, {run: selRun.value, session: selSession.value, host: selHost.value, offset: 0});
    draw(body).catch((e) => body.replaceChildren(el('p', {class: 'error'}, e.message)));
  };
  selRun.addEventListener('change', fillSessions);
  selSession.addEventListener('change', fillHosts);
  selHost.addEventListener('change', show);
  selRun.value = runs[runs.length - 1].run;
  fillSessions();
}

// Plotly sizes a plot from its box when it draws it, and `responsive` follows
// only the window: a grid that reflows (a scrollbar appears, TensorBoard's
// sidebar opens) would leave plots wider than their cells. Follow each box.
let sizes = null;
function followSizes(Plotly, divs) {
  if (sizes) sizes.disconnect();
  sizes = new ResizeObserver((entries) => {
    for (const {target} of entries) {
      const drawnWidth = target._fullLayout && target._fullLayout.width;
      if (target.isConnected && drawnWidth && Math.abs(drawnWidth - target.clientWidth) >= 1) {
        Plotly.Plots.resize(target).catch(() => {});   // (rejects for a plot removed meanwhile)
      }
    }
  });
  for (const d of divs) sizes.observe(d);
}

let drawing = 0;      // a newer draw (another session chosen) makes an older one stop
async function draw(body) {
  const mine = ++drawing;
  body.replaceChildren(el('p', {class: 'muted'}, 'Loading…'));
  const [Plotly, summary, steps, hist, mounts, timeline, advice] = await Promise.all([
    loadPlotly(), get('summary'), get('steps'), get('histograms'), get('mounts'), get('timeline'), get('advice')]);
  if (mine !== drawing) return;
  window.__tfdTimings.data = performance.now();
  body.replaceChildren();
  body.append(cards(summary));
  body.append(adviceSection(advice));
  if (!steps.steps.length) body.append(el('p', {class: 'muted'}, 'No step series for this session (an imported log).'));
  const figs = figures(steps, hist, mounts, timeline);
  // every cell first, then the plots: a plot drawn into a grid still filling up
  // takes the width of a row that later holds two or three
  const boxes = figs.map((f) => el('div', {id: f.id, class: 'chart'}));
  body.append(el('div', {class: 'grid'}, ...figs.map((f, i) => el('div', {}, el('h2', {}, f.title), boxes[i]))));
  await Promise.all(figs.map((f, i) => Plotly.newPlot(boxes[i], f.data, f.layout, {displaylogo: false})));
  if (mine !== drawing) return;
  followSizes(Plotly, boxes);
  window.__tfdTimings.charts = performance.now();
  const files = await fileTable();
  if (mine !== drawing) return;
  body.append(el('h2', {}, 'Files'), files);
  window.__tfdTimings.rendered = performance.now();
}

// ------------------------------------------------------------------ charts
// One colour per storage tier, the same in every chart: Okabe and Ito's
// colour-blind-safe set, then hues a golden angle apart.
const TIER_COLOURS = ['#0072B2', '#E69F00', '#009E73', '#CC79A7', '#D55E00', '#56B4E9', '#000000', '#F0E442'];
function tierColours(names) {
  const sorted = [...new Set(names)].sort();
  return new Map(sorted.map((n, i) => [n, TIER_COLOURS[i] || `hsl(${(i * 137.5) % 360}, 65%, 40%)`]));
}

// what is measured (not where) in slate and purple, apart from every tier colour
const READ = '#37474F', WRITTEN = '#90A4AE', RATE = '#8E24AA';

const MIB = 2 ** 20;
const hasData = (ys) => ys.some((v) => v != null && v !== 0);
const axis = (text, extra = {}) => ({title: {text}, automargin: true, ...extra});
// amounts and rates: an axis from zero
const amount = (text, extra = {}) => axis(text, {rangemode: 'tozero', ...extra});
// the legend at the foot of the figure, under the axis title (the mode bar has the top)
const layout = (extra) => ({margin: {l: 60, r: 60, t: 30, b: 40}, showlegend: true,
  legend: {orientation: 'h', x: 0, xref: 'container', y: 0, yref: 'container', yanchor: 'bottom'}, ...extra});

// The charts for a session, each {id, title, data, layout}; a chart or
// series with nothing to show is left out (an empty axis runs from -1 to 1).
function figures(steps, hist, mounts, timeline) {
  const tiers = tierColours([...Object.keys(steps.mounts), ...mounts.mounts.map((m) => m.tier)]);
  const out = [];
  if (steps.steps.length) {
    // long series as lines (SVG: one path per series; WebGL may be software-rendered); a few steps as bars
    const many = steps.steps.length > 500;
    const series = (name, y, color, extra = {}) => many
      ? {type: 'scatter', mode: 'lines', name, x: steps.steps, y, line: {width: 1, color}, ...extra}
      : {type: 'bar', name, x: steps.steps, y, marker: {color}};
    const x = axis('step', {type: many ? 'linear' : 'category'});
    const moved = [series('bytes read', steps.bytes_read, READ), series('bytes written', steps.bytes_written, WRITTEN)]
        .filter((t) => hasData(t.y));
    if (moved.length) {
      const bw = steps.bandwidth.map((b) => b == null ? null : b / MIB);
      const rate = hasData(bw) ? [{type: 'scatter', mode: many ? 'lines' : 'lines+markers', name: 'bandwidth',
        x: steps.steps, y: bw, yaxis: 'y2', line: {color: RATE}, marker: {color: RATE}}] : [];
      out.push({id: 'tfd-step-chart', title: 'Per step: bytes and bandwidth', data: [...moved, ...rate],
        layout: layout({barmode: 'stack', xaxis: x, yaxis: amount('bytes'),
          ...(rate.length ? {yaxis2: amount('MiB/s', {overlaying: 'y', side: 'right'})} : {})})});
    }
    const perTier = [...tiers.keys()].filter((t) => steps.mounts[t] && hasData(steps.mounts[t]))
        .map((t) => series(plain(t), steps.mounts[t], tiers.get(t), {stackgroup: 'tiers', fillcolor: tiers.get(t)}));
    if (perTier.length) {
      out.push({id: 'tfd-step-mounts', title: 'Per step and storage tier: bytes read', data: perTier,
        layout: layout({barmode: 'stack', xaxis: x, yaxis: amount('bytes read')})});
    }
  }
  const sizes = [{type: 'bar', name: 'reads', x: hist.bins, y: hist.read, marker: {color: READ}},
    {type: 'bar', name: 'writes', x: hist.bins, y: hist.write, marker: {color: WRITTEN}}].filter((t) => hasData(t.y));
  if (sizes.length) {
    out.push({id: 'tfd-hist', title: 'Access sizes (POSIX)', data: sizes,
      layout: layout({barmode: 'group', xaxis: axis('request size (bytes)'), yaxis: amount('operations')})});
  }
  // per tier, read and write side by side: one bar (and legend entry) per tier
  const byTier = (fields, scale = 1) => mounts.mounts
    .map((m) => {
      const points = fields.map(([label, key]) => [label, m[key] == null ? null : m[key] / scale]).filter(([, v]) => v);
      return {type: 'bar', name: plain(m.tier), x: points.map((p) => p[0]), y: points.map((p) => p[1]),
        marker: {color: tiers.get(m.tier)}};
    })
    .filter((t) => t.y.length)
    .sort((a, b) => a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
  const ops = (labels) => axis('operation', {categoryorder: 'array', categoryarray: labels});
  const moved = byTier([['read', 'bytes_read'], ['written', 'bytes_written']]);
  if (moved.length) {
    out.push({id: 'tfd-mounts', title: 'Storage tiers: bytes moved', data: moved,
      layout: layout({barmode: 'group', xaxis: ops(['read', 'written']), yaxis: amount('bytes')})});
  }
  const speed = byTier([['read', 'read_bandwidth'], ['write', 'write_bandwidth']], MIB);
  if (speed.length) {
    out.push({id: 'tfd-mounts-bandwidth', title: 'Storage tiers: bandwidth (bytes / time in the calls)', data: speed,
      layout: layout({barmode: 'group', xaxis: ops(['read', 'write']), yaxis: amount('MiB/s')})});
  }
  if (timeline.available) {
    // one marker per operation at its start; most last microseconds, too short for bars
    const data = timeline.files.map((f) => ({
      type: 'scattergl', mode: 'markers', name: plain(f.path.split('/').pop()), x: f.start,
      y: f.start.map(() => plain(f.path.split('/').pop())),
      marker: {size: 7, symbol: 'line-ns-open', line: {width: 2}},
      customdata: f.offset.map((o, j) => [o, f.length[j], f.op[j], f.duration[j] * 1e6]),
      hovertemplate: '%{customdata[2]} of %{customdata[1]} bytes at offset %{customdata[0]}, %{customdata[3]:.1f} µs<extra></extra>',
    }));
    out.push({id: 'tfd-timeline', title: 'Busiest files: operations over time', data,
      layout: layout({showlegend: false, xaxis: amount('seconds from the session start'), yaxis: axis('file'),
        margin: {l: 160, r: 20, t: 30, b: 40}})});
  }
  return out;
}

function cards(s) {
  const c = (key, label, value) => el('div', {class: 'card', 'data-key': key},
      el('div', {class: 'v'}, value), el('div', {class: 'k'}, label));
  const list = [
    c('bytes_read', 'read', bytes(s.bytes_read)),
    c('bytes_written', 'written', bytes(s.bytes_written)),
    c('bandwidth', 'mean bandwidth (bytes / I/O time)', rate(s.bandwidth)),
    c('io_time', 'time in reads and writes', seconds(s.io_time)),
    c('meta_time', 'time in opens, stats, seeks', seconds(s.meta_time)),
    c('input_share', s.steps ? 'step time in input I/O calls' : 'step time in input I/O calls (no step markers seen)',
      pct(s.input_share)),
    c('files', 'files', String(s.files)),
    c('steps', 'steps', String(s.steps)),
  ];
  if (s.processes > 1) list.push(c('processes', 'processes', String(s.processes)));
  if (s.coverage) {
    for (const cov of s.coverage) list.push(c('coverage', 'of the process\'s I/O seen', pct(cov.share)));
  }
  const box = el('div', {id: 'tfd-summary', class: 'cards'}, ...list);
  const notes = [];
  if (s.folded_files) notes.push(`${s.folded_files} files beyond the record cap are counted together.`);
  if (s.trace_dropped) notes.push(`${s.trace_dropped} trace segments were dropped for lack of memory.`);
  return notes.length ? el('div', {}, box, el('p', {class: 'muted'}, notes.join(' '))) : box;
}

function adviceSection(a) {
  const box = el('div', {id: 'tfd-advice', class: 'advice'});
  if (!a.available) return box;
  const adv = a.advice;
  box.append(el('h2', {}, 'Staging advice'));
  if (adv.summary) box.append(el('p', {}, adv.summary));
  const items = el('ul');
  for (const item of adv.selection || []) {
    items.append(el('li', {}, `${item.name}: ${bytes(item.bytes)}, saves ${seconds(item.saving)} (predicted)`));
  }
  box.append(items);
  const findings = el('ul');
  for (const f of adv.findings || []) {
    findings.append(el('li', {}, el('span', {class: `level-${f.level}`}, `[${f.level}] `), `${f.title}: ${f.detail}`,
        el('div', {class: 'muted'}, `Suggested: ${f.suggestion}`)));
  }
  box.append(findings);
  return box;
}

async function fileTable() {
  const wrap = el('div', {id: 'tfd-files'});
  const search = el('input', {id: 'tfd-search', placeholder: 'filter paths', size: '40'});
  const status = el('span', {class: 'muted', id: 'tfd-files-status'});
  const prev = el('button', {id: 'tfd-prev'}, '‹ prev');
  const next = el('button', {id: 'tfd-next'}, 'next ›');
  const table = el('table');
  wrap.append(el('div', {class: 'bar'}, search, prev, next, status), table);
  const labels = {path: 'file', interface: 'via', tier: 'tier', bytes_read: 'read', bytes_written: 'written',
    reads: 'reads', writes: 'writes', opens: 'opens', stats: 'stats', read_time: 'read time',
    write_time: 'write time', meta_time: 'meta time', bandwidth: 'bandwidth', mean_request: 'mean request',
    seq_fraction: 'sequential', zero_reads: '0-byte reads'};
  const fmt = {bytes_read: bytes, bytes_written: bytes, read_time: seconds, write_time: seconds, meta_time: seconds,
    bandwidth: rate, mean_request: bytes, seq_fraction: pct};
  // null in these is a figure nobody counted (STDIO has no stat counter): '?', never 0
  const uncounted = new Set(['stats', 'seq_fraction', 'zero_reads']);
  let timer = null;
  const load = async () => {
    const page = await get('files', {sort: state.sort, order: state.order, offset: state.offset, limit: PAGE, q: state.q});
    const head = el('tr', {}, ...page.columns.map((col) => el('th', {
      class: col === 'path' ? 'path' : '', 'data-col': col,
      onclick: () => {
        state.order = state.sort === col && state.order === 'desc' ? 'asc' : 'desc';
        state.sort = col;
        state.offset = 0;
        load();
      }}, labels[col] + (state.sort === col ? (state.order === 'desc' ? ' ▼' : ' ▲') : ''))));
    const rows = page.rows.map((r) => el('tr', {}, ...r.map((v, i) => {
      const col = page.columns[i];
      return el('td', {class: col === 'path' || col === 'tier' ? col : '', title: col === 'path' ? String(v) : ''},
          v == null ? (uncounted.has(col) ? '?' : '–') : fmt[col] ? fmt[col](v) : String(v));
    })));
    table.replaceChildren(el('thead', {}, head), el('tbody', {}, ...rows));
    const end = Math.min(page.offset + PAGE, page.total);
    status.textContent = page.total ? `${page.offset + 1}–${end} of ${page.total} files` : 'no files';
    prev.disabled = page.offset === 0;
    next.disabled = end >= page.total;
  };
  search.addEventListener('input', () => {
    clearTimeout(timer);
    timer = setTimeout(() => { state.q = search.value; state.offset = 0; load(); }, 200);
  });
  prev.addEventListener('click', () => { state.offset = Math.max(0, state.offset - PAGE); load(); });
  next.addEventListener('click', () => { state.offset += PAGE; load(); });
  await load();
  return wrap;
}
