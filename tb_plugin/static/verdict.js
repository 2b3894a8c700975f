// The tab's lead: how much of each step went to file I/O, to other input
// wait (XProf's figure, when the session has its profile) and to the rest.
import {el, pct} from './util.js';
import {amount, hasData, layout, stepAxis} from './charts.js';

// darker is nearer the disk; apart from every tier colour
const FILE_IO = '#263238', OTHER_INPUT = '#78909C', COMPUTE = '#CFD8DC';

const WHY = 'Ours counts only time inside file I/O calls on the input threads; XProf\'s counts all time the step '
  + 'waited for the input pipeline, including decoding and preprocessing.';

// One line: our share of step time, XProf's beside it and why they differ.
export function verdictLine(v) {
  const line = el('p', {id: 'tfd-verdict-text', class: 'verdict'});
  if (!v.series) {
    line.append('No step series for this session (an imported log).');
  } else if (!v.steps.length) {
    line.append('No step markers were recorded in this session, so no share of step time can be given.');
  } else {
    line.append(el('b', {}, `File I/O: ${pct(v.share)} of step time`));
    // the definition, in its own words (logs/input_wait.py), with what the bars show
    line.append(el('span', {class: 'muted', id: 'tfd-verdict-label'}, ` (${v.label}`
      + `${v.over ? `; each step's bars are its ${v.over}` : ''})`));
    const x = v.xprof;
    if (v.over) line.append('.');
    else if (!x) line.append('; no XProf profile in this session to compare.');
    else if (x.error) line.append(`; XProf: ${x.error}.`);
    else if (!x.measured) line.append('; XProf found no steps in its profile.');
    else line.append(el('b', {}, `; XProf: ${x.input_percent.toFixed(1)} % input-bound.`), ` ${WHY}`);
  }
  return line;
}

// Per step, its duration split three ways (stacked bars); null without steps.
export function verdictFigure(v) {
  if (!v.steps.length) return null;
  const bar = (name, y, color) => ({type: 'bar', name, x: v.steps, y, marker: {color}});
  const data = [bar('file I/O (ours)', v.file_io, FILE_IO),
    ...(v.other_input ? [bar('other input wait (XProf)', v.other_input, OTHER_INPUT)] : []),
    bar(v.other_input ? 'compute and the rest' : 'the rest of the step', v.compute, COMPUTE)]
      .filter((t) => hasData(t.y));
  const title = v.over ? `Per step, ${v.over}: where the time went`
    : 'Per step: where the time went (click a step for its files)';
  return {id: 'tfd-verdict-chart', title, data,
    layout: layout({barmode: 'stack', xaxis: stepAxis(v.steps), yaxis: amount(v.over ? `seconds (${v.over})` : 'seconds')})};
}
