// The tab's lead: how much of each step went to file I/O, to other input
// wait (XProf's figure, when the session has its profile) and to the rest.
import {el, pct} from './util.js';
import {LINE, MANY_STEPS, amount, downsampledNote, hasData, layout, stepAxis} from './charts.js';

// darker is nearer the disk; apart from every mount colour
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
    // named as analyze and recommend name it (measures/input_wait.py)
    line.append(el('b', {}, `${v.name || 'File I/O'}: ${pct(v.share)} of step time`));
    // the definition, in its own words (measures/input_wait.py), with what the bars show
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

// Per step, its duration split three ways (stacked bars; stacked areas for
// many steps); null without steps. Downsampled (each bucket's min and max),
// the parts are lines over the step's whole duration, not stacked: one
// part's maximum and another's minimum do not add up to a step.
export function verdictFigure(v) {
  if (!v.steps.length) return null;
  const cut = v.downsampled;
  const many = v.steps.length > MANY_STEPS;
  const part = (name, y, color) => cut
    ? {type: LINE, mode: 'lines', name, x: v.steps, y, line: {width: 1, color}}
    : many ? {type: 'scatter', mode: 'lines', name, x: v.steps, y, stackgroup: 'time', line: {width: 0, color},
      fillcolor: color}
      : {type: 'bar', name, x: v.steps, y, marker: {color}};
  const data = [...(cut ? [part('step duration', v.duration, COMPUTE)] : []), part('file I/O (ours)', v.file_io, FILE_IO),
    ...(v.other_input ? [part('other input wait (XProf)', v.other_input, OTHER_INPUT)] : []),
    ...(cut ? [] : [part(v.other_input ? 'compute and the rest' : 'the rest of the step', v.compute, COMPUTE)])]
      .filter((t) => hasData(t.y));
  const title = (v.over ? `Per step, ${v.over}: where the time went`
    : `Per step: where the time went${cut ? '' : ' (click a step for its files)'}`) + downsampledNote(cut);
  return {id: 'tfd-verdict-chart', title, data, downsampled: Boolean(cut),
    layout: layout({barmode: 'stack', xaxis: stepAxis(v.steps), yaxis: amount(v.over ? `seconds (${v.over})` : 'seconds')})};
}
