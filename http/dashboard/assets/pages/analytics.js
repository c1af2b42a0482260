// Analytics of the project's environment: events over time, unique
// visitors, top events and a breakdown by a property, for a time range,
// all under the same filters (where= and the bots toggle).
import { h, clear, field, input, select, pageHead, fmtNum } from '../ui.js';
import { analytics } from '../api.js';
import { timeChart, barChart } from '../charts.js';
import { rangePicker, rangeQuery, readFailure } from './common.js';
import { filterBar, filterQuery, botsNote } from './filters.js';

const view$ = { event: '', metric: 'count', property: '' };

export async function render(view, ctx) {
  const { project: p, env } = ctx;
  view.append(pageHead('Analytics', env));
  const eventSel = select([['', 'All events']], view$.event);
  const metric = select([['count', 'Events'], ['unique_visitors', 'Unique visitors']], view$.metric);
  const controls = h('form.panel', { 'aria-label': 'What to show', onsubmit: (e) => e.preventDefault() },
    rangePicker(() => load()),
    h('div.row', field('Event', eventSel), field('Measure', metric)));
  const filters = h('div.panel', filterBar(() => load()));
  const cards = h('div.cards', { 'aria-live': 'polite' });
  const note = h('div');
  const chart = h('section.panel', { 'aria-labelledby': 'chart-title' });
  const top = h('section.panel', { 'aria-labelledby': 'top-title' });
  const propInput = input({ value: view$.property, placeholder: 'plan', autocomplete: 'off', spellcheck: 'false' });
  const breakdown = h('div');
  const bdForm = h('form.panel', { 'aria-labelledby': 'bd-title' },
    h('h2', { id: 'bd-title' }, 'Breakdown by property'),
    h('div.row', field('Property name', propInput, { hint: 'A property of the events, such as plan, path or utm_source.' }),
      h('div.buttons', h('button.button', { type: 'submit' }, 'Break down'))),
    breakdown);
  view.append(controls, filters, cards, note, chart, h('div.grid', top, bdForm));
  eventSel.addEventListener('change', () => { view$.event = eventSel.value; load(); });
  metric.addEventListener('change', () => { view$.metric = metric.value; load(); });
  bdForm.addEventListener('submit', (e) => {
    e.preventDefault();
    view$.property = propInput.value.trim();
    loadBreakdown();
  });

  const card = (label, value, testid) => h('div.card', h('div.label', label), h('div.value', { 'data-testid': testid }, value));
  const base = () => {
    const { from, to } = rangeQuery();
    return view$.event ? { from, to, ...filterQuery(), event: view$.event } : { from, to, ...filterQuery() };
  };

  async function loadBreakdown() {
    clear(breakdown);
    if (!view$.property) {
      breakdown.append(h('p.empty', 'Name a property to see its values.'));
      return;
    }
    try {
      const r = await analytics(p.id, env, { ...base(), type: 'breakdown', group_by: `properties.${view$.property}`, metric: view$.metric, limit: 10 });
      breakdown.append(barChart((r.data || []).map((x) => ({ label: x.key, value: x.value })),
        { label: `${view$.metric === 'count' ? 'Events' : 'Visitors'} by ${view$.property}`, empty: `No events with the property ${view$.property} in this range.` }));
    } catch (err) {
      breakdown.append(readFailure(err, ctx, 'The breakdown'));
    }
  }

  // A load started later wins: an older answer arriving after it is dropped.
  let seq = 0;
  async function load() {
    const mine = ++seq;
    const { interval } = rangeQuery();
    clear(cards);
    clear(note);
    clear(chart).append(h('h2', { id: 'chart-title' }, metric.value === 'count' ? 'Events over time' : 'Unique visitors over time'), h('p.loading', 'Loading…'));
    clear(top).append(h('h2', { id: 'top-title' }, 'Top events'));
    let series;
    let visitors;
    let tops;
    try {
      [series, visitors, tops] = await Promise.all([
        analytics(p.id, env, { ...base(), type: 'timeseries', interval, metric: view$.metric }),
        analytics(p.id, env, { ...base(), type: 'timeseries', interval, metric: 'unique_visitors' }),
        analytics(p.id, env, { ...rangeQuery(), ...filterQuery(), interval: undefined, type: 'breakdown', group_by: 'event', limit: 10, metric: view$.metric }),
      ]);
    } catch (err) {
      if (mine !== seq) return;
      clear(chart).append(readFailure(err, ctx, 'Analytics'));
      clear(top);
      return;
    }
    if (mine !== seq || !ctx.alive()) return;
    const events = view$.metric === 'count' ? series.total : undefined;
    cards.append(
      card(view$.event ? `Events: ${view$.event}` : 'Events', fmtNum(events ?? tops.total), 'total-events'),
      card('Unique visitors', fmtNum(visitors.total), 'unique-visitors'),
      card('Top event', tops.data && tops.data.length ? tops.data[0].key : '–', 'top-event'));
    const bn = botsNote(series);
    if (bn) note.append(bn);
    chart.querySelector('.loading').remove();
    chart.append(timeChart(series, { label: view$.metric === 'count' ? 'events' : 'visitors', title: view$.metric === 'count' ? 'Events over time' : 'Unique visitors over time' }));
    top.append(barChart((tops.data || []).map((x) => ({ label: x.key, value: x.value })), { label: 'Top events' }));
    // Offer the event names seen in the range as filters.
    const known = new Set([...eventSel.options].map((o) => o.value));
    for (const x of tops.data || []) if (!known.has(x.key)) eventSel.append(h('option', { value: x.key }, x.key));
    await loadBreakdown();
  }

  await load();
}
