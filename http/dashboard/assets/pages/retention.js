// Retention: the classic triangle. A person's first cohort event in the
// range puts them in the cohort of its period; each cell is the share of
// the cohort that did the return event k periods later (k = 0: its own).
import { h, clear, field, input, select, pageHead, fmtNum, fmtPct } from '../ui.js';
import { analytics } from '../api.js';
import { rangeQuery, readFailure } from './common.js';
import { queryControls, filterQuery, filterNotes } from './filters.js';

const view$ = { cohort: 'pageview', ret: '', period: 'week', periods: '8' };

/** periodLabel names a cohort by its start. */
function periodLabel(iso, period) {
  const d = new Date(iso);
  if (period === 'month') return d.toLocaleDateString(undefined, { month: 'short', year: 'numeric', timeZone: 'UTC' });
  return d.toLocaleDateString(undefined, { month: 'short', day: 'numeric', year: 'numeric', timeZone: 'UTC' });
}

export async function render(view, ctx) {
  const { project: p, env } = ctx;
  view.append(pageHead('Retention', env));
  const cohort = input({ value: view$.cohort, autocomplete: 'off', spellcheck: 'false' });
  const ret = input({ value: view$.ret, placeholder: 'the cohort event', autocomplete: 'off', spellcheck: 'false' });
  const period = select([['day', 'Day'], ['week', 'Week'], ['month', 'Month']], view$.period);
  const periods = select(Array.from({ length: 12 }, (_, i) => String(i + 1)), view$.periods);
  const form = h('form.panel', { 'aria-label': 'Retention query' },
    h('div.row',
      field('Cohort event', cohort, { hint: 'The first occurrence puts a person in a cohort.' }),
      field('Return event', ret, { hint: 'What counts as coming back; empty: the cohort event.' }),
      field('Period', period),
      field('Periods', periods),
      h('div.buttons', h('button.button', { type: 'submit' }, 'Show retention'))));
  const controls = queryControls(() => load(), { intervals: false });
  const out = h('section.panel', { 'aria-labelledby': 'triangle-title', 'aria-live': 'polite' });
  view.append(form, controls, out);
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    Object.assign(view$, { cohort: cohort.value.trim(), ret: ret.value.trim(), period: period.value, periods: periods.value });
    load();
  });
  let seq = 0;

  async function load() {
    const mine = ++seq;
    clear(out).append(h('h2', { id: 'triangle-title' }, 'Retention by cohort'), h('p.loading', 'Loading…'));
    if (!view$.cohort) {
      clear(out).append(h('h2', { id: 'triangle-title' }, 'Retention by cohort'), h('p.empty', 'Name a cohort event.'));
      return;
    }
    const { from, to } = rangeQuery();
    let r;
    try {
      r = await analytics(p.id, env, {
        from, to, ...filterQuery(), type: 'retention', cohort_event: view$.cohort,
        return_event: view$.ret || undefined, period: view$.period, periods: view$.periods,
      });
    } catch (err) {
      if (mine === seq && ctx.alive()) clear(out).append(h('h2', { id: 'triangle-title' }, 'Retention by cohort'), readFailure(err, ctx, 'Retention'));
      return;
    }
    if (mine !== seq || !ctx.alive()) return;
    out.querySelector('.loading').remove();
    out.append(...filterNotes(r));
    const cohorts = r.cohorts || [];
    if (!cohorts.length) {
      out.append(h('p.empty', `Nobody did ${view$.cohort} in this range.`));
      return;
    }
    const width = Math.max(...cohorts.map((c) => c.returned.length));
    const unit = r.period;
    out.append(h('div.table-wrap', h('table.triangle', { 'data-testid': 'retention' },
      h('caption', `Share of each ${unit}'s cohort (first ${view$.cohort}) who did ${view$.ret || view$.cohort} again, by ${unit} since`),
      h('thead', h('tr',
        h('th', { scope: 'col' }, 'Cohort'),
        h('th.num', { scope: 'col' }, 'People'),
        Array.from({ length: width }, (_, k) => h('th.num', { scope: 'col' }, `${unit[0].toUpperCase()}${unit.slice(1)} ${k}`)))),
      h('tbody', cohorts.map((c) => h('tr',
        h('th', { scope: 'row' }, periodLabel(c.start, unit)),
        h('td.num', fmtNum(c.size)),
        Array.from({ length: width }, (_, k) => {
          if (k >= c.returned.length) return h('td.num.future', { 'aria-label': 'not yet' }, '');
          const share = c.size ? c.returned[k] / c.size : 0;
          // The shade says the share at a glance; the text says it exactly.
          const shade = Math.min(9, Math.round(share * 9));
          return h('td.num', {
            class: ['num', 'cell', `shade-${shade}`],
            dataset: { cohort: c.start, k: String(k), returned: String(c.returned[k]) },
            title: `${fmtNum(c.returned[k])} of ${fmtNum(c.size)}`,
          }, `${fmtPct(share)} (${fmtNum(c.returned[k])})`);
        })))))));
  }

  await load();
}
