// The sessions overview, on one page as Plausible has it: visitors,
// sessions, bounce rate, visit duration and pageviews over the range, the
// visitors chart, then top pages, entry pages, sources, referrers, devices,
// browsers, operating systems and countries. Every number follows the
// filters (where= and the bots toggle) and says how many bot events were
// left out.
import { h, clear, pageHead, fmtNum, fmtPct } from '../ui.js';
import { analytics } from '../api.js';
import { timeChart, barChart } from '../charts.js';
import { rangeQuery, readFailure } from './common.js';
import { queryControls, filterQuery, filterNotes } from './filters.js';

/** fmtDuration writes seconds as "1m 43s". */
export function fmtDuration(sec) {
  if (sec === null || sec === undefined || Number.isNaN(sec)) return '–';
  const s = Math.round(sec);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${s % 60}s`;
  return `${Math.floor(m / 60)}h ${m % 60}m`;
}

// The breakdown panels: title, what they group pageviews' visitors by.
const PANELS = [
  ['top-pages', 'Top pages', 'properties.path', 'Page'],
  ['sources', 'Sources', 'properties.$referrer_source', 'Source'],
  ['referrers', 'Referrers', 'properties.$referrer_host', 'Referrer'],
  ['devices', 'Devices', 'properties.$device', 'Device'],
  ['browsers', 'Browsers', 'properties.$browser', 'Browser'],
  ['os', 'Operating systems', 'properties.$os', 'Operating system'],
  ['countries', 'Countries', 'properties.$country', 'Country'],
];

export async function render(view, ctx) {
  const { project: p, env } = ctx;
  view.append(pageHead('Overview', env));
  const controls = queryControls(() => load());
  const cards = h('div.cards', { 'aria-live': 'polite', 'data-testid': 'overview-cards' });
  const note = h('div');
  const chart = h('section.panel', { 'aria-labelledby': 'visitors-title' });
  const entry = h('section.panel', { 'aria-labelledby': 'entry-pages-title' });
  const panels = PANELS.map(([id, title]) => h('section.panel', { 'aria-labelledby': `${id}-title`, 'data-panel': id }));
  view.append(controls, cards, note, chart, h('div.grid', panels[0], entry, ...panels.slice(1)));

  const card = (label, value, testid) => h('div.card', h('div.label', label), h('div.value', { 'data-testid': testid }, value));
  let seq = 0;

  async function load() {
    const mine = ++seq;
    const { from, to, interval } = rangeQuery();
    const base = { from, to, ...filterQuery() };
    const pv = { ...base, event: 'pageview' };
    clear(cards);
    clear(note);
    clear(chart).append(h('h2', { id: 'visitors-title' }, 'Visitors over time'), h('p.loading', 'Loading…'));
    clear(entry).append(h('h2', { id: 'entry-pages-title' }, 'Entry pages'));
    panels.forEach((el, i) => clear(el).append(h('h2', { id: `${PANELS[i][0]}-title` }, PANELS[i][1])));
    let visitors;
    let events;
    let pageviews;
    let sessions;
    let entries;
    let rows;
    try {
      [visitors, events, pageviews, sessions, entries, ...rows] = await Promise.all([
        analytics(p.id, env, { ...base, interval, metric: 'unique_visitors' }),
        analytics(p.id, env, { ...base, interval }),
        analytics(p.id, env, { ...pv, interval }),
        analytics(p.id, env, { ...base, type: 'sessions', interval }),
        analytics(p.id, env, { ...base, type: 'sessions', group_by: 'entry_page', limit: 10 }),
        ...PANELS.map(([, , groupBy]) => analytics(p.id, env, { ...pv, type: 'breakdown', group_by: groupBy, metric: 'unique_visitors', limit: 10 })),
      ]);
    } catch (err) {
      if (mine !== seq || !ctx.alive()) return;
      clear(chart).append(readFailure(err, ctx, 'The overview'));
      return;
    }
    if (mine !== seq || !ctx.alive()) return;
    const t = sessions.total || {};
    cards.append(
      card('Unique visitors', fmtNum(visitors.total), 'ov-visitors'),
      card('Sessions', fmtNum(t.sessions), 'ov-sessions'),
      card('Bounce rate', fmtPct(t.bounce_rate), 'ov-bounce'),
      card('Visit duration', fmtDuration(t.duration_mean_s), 'ov-duration'),
      card('Pageviews', fmtNum(pageviews.total), 'ov-pageviews'),
      card('Pages per session', fmtNum(t.pages_per_session), 'ov-pages-per-session'),
      card('Bots excluded', events.bots_excluded === undefined ? 'counted' : fmtNum(events.bots_excluded), 'ov-bots'));
    note.append(...filterNotes(events, 'ov-filters'));
    chart.querySelector('.loading').remove();
    chart.append(timeChart(visitors, { label: 'visitors', title: 'Unique visitors over time' }));
    entry.append(barChart((entries.rows || []).map((x) => ({ label: x.key, value: x.value })),
      { label: 'Sessions by entry page', empty: 'No sessions with a page in this range.' }));
    rows.forEach((r, i) => {
      const [, , , what] = PANELS[i];
      panels[i].append(barChart((r.data || []).map((x) => ({ label: x.key, value: x.value })),
        { label: `Visitors by ${what.toLowerCase()}`, empty: `No pageviews with a ${what.toLowerCase()} in this range.` }));
    });
  }

  await load();
}
