// Named cursors of the durable tail (/stream?cursor=) of the current
// environment: position, lag behind the head, connection; reset to the
// head or delete. Refreshes every 5 s.
import { h, clear, pageHead, table, fmtNum, toast, failure, checkbox, confirmDialog } from '../ui.js';
import { get, post, del, projectPath } from '../api.js';

export async function render(view, ctx) {
  const { project: p, env } = ctx;
  const auto = checkbox('Refresh every 5 s', true);
  view.append(pageHead('Stream cursors', env, auto.el));
  view.append(h('p.muted', 'Consumers of /stream?cursor=<name> resume after their last acknowledged event. ',
    'Lag counts the events recorded after that position (capped for large backlogs) and the age of the oldest of them.'));
  const box = h('section', { 'aria-label': 'Cursor list', 'aria-live': 'polite' });
  view.append(box);
  const base = (name, ...rest) => `${projectPath(p.id, 'cursors', name, ...rest)}?environment=${env}`;

  async function reset(c) {
    const ok = await confirmDialog({
      title: `Reset cursor “${c.name}” to the head?`,
      body: [`It skips the ${fmtNum(c.lag_events)} events after its position; a connected consumer is closed (1012) and reconnects at the head.`],
      ok: 'Reset to head', danger: true,
    });
    if (!ok) return;
    try {
      await post(base(c.name, 'reset'), { to: 'head' });
      toast(`Cursor ${c.name} reset to the head`);
      await load();
    } catch (err) {
      toast(err.message, 'error');
    }
  }

  async function remove(c) {
    const ok = await confirmDialog({
      title: `Delete cursor “${c.name}”?`,
      body: ['Its position is forgotten; a connected consumer is closed (1012) and starts again at the head when it reconnects.'],
      ok: 'Delete cursor', danger: true,
    });
    if (!ok) return;
    try {
      await del(base(c.name));
      toast(`Cursor ${c.name} deleted`);
      await load();
    } catch (err) {
      toast(err.message, 'error');
    }
  }

  async function load() {
    let cursors;
    try {
      cursors = (await get(projectPath(p.id, 'cursors'), { environment: env })).data || [];
    } catch (err) {
      clear(box).append(failure(err, 'Stream cursors', 'GET /admin/v1/projects/{id}/cursors'));
      return;
    }
    if (!ctx.alive()) return;
    clear(box).append(table(`Cursors of the ${env} environment`, [
      ['Name', (c) => h('code', c.name)],
      ['Position', (c) => h('code', c.position)],
      ['Lag (events)', (c) => fmtNum(c.lag_events)],
      ['Lag (seconds)', (c) => (c.lag_seconds ? c.lag_seconds.toFixed(1) : '0')],
      ['Consumer', (c) => (c.connected ? h('span.pill.ok', 'connected') : h('span.pill', 'not connected'))],
      ['State', (c) => (c.expired ? h('span.pill.bad', 'expired: reset it') : h('span.pill.ok', 'ok'))],
      ['', (c) => h('div.buttons',
        h('button.button.small', { type: 'button', onclick: () => reset(c), 'aria-label': `Reset cursor ${c.name} to the head` }, 'Reset to head…'),
        h('button.button.small.danger', { type: 'button', onclick: () => remove(c), 'aria-label': `Delete cursor ${c.name}` }, 'Delete…'))],
    ], cursors, { empty: `No cursors in the ${env} environment yet: a consumer creates one by connecting to /stream?cursor=<name>.` }));
  }

  await load();
  const timer = setInterval(() => {
    if (auto.box.checked && document.visibilityState === 'visible') load();
  }, 5000);
  return () => clearInterval(timer);
}
