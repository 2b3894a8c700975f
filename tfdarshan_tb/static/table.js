// The file table: paged, sorted and filtered on the server; a step chosen
// in a per-step chart narrows it to that step's files until its chip is cleared.
import {PAGE, bytes, el, get, pct, rate, seconds, state} from './util.js';

const LABELS = {path: 'file', interface: 'via', mount: 'mount', kind: 'not input', bytes_read: 'read', bytes_written: 'written',
  reads: 'reads', writes: 'writes', opens: 'opens', stats: 'stats', read_time: 'read time',
  write_time: 'write time', meta_time: 'meta time', file_time: 'time in file calls', bandwidth: 'bandwidth',
  mean_request: 'mean request (data reads)', seq_fraction: 'sequential (data reads)', zero_reads: '0-byte reads',
  ranks: 'ranks', bytes_min: 'least a rank moved', bytes_median: 'median a rank moved', bytes_max: 'most a rank moved',
  file_time_max: 'longest a rank spent in file calls', how: 'also moved by', copy_bytes_read: 'copied out (kernel)',
  copy_bytes_written: 'copied in (kernel)', copy_time: 'copy time', mmap_bytes: 'read through mmap (estimate)'};
const FORMAT = {bytes_read: bytes, bytes_written: bytes, read_time: seconds, write_time: seconds, meta_time: seconds,
  file_time: seconds, bandwidth: rate, mean_request: bytes, seq_fraction: pct, bytes_min: bytes, bytes_median: bytes,
  bytes_max: bytes, file_time_max: seconds, copy_bytes_read: bytes, copy_bytes_written: bytes, copy_time: seconds,
  mmap_bytes: (v) => v ? `~${bytes(v)}` : bytes(v)};
// the header's hover text, where a label needs more words
const HELP = {how: 'ways Darshan\'s counters cannot see: copy_file_range, sendfile, splice, mmap',
  kind: 'what a file that is not training input is (configuration, tf.data cache or snapshot, MPI runtime, '
    + 'tfdarshan): listed after the input while the table is by time in file calls, slowest first',
  mmap_bytes: 'pages of the file the process mapped (/proc/self/pagemap): the kernel maps cached neighbours at each '
    + 'fault, so scattered reads are overcounted'};
// text columns, left-aligned (header and cells alike); numbers go to the right
const TEXT = new Set(['path', 'mount', 'kind']);
// null in these is a figure nobody counted (STDIO has no stat counter): '?', never 0
const UNCOUNTED = new Set(['stats', 'seq_fraction', 'zero_reads']);

let reload = null;      // the table on the page, if any

// Show only the files of this step (null: all files).
export function showStep(step) {
  state.step = step;
  state.offset = 0;
  if (reload) reload();
}

export async function fileTable() {
  const wrap = el('div', {id: 'tfd-files'});
  const search = el('input', {id: 'tfd-search', placeholder: 'filter paths', size: '40'});
  const chip = el('span', {id: 'tfd-step-filter'});
  const status = el('span', {class: 'muted', id: 'tfd-files-status'});
  const prev = el('button', {id: 'tfd-prev'}, '‹ prev');
  const next = el('button', {id: 'tfd-next'}, 'next ›');
  const table = el('table');
  wrap.append(el('div', {class: 'bar'}, search, chip, prev, next, status), table);
  let timer = null;
  let latest = 0;       // answers can come back out of order: draw only the last asked for
  const load = async () => {
    const mine = ++latest;
    const extra = {order: state.order, offset: state.offset, limit: PAGE, q: state.q};
    if (state.sort) extra.sort = state.sort;
    if (state.step != null) extra.step = state.step;
    const page = await get('files', extra);
    if (mine !== latest) return;
    state.sort = page.sort;
    const head = el('tr', {}, ...page.columns.map((col) => el('th', {
      class: TEXT.has(col) ? col : '', 'data-col': col, title: HELP[col] || '',
      onclick: () => {
        state.order = state.sort === col && state.order === 'desc' ? 'asc' : 'desc';
        state.sort = col;
        state.offset = 0;
        load();
      }}, LABELS[col] + (page.sort === col ? (page.order === 'desc' ? ' ▼' : ' ▲') : ''))));
    const rows = page.rows.map((r) => el('tr', {}, ...r.map((v, i) => {
      const col = page.columns[i];
      return el('td', {class: TEXT.has(col) ? col : '', title: col === 'path' ? String(v) : ''},
          v == null ? (UNCOUNTED.has(col) ? '?' : '–') : FORMAT[col] ? FORMAT[col](v) : String(v));
    })));
    table.replaceChildren(el('thead', {}, head), el('tbody', {}, ...rows));
    chip.replaceChildren(...(page.step == null ? [] : [el('button', {
      id: 'tfd-step-chip', class: 'chip', title: 'show the files of every step',
      onclick: () => showStep(null)}, `step ${page.step} ×`)]));
    const end = Math.min(page.offset + PAGE, page.total);
    const what = page.step == null ? 'files' : `files of step ${page.step} (figures for the whole session)`;
    status.textContent = page.total ? `${page.offset + 1}–${end} of ${page.total} ${what}` : `no ${what}`;
    prev.disabled = page.offset === 0;
    next.disabled = end >= page.total;
  };
  search.addEventListener('input', () => {
    clearTimeout(timer);
    timer = setTimeout(() => { state.q = search.value; state.offset = 0; load(); }, 200);
  });
  prev.addEventListener('click', () => { state.offset = Math.max(0, state.offset - PAGE); load(); });
  next.addEventListener('click', () => { state.offset += PAGE; load(); });
  reload = () => load().catch((e) => { status.textContent = e.message; });
  await load();
  return wrap;
}
