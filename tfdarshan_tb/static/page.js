// The I/O tab's page (index.js, the module TensorBoard loads, calls its
// render()). Everything it shows comes from the plugin's JSON routes;
// charts use the Plotly that the plugin serves. Data from logs (file
// names above all) is only ever set as text, never parsed as HTML. The
// page's other modules: util.js (state, helpers), verdict.js (the lead),
// charts.js, table.js, ranks.js (a many-rank session's rank views).
import {bytes, count, el, get, keepChartLibraryCompiled, pct, rate, seconds, state, useEarlyAnswers} from './util.js';
import {figures, followSizes, withLegendFoot} from './charts.js';
import {verdictFigure, verdictLine} from './verdict.js';
import {fileTable, showStep} from './table.js';
import {rankFigures, rankFilter} from './ranks.js';

const CSS = `
html { overflow-y: scroll; }
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
td.path, th.path, td.mount, th.mount, td.kind, th.kind { text-align: left; max-width: 520px; overflow: hidden; text-overflow: ellipsis; }
.muted { color: #777; font-size: 12px; }
.error { color: #b00020; }
.advice li { margin: 6px 0; }
.advice pre { background: #f5f5f5; padding: 6px 10px; overflow-x: auto; user-select: all; }
.verdict { font-size: 14px; margin: 8px 0; }
.note { border-left: 3px solid #b26a00; padding: 2px 10px; font-size: 12px; margin: 8px 0; }
.note ul { margin: 4px 0; padding-left: 18px; }
.chip { border: 1px solid #90A4AE; border-radius: 12px; background: #ECEFF1; padding: 2px 10px; cursor: pointer; }
.level-HIGH { color: #b00020; } .level-WARN { color: #b26a00; } .level-INFO { color: #1565c0; }
`;

