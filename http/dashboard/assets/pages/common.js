// Pieces shared by the pages that read analytics.
import { h, field, select, input, failure } from '../ui.js';

export const RANGES = [
  ['1h', 'Last hour', 3600e3, 'minute'],
  ['24h', 'Last 24 hours', 86400e3, 'hour'],
  ['7d', 'Last 7 days', 7 * 86400e3, 'day'],
  ['30d', 'Last 30 days', 30 * 86400e3, 'day'],
  ['90d', 'Last 90 days', 90 * 86400e3, 'week'],
  ['custom', 'Custom dates', 0, 'day'],
];

/** The range picked on one page is kept for the others while the tab lives. */
export const rangeState = { range: '7d', from: '', to: '', interval: 'auto' };

/** rangeQuery turns the range state into from/to/interval parameters. */
export function rangeQuery(st = rangeState) {
  const r = RANGES.find((x) => x[0] === st.range) || RANGES[2];
  let from;
  let to;
  if (r[0] === 'custom') {
    from = st.from || new Date(Date.now() - 7 * 86400e3).toISOString().slice(0, 10);
    to = st.to || new Date().toISOString().slice(0, 10);
  } else {
    const now = Date.now();
    from = new Date(now - r[2]).toISOString();
    to = new Date(now).toISOString();
  }
  return { from, to, interval: st.interval === 'auto' ? r[3] : st.interval };
}

/** rangePicker is the time range form; onChange runs after each change. */
export function rangePicker(onChange, { intervals = true } = {}) {
  const range = select(RANGES.map((r) => [r[0], r[1]]), rangeState.range);
  const from = input({ type: 'date', value: rangeState.from });
  const to = input({ type: 'date', value: rangeState.to });
  const interval = select([['auto', 'Automatic'], ['minute', 'Minute'], ['hour', 'Hour'], ['day', 'Day'], ['week', 'Week'], ['month', 'Month']], rangeState.interval);
  const fromF = field('From (UTC date)', from);
  const toF = field('To (UTC date)', to);
  const sync = () => {
    fromF.hidden = toF.hidden = range.value !== 'custom';
  };
  sync();
  const changed = () => {
    Object.assign(rangeState, { range: range.value, from: from.value, to: to.value, interval: interval.value });
    sync();
    onChange();
  };
  for (const el of [range, from, to, interval]) el.addEventListener('change', changed);
  return h('div.row', { role: 'group', 'aria-label': 'Time range' },
    field('Time range', range), fromF, toF, intervals ? field('Interval', interval) : null);
}

/**
 * readFailure explains why analytics could not be read: the route is
 * missing on this server, or the environment has no key to read through.
 */
export function readFailure(err, ctx, what) {
  if (err && err.status === 409) {
    return h('div.notice.warn', { role: 'status' },
      h('strong', `No active ${ctx.env} key. `),
      `${what} read the ${ctx.env} data through one of its API keys, and this environment has none. `,
      h('a', { href: ctx.href(ctx.project.id, ctx.env, 'keys') }, `Create a ${ctx.env} key`), '.');
  }
  return failure(err, what, 'GET /admin/v1/projects/{id}/analytics');
}
