// The filters every analytics chart takes: property filters (where=) and
// the bots toggle (bots=include). They are kept for the other pages while
// the tab lives, like the time range, so a filter set on the overview
// still holds on retention and paths.
import { h, clear, field, input, select, checkbox, fmtNum } from '../ui.js';
import { rangePicker } from './common.js';

/** filterState is the filters of every analytics page. */
export const filterState = { where: [], bots: false };

const OPS = [
  ['eq', 'is'], ['neq', 'is not'], ['contains', 'contains'], ['in', 'is one of (a|b)'],
  ['gt', '>'], ['gte', '≥'], ['lt', '<'], ['lte', '≤'], ['exists', 'exists'],
];
const opLabel = (op) => (OPS.find((o) => o[0] === op) || [op, op])[1];

// The properties the server sets at ingest, offered as suggestions.
const KNOWN = ['path', '$browser', '$os', '$device', '$country', '$region', '$referrer_source', '$referrer_host',
  'utm_source', 'utm_medium', 'utm_campaign', 'plan'];

/** filterQuery is the where= and bots= parameters of the current filters. */
export function filterQuery(st = filterState) {
  return {
    where: st.where.map((f) => `${f.property}:${f.op}:${f.op === 'exists' ? '' : f.value}`),
    bots: st.bots ? 'include' : undefined,
  };
}

/** describeFilters says in words which filters apply, for headings and text alternatives. */
export function describeFilters(st = filterState) {
  const parts = st.where.map((f) => (f.op === 'exists' ? `${f.property} exists` : `${f.property} ${opLabel(f.op)} ${f.value}`));
  if (st.bots) parts.push('bots counted');
  return parts.join(', ');
}

/**
 * filterBar is the filter form: the active filters, each with a button to
 * remove it, a row to add one, and the bots toggle. onChange runs after
 * each change, with the new filterState in place.
 */
export function filterBar(onChange) {
  const active = h('ul.filters', { 'aria-label': 'Active filters', 'data-testid': 'active-filters' });
  const listId = `props-${Math.random().toString(36).slice(2)}`;
  const prop = input({ placeholder: '$browser', autocomplete: 'off', spellcheck: 'false', list: listId });
  const op = select(OPS, 'eq');
  const value = input({ placeholder: 'Chrome', autocomplete: 'off', spellcheck: 'false' });
  const bots = checkbox('Count bots', filterState.bots);
  const error = h('p.hint.error', { role: 'alert', hidden: true });
  const paint = () => {
    clear(active);
    filterState.where.forEach((f, i) => {
      const text = f.op === 'exists' ? `${f.property} exists` : `${f.property} ${opLabel(f.op)} ${f.value}`;
      active.append(h('li.filter-chip', h('span', text),
        h('button.link', { type: 'button', 'aria-label': `Remove filter ${text}`, onclick: () => {
          filterState.where.splice(i, 1);
          paint();
          onChange();
        } }, '×')));
    });
    active.hidden = !filterState.where.length;
  };
  const add = (e) => {
    e.preventDefault();
    const property = prop.value.trim();
    const v = value.value.trim();
    error.hidden = true;
    if (!property || (op.value !== 'exists' && v === '')) {
      error.textContent = 'A filter needs a property and, except for "exists", a value.';
      error.hidden = false;
      return;
    }
    filterState.where.push({ property, op: op.value, value: v });
    prop.value = '';
    value.value = '';
    paint();
    onChange();
  };
  bots.box.addEventListener('change', () => {
    filterState.bots = bots.box.checked;
    onChange();
  });
  paint();
  return h('form.filter-bar', { 'aria-label': 'Filters', onsubmit: add },
    h('datalist', { id: listId }, KNOWN.map((k) => h('option', { value: k }))),
    h('div.row',
      field('Filter property', prop),
      field('Operator', op),
      field('Filter value', value),
      h('div.buttons', h('button.button.secondary', { type: 'submit' }, 'Add filter')),
      h('div.buttons', bots.el)),
    error, active);
}

/**
 * queryControls is the panel above a chart: the time range (rangePicker,
 * with its options) and the filter bar; onChange runs after a change to either.
 */
export function queryControls(onChange, rangeOptions) {
  return h('div.panel', h('form', { 'aria-label': 'Time range', onsubmit: (e) => e.preventDefault() }, rangePicker(onChange, rangeOptions)),
    filterBar(onChange));
}

/**
 * filterNotes are the lines under a chart that say how its answer was
 * filtered: the active filters (testid names that line) and the bots note.
 */
export function filterNotes(answer, testid) {
  const out = [];
  const filters = describeFilters();
  if (filters) out.push(h('p.muted', testid ? { 'data-testid': testid } : {}, `Filtered: ${filters}.`));
  const bn = botsNote(answer);
  if (bn) out.push(bn);
  return out;
}

/**
 * botsNote says how many bot events an answer left out, or that bots are
 * counted; it is empty when the answer says nothing about bots.
 */
export function botsNote(answer) {
  if (filterState.bots) return h('p.muted.bots-note', { 'data-testid': 'bots-note' }, 'Bots are counted.');
  if (!answer || answer.bots_excluded === undefined) return null;
  return h('p.muted.bots-note', { 'data-testid': 'bots-note' },
    `${fmtNum(answer.bots_excluded)} bot ${answer.bots_excluded === 1 ? 'event' : 'events'} excluded.`);
}