// --------------------------------------------------------------- the page
// What index.js started at the frame's start, handed over by render()
// rather than imported (index.js imports this module: no import runs back):
// {loadPlotly, rankViews, takeRuns, takeAnswer}.
let early;
export async function render(started) {
  early = started;
  useEarlyAnswers(early.takeAnswer);
  // timings for benchmarks/bench_tab.py: from render() to a complete page
  window.__tfdTimings = {start: performance.now()};
  document.head.append(el('style', {}, CSS));
  const root = el('div', {id: 'tfd-root'});
  document.body.append(root);
  let runs;
  try {
    runs = (await (early.takeRuns() || fetch('./runs').then((r) => r.json()))).runs;
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

  for (const r of runs) selRun.append(el('option', {value: r.run}, r.label || r.run));
  const fillSessions = () => {
    const r = runs.find((x) => x.run === selRun.value);
    // a flight recorder's dump is named by what made it
    selSession.replaceChildren(...r.sessions.map((s) => el('option', {value: s.session,
      ...(s.origin ? {'data-trigger': s.origin.trigger} : {})},
    s.origin ? `${s.session} (flight recorder: ${s.origin.trigger})` : s.session)));
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
    // a new session: its own default sort (the server's), all steps
    Object.assign(state, {run: selRun.value, session: selSession.value, host: selHost.value, offset: 0,
      sort: null, order: 'desc', step: null, node: '', ranks: ''});
    const r = runs.find((x) => x.run === selRun.value);
    const s = r.sessions.find((x) => x.session === selSession.value);
    // the whole of a many-rank session comes from its analysis tables, with rank views
    const ranked = early.rankViews(s, state.host);
    draw(body, ranked).catch((e) => body.replaceChildren(el('p', {class: 'error'}, e.message)));
  };
  selRun.addEventListener('change', fillSessions);
  selSession.addEventListener('change', fillHosts);
  selHost.addEventListener('change', show);
  selRun.value = runs[runs.length - 1].run;
  fillSessions();
}

const STEP_CHARTS = new Set(['tfd-verdict-chart', 'tfd-step-chart', 'tfd-step-mounts']);
// the most mounts a chart shows, and ranks the ranks chart shows at once (a page)
const MOUNT_PAGE = 50, RANK_PAGE = 256;
const PROGRESS_EVERY = 400;     // ms between asks for a first load's stages

// The width (CSS pixels) of a chart's cell in the grid as it will be laid
// out: the server cuts per-step series to it.
function cellWidth(body) {
  const probe = el('div', {class: 'grid', style: 'visibility: hidden; height: 0'},
      ...[0, 1, 2, 3].map(() => el('div')));
  body.append(probe);
  const w = probe.firstChild.getBoundingClientRect().width;
  probe.remove();
  return Math.max(100, Math.round(w || 600));
}

// While the session loads, its stages as the server reports them, a line each
// (a large session's first opening reads every log or builds its analysis tables).
function followProgress(status, done) {
  let timer = null;
  const poll = async () => {
    try {
      const p = await get('progress');
      if (done()) return;
      // (the stages of an earlier load are not this one's)
      if (p.loading) status.replaceChildren(...p.stages.map((line) => el('div', {}, line)));
    } catch (e) { /* a missed poll: the next one shows the stages */ }
    if (!done()) timer = setTimeout(poll, PROGRESS_EVERY);
  };
  timer = setTimeout(poll, PROGRESS_EVERY);
  return () => clearTimeout(timer);
}

let drawing = 0;      // a newer draw (another session chosen) makes an older one stop
async function draw(body, ranked) {
  const mine = ++drawing;
  const status = el('div', {class: 'muted', id: 'tfd-progress'});
  body.replaceChildren(el('p', {class: 'muted'}, ranked ? 'Loading (a session\'s first opening builds its '
      + 'analysis tables)…' : 'Loading…'), status);
  const width = cellWidth(body);
  let loaded = false;
  const stop = followProgress(status, () => loaded || mine !== drawing);
  // the chart library compiles while the answers come in (index.js asked for
  // the first session's); the file table's first page is asked for with them
  const plotly = early.loadPlotly(ranked);
  plotly.then(() => { window.__tfdTimings.plotly = window.__tfdTimings.plotly || performance.now(); }, () => {});
  const table = fileTable();
  table.catch(() => {});      // (its error is shown where the table goes)
  let answers;
  try {
    answers = await Promise.all([
      get('summary'), get('verdict', {width}), get('steps', {width}), get('histograms'),
      get('mounts', {limit: MOUNT_PAGE}), get('timeline'), get('advice'),
      ...(ranked ? [get('rank_heatmap', {width}), get('rank_wait', {limit: RANK_PAGE})] : [])]);
  } finally {
    loaded = true;
    stop();
  }
  const [summary, verdict, steps, hist, mounts, timeline, advice, heat, wait] = answers;
  if (mine !== drawing) return;
  window.__tfdTimings.data = performance.now();
  body.replaceChildren(originNote(summary.origin), skippedNote(summary.skipped_logs),
      partialNote(summary.partial_logs, summary.ranks), verdictLine(verdict), cards(summary),
      servedNote(summary.served), coverageNote(summary.coverage), adviceSection(advice));
  const figs = [verdictFigure(verdict), ...figures(steps, hist, mounts, timeline)].filter(Boolean);
  // every cell first, then the plots: a plot drawn into a grid still filling up
  // takes the width of a row that later holds two or three
  const boxes = figs.map((f) => el('div', {id: f.id, class: 'chart'}));
  body.append(el('div', {class: 'grid'}, ...figs.map((f, i) => el('div', {}, el('h2', {}, f.title), boxes[i]))));
  const {Plotly, address} = await plotly;
  if (mine !== drawing) return;
  followSizes(Plotly, boxes);
  await drawInView(Plotly, figs, boxes, () => mine !== drawing, (box, i) => {
    // a step in a per-step chart: its files in the table (the analysis tables keep no files per step)
    // (not in a downsampled chart: its points are the edges of buckets of steps)
    if (!ranked && STEP_CHARTS.has(box.id) && !figs[i].downsampled) {
      box.on('plotly_click', (e) => { if (e.points.length) showStep(Number(e.points[0].x)); });
    }
  });
  if (ranked) await rankSection(body, Plotly, heat, wait, width);
  if (mine !== drawing) return;
  window.__tfdTimings.charts = performance.now();
  // the table last: once it is in, every chart above it is drawn
  let files;
  try {
    files = await table;
  } catch (e) {
    files = el('p', {class: 'error', id: 'tfd-files'}, e.message);
  }
  if (mine !== drawing) return;
  body.append(el('h2', {}, 'Files'), files);
  window.__tfdTimings.rendered = performance.now();
  keepChartLibraryCompiled(address);
}

// Each plot drawn in a task of its own, so the first is on screen before
// the next is begun: those in view first, in page order, then the rest
// when the browser is idle or as one is scrolled near (whichever comes
// first). Resolves when every plot is drawn; `drawn(box, i)` after each.
// Notes in window.__tfdTimings when the first plot and the first screen's
// last were drawn.
const NEAR = '200px';
function drawInView(Plotly, figs, boxes, stale, drawn) {
  const timings = window.__tfdTimings;
  const inView = (i) => boxes[i].getBoundingClientRect().top < window.innerHeight;
  const visible = new Set(boxes.map((b, i) => i).filter(inView));
  const order = [...visible, ...boxes.map((b, i) => i).filter((i) => !visible.has(i))];
  let firstScreen = visible.size;
  if (!firstScreen) timings.view = performance.now();
  return new Promise((resolve, reject) => {
    // one scrolled near comes right after what is left of the first screen
    const near = new IntersectionObserver((entries) => {
      for (const e of entries) {
        const i = boxes.indexOf(e.target), at = order.indexOf(i);
        if (!e.isIntersecting || at < 0 || visible.has(i)) continue;
        order.splice(at, 1);
        order.splice(order.filter((j) => visible.has(j)).length, 0, i);
      }
    }, {rootMargin: NEAR});
    boxes.forEach((b) => near.observe(b));
    const next = async () => {
      if (stale() || !order.length) {
        near.disconnect();
        resolve();
        return;
      }
      const i = order.shift();
      const began = performance.now();
      try {
        const width = boxes[i].getBoundingClientRect().width;
        await Plotly.newPlot(boxes[i], figs[i].data, withLegendFoot(figs[i], width), {displaylogo: false});
        (timings.plots = timings.plots || {})[boxes[i].id] = performance.now() - began;
        (timings.order = timings.order || []).push(boxes[i].id);
      } catch (e) {
        near.disconnect();
        reject(e);
        return;
      }
      drawn(boxes[i], i);
      timings.first = timings.first || performance.now();
      if (--firstScreen === 0) timings.view = performance.now();
      // the first plot painted before the next is begun; the rest of the first screen
      // at once, in this task (a paint between plots cost more than the plot: one paint
      // of the lot instead); below the fold: when the browser is idle
      if (!order.length || !inView(order[0])) requestIdleCallback(next, {timeout: 100});
      else if (timings.order.length === 1) requestAnimationFrame(() => setTimeout(next));
      else next();
    };
    next();
  });
}

// The rank views under their filter; the filter redraws them alone. The
// ranks chart shows a page of RANK_PAGE ranks, longest wait first.
async function rankSection(body, Plotly, heat, wait, width) {
  const grid = el('div', {class: 'grid', id: 'tfd-ranks'});
  const status = el('span', {class: 'muted', id: 'tfd-rank-status'});
  const prev = el('button', {id: 'tfd-rank-prev'}, '‹ prev');
  const next = el('button', {id: 'tfd-rank-next'}, 'next ›');
  let offset = 0;
  const plot = async (h, w) => {
    const figs = rankFigures(h, w);
    const boxes = figs.map((f) => el('div', {id: f.id, class: 'chart'}));
    grid.replaceChildren(...figs.map((f, i) => el('div', {}, el('h2', {}, f.title), boxes[i])));
    const end = w.offset + w.ranks.length;
    status.textContent = w.total > w.ranks.length ? `ranks ${w.offset + 1}–${end} of ${w.total} by input wait`
      : count(w.ranks.length, 'rank');
    prev.disabled = w.offset === 0;
    next.disabled = end >= w.total;
    await Promise.all(figs.map((f, i) => Plotly.newPlot(boxes[i], f.data, f.layout, {displaylogo: false})));
    followSizes(Plotly, boxes, {fresh: false});
  };
  const refilter = () => {
    const q = {node: state.node, ranks: state.ranks};
    Promise.all([get('rank_heatmap', {...q, width}), get('rank_wait', {...q, offset, limit: RANK_PAGE})])
        .then(([h, w]) => plot(h, w)).catch((e) => { status.textContent = e.message; });
  };
  prev.addEventListener('click', () => { offset = Math.max(0, offset - RANK_PAGE); refilter(); });
  next.addEventListener('click', () => { offset += RANK_PAGE; refilter(); });
  const filter = rankFilter(wait.all_hosts, () => { offset = 0; refilter(); });
  filter.append(prev, next);
  body.append(el('div', {}, el('h2', {}, 'Ranks'), filter, status, grid));
  await plot(heat, wait);
}

// A flight recorder's dump: what triggered it, in the recorder's words.
function originNote(origin) {
  if (!origin) return '';
  return el('div', {id: 'tfd-origin', class: 'note'}, el('b', {}, `Why this session exists (flight recorder, `
      + `${origin.trigger || 'no trigger recorded'}): `), origin.reason || 'no reason recorded.');
}

// Logs of the session that could not be read: the figures are the others'.
function skippedNote(skipped) {
  if (!skipped || !skipped.length) return '';
  const n = skipped.length;
  return el('div', {id: 'tfd-skipped', class: 'note'},
      `${n} ${n === 1 ? 'log was' : 'logs were'} skipped as unreadable; these figures are the other logs':`,
      el('ul', {}, ...skipped.map((s) => el('li', {}, `${s.log}: ${s.reason}`))));
}

// Processes that were killed before writing their logs: their figures are
// in, as of their last collect, and each says why it is partial.
function partialNote(partial, ranked) {
  if (!partial || !partial.length) return '';
  const n = partial.length;
  const what = ranked ? (n === 1 ? 'rank' : 'ranks') : (n === 1 ? 'process' : 'processes');
  return el('div', {id: 'tfd-partial', class: 'note'},
      `${n} ${what} ended without writing ${n === 1 ? 'its' : 'their'} log; ${n === 1 ? 'it is' : 'they are'} `
      + 'counted here as far as recorded (partial):',
      el('ul', {}, ...partial.map((p) => el('li', {'data-log': p.log},
          `${p.label}: partial, ${p.reason}${p.last_collect ? ` (last collect ${p.last_collect})` : ''}`))));
}

function cards(s) {
  const c = (key, label, value) => el('div', {class: 'card', 'data-key': key},
      el('div', {class: 'v'}, value), el('div', {class: 'k'}, label));
  const list = [
    c('bytes_read', 'read', bytes(s.bytes_read)),
    c('bytes_written', 'written', bytes(s.bytes_written)),
    // the words are the measures' own (tfdarshan/measures/), the same for one process and many ranks
    c('bandwidth', s.labels.bandwidth, rate(s.bandwidth)),
    c('data_time', s.labels.data_time, seconds(s.data_time)),
    c('meta_time', s.labels.meta_time, seconds(s.meta_time)),
    ...(s.copy_bytes ? [c('copy_bytes', 'copied by the kernel (copy_file_range, sendfile, splice)',
      bytes(s.copy_bytes))] : []),
    ...(s.mmap_bytes ? [c('mmap_bytes', 'read through mmap (estimate)', `~${bytes(s.mmap_bytes)}`)] : []),
    ...(s.runtime_mmap_bytes ? [c('runtime_mmap_bytes', 'the MPI runtime\'s own shared memory, mapped: not data',
      `~${bytes(s.runtime_mmap_bytes)}`)] : []),
    c('files', 'files', String(s.files)),
    c('steps', 'steps', String(s.steps)),
  ];
  if (s.setup_time != null) {
    list.push(c('setup_time', `set-up before the first step${s.ranks ? ' (longest rank)' : ''}, not counted as a step`,
        seconds(s.setup_time)));
  }
  if (s.ranks) list.push(c('ranks', `ranks on ${s.hosts} host${s.hosts === 1 ? '' : 's'}`, String(s.ranks)));
  else if (s.processes > 1) list.push(c('processes', 'processes', String(s.processes)));
  const cov = s.coverage;
  if (cov) {
    const all = s.ranks || s.processes || 1;
    const of = cov.processes < all ? ` of ${all}` : '';
    const over = cov.processes > 1 || of ? ` (${cov.processes}${of} ${s.ranks ? 'ranks' : 'processes'} added up`
      + `${of ? ': a process killed before writing its log has no coverage record' : ''}; lowest `
      + `${pct(cov.lowest)})` : '';
    list.push(c('coverage', `of the data I/O seen${over}`, pct(cov.share)));
  }
  const box = el('div', {id: 'tfd-summary', class: 'cards'}, ...list);
  const notes = [];
  if (cov) {
    notes.push(`Data coverage: ${bytes(cov.counted_bytes)} recorded of the ${bytes(cov.kernel_bytes)} the kernel `
      + `counted, less ${cov.excluded_bytes == null ? 'an unknown amount' : bytes(cov.excluded_bytes)} excluded by `
      + `design (imports, libraries, system files); unseen: ${bytes(cov.unseen_bytes)}.`);
  }
  if (s.folded_files) notes.push(`${count(s.folded_files, 'file')} beyond the record cap ${s.folded_files === 1 ? 'is' : 'are'} counted together.`);
  if (s.trace_dropped) notes.push(`${count(s.trace_dropped, 'trace segment')} ${s.trace_dropped === 1 ? 'was' : 'were'} dropped for lack of memory.`);
  return notes.length ? el('div', {}, box, el('p', {class: 'muted'}, notes.join(' '))) : box;
}

// Staged copies served in place of their sources (tfdarshan run --staged):
// the line `recommend --compare` prints, made on the server
function servedNote(served) {
  return served ? el('p', {id: 'tfd-served', class: 'note'}, served.label) : '';
}

// Low data coverage: what the shim cannot see, as the capture listed it
// (what it leaves out by design is counted apart, and is not missing); and
// the files whose data moved in ways Darshan's counters miss (a Darshan log
// alone covers less: darshan_share), with how.
const COVERAGE_FLOOR = 0.9;
function coverageNote(cov) {
  if (!cov) return '';
  const blind = cov.share != null && cov.share < COVERAGE_FLOOR;
  const files = blind || (cov.darshan_share != null && cov.darshan_share < COVERAGE_FLOOR)
    ? (cov.beyond_darshan || []) : [];
  if (!blind && !files.length) return '';
  const note = el('div', {id: 'tfd-coverage', class: 'note'});
  if (blind) {
    note.append(`These figures cover only ${pct(cov.share)} of the data I/O the kernel counted (all it counted but the `
        + `${bytes(cov.excluded_bytes)} excluded by design); ${bytes(cov.unseen_bytes)} were not seen. What tfdarshan `
        + 'cannot see:', el('ul', {}, ...(cov.blind_spots || []).map((b) => el('li', {}, b))));
  }
  if (files.length) {
    const more = Math.max(0, (cov.beyond_darshan_files || 0) - files.length);
    const amount = (f) => [f.bytes_read - f.mmap_bytes > 0 ? `${bytes(f.bytes_read - f.mmap_bytes)} copied out` : '',
      f.bytes_written > 0 ? `${bytes(f.bytes_written)} copied in` : '',
      f.mmap_bytes > 0 ? `~${bytes(f.mmap_bytes)} through mmap (estimate)` : ''].filter(Boolean).join(', ');
    note.append(`Darshan's counters alone hold ${cov.darshan_share != null ? pct(cov.darshan_share) : 'less'} of it: `
        + 'these files moved data in ways they cannot see, counted by tfdarshan in columns of its own:',
    el('ul', {id: 'tfd-beyond-darshan'}, ...files.map((f) => el('li', {}, el('code', {}, f.path),
        ` (${f.how}): ${amount(f)}`)), ...(more ? [el('li', {}, `and ${more} more`)] : [])));
  }
  return note;
}

function adviceSection(a) {
  const box = el('div', {id: 'tfd-advice', class: 'advice'});
  if (!a.available) {
    if (a.command) {
      const lead = a.problem ? `The stored staging advice cannot be shown: ${a.problem}. To make it again, run`
                             : 'No staging advice for this session yet. To get it, run';
      box.append(el('p', {class: 'muted', id: 'tfd-advice-note'}, lead + ' (with a directory ' +
          'on your fast storage for <path>):'), el('pre', {id: 'tfd-recommend'}, a.command));
    }
    return box;
  }
  const adv = a.advice;
  box.append(el('h2', {}, 'Staging advice'));
  if (adv.summary) box.append(el('p', {}, adv.summary));
  if (adv.plans) box.append(el('p', {id: 'tfd-plans'}, adv.plans.report));
  const items = el('ul');
  for (const item of adv.selection || []) {
    const of = item.expected_time == null ? '' : ` of its ${seconds(item.expected_time)}`;
    items.append(el('li', {}, `${item.name}: ${bytes(item.bytes)}, saves ${seconds(item.saving)}${of} (predicted)`));
  }
  box.append(items);
  if ((adv.left_out || []).length) {
    box.append(el('p', {class: 'muted', id: 'tfd-left-out'}, 'Left out (not training input): ' + adv.left_out.map(
        (x) => `${count(x.files, 'file')}, ${bytes(x.bytes)}: ${x.reason}`).join('; ') + '.'));
  }
  const findings = el('ul');
  for (const f of adv.findings || []) {
    findings.append(el('li', {}, el('span', {class: `level-${f.level}`}, `[${f.level}] `), `${f.title}: ${f.detail}`,
        el('div', {class: 'muted'}, `Suggested: ${f.suggestion}`)));
  }
  box.append(findings);
  return box;
}
