// Usage of each key of the current environment against its plan limits,
// with the project's alert thresholds marked.
import { h, clear, pageHead, timeEl, fmtAgo, fmtNum, failure, checkbox, envBadge } from '../ui.js';
import { get, projectPath } from '../api.js';
import { meterChart } from '../charts.js';
import { limitsText } from './projects.js';

const WINDOWS = ['minute', 'hour', 'day'];
const BUCKETS = [['standard', 'Standard'], ['batch', 'Batch'], ['analytics', 'Analytics']];

export async function render(view, ctx) {
  const { project: p, env } = ctx;
  const auto = checkbox('Refresh every 10 s', true);
  view.append(pageHead('Usage', env, auto.el));
  view.append(h('p.muted', `Plan ${p.plan}${p.custom_limits ? ' with custom limits' : ''}: `,
    `${limitsText(p.limits)} standard requests per minute / hour / day per key; batch gets a tenth, analytics 50 per minute. `,
    h('a', { href: ctx.href(p.id, env, 'settings') }, 'Change the plan or limits'), '.'));
  const box = h('div', { 'aria-live': 'polite' });
  const at = h('p.hint');
  view.append(box, at);

  async function load() {
    let usage;
    let alerts = [];
    try {
      [usage, alerts] = await Promise.all([
        get(projectPath(p.id, 'usage')),
        get(projectPath(p.id, 'alerts')).then((r) => r.data || []).catch(() => []),
      ]);
    } catch (err) {
      clear(box).append(failure(err, 'Usage', 'GET /admin/v1/projects/{id}/usage'));
      return;
    }
    if (!ctx.alive()) return;
    const keys = (usage.data || []).filter((k) => k.environment === env);
    clear(box);
    if (!keys.length) {
      box.append(h('p.empty', `No active ${env} keys. `, h('a', { href: ctx.href(p.id, env, 'keys') }, 'Create one'), '.'));
    }
    for (const k of keys) {
      const thresholds = (w) => alerts.filter((a) => (!a.key_id || a.key_id === k.key_id) && a.window === w).map((a) => a.threshold_percent);
      const rows = [];
      for (const [b, bl] of BUCKETS) {
        for (const w of WINDOWS) {
          const u = k.buckets && k.buckets[b] && k.buckets[b][w];
          if (!u) continue;
          rows.push({ label: `${bl}, per ${w}`, used: u.used, limit: u.limit, thresholds: b === 'standard' ? thresholds(w) : [] });
        }
      }
      const day = k.buckets && k.buckets.standard && k.buckets.standard.day;
      box.append(h('section.panel', { 'aria-label': `Usage of key ${k.name}`, 'data-key-id': k.key_id },
        h('div.page-head', h('h2', k.name), envBadge(k.environment), h('span.pill', k.type), h('span.spacer'),
          h('span.muted', 'Last used ', k.last_used_at ? timeEl(k.last_used_at, fmtAgo(k.last_used_at)) : 'never')),
        day ? h('p.hint', `${fmtNum(day.used)} standard requests in the last 24 hours.`) : null,
        meterChart(rows, { label: `Usage of ${k.name}` })));
    }
    at.textContent = `Counted at ${new Date(usage.at * 1000).toLocaleTimeString()}. Red dashed marks are usage alert thresholds.`;
  }

  await load();
  const timer = setInterval(() => {
    if (auto.box.checked && document.visibilityState === 'visible') load();
  }, 10000);
  return () => clearInterval(timer);
}
