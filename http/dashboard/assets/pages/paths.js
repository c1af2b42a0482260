// Paths: where visitors go after an event (or came from before one), step
// by step, with the most frequent transitions of each step and their
// counts. A pageview is shown as its page path.
import { h, clear, field, input, select, pageHead, fmtNum } from '../ui.js';
import { analytics } from '../api.js';
import { barChart } from '../charts.js';
import { rangeQuery, readFailure } from './common.js';
import { queryControls, filterQuery, filterNotes } from './filters.js';

const view$ = { direction: 'start', event: 'pageview', steps: '3' };

export async function render(view, ctx) {
  const { project: p, env } = ctx;
  view.append(pageHead('Paths', env));
  const direction = select([['start', 'After the event (forwards)'], ['end', 'Before the event (backwards)']], view$.direction);
  const event = input({ value: view$.event, autocomplete: 'off', spellcheck: 'false' });
  const steps = select(['1', '2', '3', '4', '5'], view$.steps);
  const form = h('form.panel', { 'aria-label': 'Paths query' },
    h('div.row',
      field('Direction', direction),
      field('Path event', event, { hint: 'The start event (or the end event, backwards).' }),
      field('Steps', steps),
      h('div.buttons', h('button.button', { type: 'submit' }, 'Show paths'))));
  const controls = queryControls(() => load(), { intervals: false });
  const out = h('section.panel', { 'aria-labelledby': 'paths-title', 'aria-live': 'polite' });
  view.append(form, controls, out);
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    Object.assign(view$, { direction: direction.value, event: event.value.trim(), steps: steps.value });
    load();
  });
  let seq = 0;

  async function load() {
    const mine = ++seq;
    const title = h('h2', { id: 'paths-title' }, 'Top transitions');
    clear(out).append(title, h('p.loading', 'Loading…'));
    if (!view$.event) {
      clear(out).append(title, h('p.empty', 'Name an event.'));
      return;
    }
    const { from, to } = rangeQuery();
    const anchor = view$.direction === 'end' ? { end_event: view$.event } : { start_event: view$.event };
    let r;
    try {
      r = await analytics(p.id, env, { from, to, ...filterQuery(), type: 'paths', ...anchor, steps: view$.steps, limit: 10 });
    } catch (err) {
      if (mine === seq && ctx.alive()) clear(out).append(title, readFailure(err, ctx, 'Paths'));
      return;
    }
    if (mine !== seq || !ctx.alive()) return;
    out.querySelector('.loading').remove();
    out.append(...filterNotes(r));
    const ts = r.transitions || [];
    if (!ts.length) {
      out.append(h('p.empty', `No visitor did ${view$.event} and something ${view$.direction === 'end' ? 'before' : 'after'} it in this range.`));
      return;
    }
    const byStep = new Map();
    for (const t of ts) {
      if (!byStep.has(t.step)) byStep.set(t.step, []);
      byStep.get(t.step).push(t);
    }
    for (const [step, list] of [...byStep.entries()].sort((a, b) => a[0] - b[0])) {
      const label = view$.direction === 'end' ? `Step ${step} before ${view$.event}` : `Step ${step} after ${view$.event}`;
      out.append(h('section.path-step', { 'data-step': String(step) },
        h('h3', label),
        barChart(list.map((t) => ({ label: `${t.from} → ${t.to}`, value: t.count })), { label: `${label}: visitors by transition` }),
        h('div.table-wrap', h('table',
          h('caption', `${label}: transitions and the visitors who made them`),
          h('thead', h('tr', h('th', { scope: 'col' }, 'From'), h('th', { scope: 'col' }, 'To'), h('th.num', { scope: 'col' }, 'Visitors'))),
          h('tbody', list.map((t) => h('tr', { dataset: { from: t.from, to: t.to, count: String(t.count) } },
            h('td', t.from), h('td', t.to), h('td.num', fmtNum(t.count)))))))));
    }
  }

  await load();
}
