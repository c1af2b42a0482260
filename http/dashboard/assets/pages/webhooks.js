// Webhooks of the current environment (create, edit, delete, test send,
// delivery log, secret rotation) and the project's usage alerts.
import { h, clear, field, input, select, checkbox, table, timeEl, toast, errorBox, failure, pageHead, confirmDialog, secretOnce, envBadge } from '../ui.js';
import { get, post, put, del, projectPath } from '../api.js';

const KINDS = [['event.created', 'event.created: events were recorded'], ['goal.completed', 'goal.completed: a visitor completed a goal'], ['usage.alert', 'usage.alert: a key crossed an alert threshold']];
const STATUS_CLASS = { succeeded: 'ok', failed: 'bad', pending: 'warn' };

export async function render(view, ctx) {
  const { project: p, env } = ctx;
  view.append(pageHead('Webhooks and alerts', env));
  const fresh = h('div');
  const hookForm = h('div');
  const hookList = h('div');
  const deliveries = h('div');
  const alertForm = h('div');
  const alertList = h('div');
  view.append(
    h('section', { 'aria-labelledby': 'hooks-title' }, h('h2', { id: 'hooks-title' }, 'Webhooks ', envBadge(env)),
      h('p.muted', 'eventd POSTs signed JSON (Standard Webhooks) to these URLs and retries for about a day until they answer 2xx.'),
      fresh, hookForm, hookList, deliveries),
    h('section', { 'aria-labelledby': 'alerts-title' }, h('h2', { id: 'alerts-title' }, 'Usage alerts'),
      h('p.muted', 'An alert fires a usage.alert webhook once per window when a key reaches the threshold of its limit. Add a webhook with the usage.alert kind to receive it.'),
      alertForm, alertList));

  // ---------------------------------------------------------------- webhooks
  function showHookForm(w) {
    const editing = !!w;
    w = w || { url: '', kinds: ['event.created'], event_names: [], enabled: true };
    const url = input({ type: 'url', value: w.url, required: true, placeholder: 'https://hooks.example.com/eventd', spellcheck: 'false' });
    const boxes = KINDS.map(([k, label]) => [k, checkbox(label, w.kinds.includes(k))]);
    const eventNames = input({ value: (w.event_names || []).join(', '), autocomplete: 'off', spellcheck: 'false' });
    const enabled = checkbox('Enabled', w.enabled);
    const errors = h('div');
    const form = h('form.panel.stack',
      h('h3', { tabindex: '-1' }, editing ? 'Edit webhook' : `New ${env} webhook`),
      field('Endpoint URL', url),
      h('fieldset', h('legend', 'Send these kinds'), h('div.stack', boxes.map(([, c]) => c.el))),
      field('Only these events (optional)', eventNames, { hint: 'For event.created: event names separated by commas. Empty: every event.' }),
      enabled.el,
      h('div.buttons', h('button.button', { type: 'submit' }, editing ? 'Save webhook' : 'Create webhook'),
        editing ? h('button.button.secondary', { type: 'button', onclick: () => showHookForm(null) }, 'Cancel') : null),
      errors);
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      clear(errors);
      const body = {
        url: url.value.trim(),
        environment: editing ? w.environment : env,
        kinds: boxes.filter(([, c]) => c.box.checked).map(([k]) => k),
        event_names: eventNames.value.split(/[\s,]+/).filter(Boolean),
        enabled: enabled.box.checked,
      };
      try {
        if (editing) {
          await put(projectPath(p.id, 'webhooks', w.id), body);
          toast('Webhook saved');
        } else {
          const c = await post(projectPath(p.id, 'webhooks'), body);
          clear(fresh).append(secretOnce({
            title: 'Signing secret of the new webhook', value: c.secret, testid: 'webhook-secret',
            warning: 'Your endpoint verifies signatures with it. Rotate the secret to get a new one.',
          }));
          fresh.querySelector('h2').focus();
        }
        showHookForm(null);
        await loadHooks();
      } catch (err) {
        errors.append(errorBox(err));
      }
    });
    clear(hookForm).append(form);
    return form;
  }

  async function showDeliveries(w, offset = 0) {
    const box = h('section.panel', { 'aria-labelledby': 'deliveries-title' },
      h('div.page-head', h('h3', { id: 'deliveries-title', tabindex: '-1' }, 'Delivery log'), h('span.muted', w.url), h('span.spacer'),
        h('button.button.secondary.small', { type: 'button', onclick: () => showDeliveries(w, offset) }, 'Refresh'),
        h('button.button.secondary.small', { type: 'button', onclick: () => clear(deliveries) }, 'Close')));
    clear(deliveries).append(box);
    try {
      const r = await get(projectPath(p.id, 'webhooks', w.id, 'deliveries'), { limit: 20, offset });
      const rows = r.data || [];
      box.append(table('Deliveries, newest first', [
        ['Created', (d) => timeEl(d.created_at)],
        ['Type', (d) => `${d.type}${d.test ? ' (test)' : ''}`],
        ['Status', (d) => h('span', { class: ['pill', STATUS_CLASS[d.status]] }, d.status)],
        ['Attempts', (d) => String(d.attempts), { num: true }],
        ['Response', (d) => (d.response_status ? String(d.response_status) : '–'), { num: true }],
        ['Last attempt', (d) => timeEl(d.last_attempt_at)],
        ['Next attempt', (d) => (d.next_attempt_at ? timeEl(d.next_attempt_at) : '–')],
        ['Error', (d) => d.error || ''],
        ['', (d) => h('button.button.secondary.small', {
          type: 'button', 'aria-label': `Replay delivery ${d.id}`,
          onclick: async () => {
            try { await post(projectPath(p.id, 'webhooks', w.id, 'deliveries', d.id, 'replay')); toast('Delivery queued again'); await showDeliveries(w, offset); } catch (err) { toast(err.message, 'error'); }
          },
        }, 'Replay')],
      ], rows, { empty: 'No deliveries yet. Send a test to see one.' }));
      const pg = r.pagination || {};
      if (pg.has_more || offset > 0) {
        box.append(h('div.buttons',
          offset > 0 ? h('button.button.secondary.small', { type: 'button', onclick: () => showDeliveries(w, Math.max(0, offset - 20)) }, 'Newer') : null,
          pg.has_more ? h('button.button.secondary.small', { type: 'button', onclick: () => showDeliveries(w, offset + 20) }, 'Older') : null,
          h('span.muted', `${offset + 1}–${offset + rows.length} of ${pg.total}`)));
      }
    } catch (err) {
      box.append(failure(err, 'Delivery log', 'GET /admin/v1/projects/{id}/webhooks/{id}/deliveries'));
    }
  }

  async function testSend(w) {
    try {
      const d = await post(projectPath(p.id, 'webhooks', w.id, 'test'));
      if (d.status === 'succeeded') toast(`Test delivery succeeded (${d.response_status})`);
      else toast(`Test delivery ${d.status}${d.response_status ? ` (${d.response_status})` : ''}${d.error ? `: ${d.error}` : ''}`, d.status === 'failed' ? 'error' : '');
      await showDeliveries(w);
    } catch (err) {
      toast(err.message, 'error');
    }
  }

  async function rotate(w) {
    if (!await confirmDialog({ title: 'Rotate the signing secret?', body: ['A new secret is made and shown once. The current one keeps signing next to it for 24 hours, so your endpoint can switch without losing a delivery.'], ok: 'Rotate secret' })) return;
    try {
      const r = await post(projectPath(p.id, 'webhooks', w.id, 'rotate-secret'));
      clear(fresh).append(secretOnce({ title: 'New signing secret', value: r.secret, testid: 'webhook-secret', warning: 'The previous secret stops signing 24 hours from now.' }));
      fresh.querySelector('h2').focus();
    } catch (err) {
      toast(err.message, 'error');
    }
  }

  async function loadHooks() {
    let hooks;
    try {
      hooks = ((await get(projectPath(p.id, 'webhooks'))).data || []).filter((w) => w.environment === env);
    } catch (err) {
      clear(hookForm);
      clear(hookList).append(failure(err, 'Webhooks', '/admin/v1/projects/{id}/webhooks'));
      return;
    }
    if (!hookForm.firstChild) showHookForm(null);
    clear(hookList).append(table(`Webhooks of the ${env} environment`, [
      ['URL', (w) => h('code', w.url)],
      ['Kinds', (w) => w.kinds.join(', ')],
      ['Events', (w) => (w.event_names && w.event_names.length ? w.event_names.join(', ') : h('span.muted', 'all'))],
      ['State', (w) => (w.enabled ? h('span.pill.ok', 'enabled') : h('span.pill.bad', { title: w.disabled_reason || '' }, w.disabled_reason ? `disabled: ${w.disabled_reason}` : 'disabled'))],
      ['Created', (w) => timeEl(w.created_at)],
      ['', (w) => h('div.buttons',
        h('button.button.small', { type: 'button', onclick: () => testSend(w), 'aria-label': `Send a test to ${w.url}` }, 'Send test'),
        h('button.button.secondary.small', { type: 'button', onclick: () => showDeliveries(w).then(() => deliveries.querySelector('h3').focus()) }, 'Deliveries'),
        h('button.button.secondary.small', { type: 'button', onclick: () => showHookForm(w).querySelector('h3').focus() }, 'Edit'),
        h('button.button.secondary.small', { type: 'button', onclick: () => rotate(w) }, 'Rotate secret'),
        h('button.button.danger.small', {
          type: 'button', 'aria-label': `Delete webhook ${w.url}`,
          onclick: async () => {
            if (!await confirmDialog({ title: 'Delete this webhook?', body: [w.url, 'Pending deliveries are dropped.'], ok: 'Delete webhook', danger: true })) return;
            try { await del(projectPath(p.id, 'webhooks', w.id)); toast('Webhook deleted'); clear(deliveries); await loadHooks(); } catch (err) { toast(err.message, 'error'); }
          },
        }, 'Delete…'))],
    ], hooks, { empty: `No ${env} webhooks yet.` }));
  }

  // ---------------------------------------------------------------- alerts
  let keys = [];
  function showAlertForm(a) {
    const editing = !!a;
    a = a || { key_id: null, window: 'day', threshold_percent: 80 };
    const key = select([['', 'Every key of the project'], ...keys.filter((k) => !k.revoked_at).map((k) => [k.id, `${k.name} (${k.environment} ${k.type}, ${k.prefix}…)`])], a.key_id || '');
    const win = select([['minute', 'Per minute'], ['hour', 'Per hour'], ['day', 'Per day']], a.window);
    const pct = input({ type: 'number', min: '1', max: '100', step: 'any', value: String(a.threshold_percent), required: true });
    const errors = h('div');
    const form = h('form.panel.stack',
      h('h3', { tabindex: '-1' }, editing ? 'Edit alert' : 'New usage alert'),
      h('div.row', field('Key', key), field('Window', win), field('Threshold (% of the limit)', pct)),
      h('div.buttons', h('button.button', { type: 'submit' }, editing ? 'Save alert' : 'Create alert'),
        editing ? h('button.button.secondary', { type: 'button', onclick: () => showAlertForm(null) }, 'Cancel') : null),
      errors);
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      clear(errors);
      const body = { key_id: key.value || null, window: win.value, threshold_percent: Number(pct.value) };
      if (!editing && !body.key_id) delete body.key_id;
      try {
        if (editing) await put(projectPath(p.id, 'alerts', a.id), body);
        else await post(projectPath(p.id, 'alerts'), body);
        toast('Alert saved');
        showAlertForm(null);
        await loadAlerts();
      } catch (err) {
        errors.append(errorBox(err));
      }
    });
    clear(alertForm).append(form);
    return form;
  }

  async function loadAlerts() {
    let alerts;
    try {
      [alerts, keys] = await Promise.all([
        get(projectPath(p.id, 'alerts')).then((r) => r.data || []),
        get(projectPath(p.id, 'keys')).then((r) => r.data || []),
      ]);
    } catch (err) {
      clear(alertForm);
      clear(alertList).append(failure(err, 'Usage alerts', '/admin/v1/projects/{id}/alerts'));
      return;
    }
    if (!alertForm.firstChild) showAlertForm(null);
    const keyName = (id) => {
      const k = keys.find((x) => x.id === id);
      return k ? `${k.name} (${k.environment}, ${k.prefix}…)` : id;
    };
    clear(alertList).append(table('Usage alerts of the project', [
      ['Key', (a) => (a.key_id ? keyName(a.key_id) : h('span.muted', 'every key'))],
      ['Window', (a) => a.window],
      ['Threshold', (a) => `${a.threshold_percent}%`, { num: true }],
      ['Last fired', (a) => (a.last_fired_at ? timeEl(a.last_fired_at) : h('span.muted', 'never'))],
      ['', (a) => h('div.buttons',
        h('button.button.secondary.small', { type: 'button', onclick: () => showAlertForm(a).querySelector('h3').focus() }, 'Edit'),
        h('button.button.danger.small', {
          type: 'button', 'aria-label': `Delete alert at ${a.threshold_percent}% per ${a.window}`,
          onclick: async () => {
            if (!await confirmDialog({ title: 'Delete this alert?', body: [`${a.threshold_percent}% of the ${a.window} limit`], ok: 'Delete alert', danger: true })) return;
            try { await del(projectPath(p.id, 'alerts', a.id)); toast('Alert deleted'); await loadAlerts(); } catch (err) { toast(err.message, 'error'); }
          },
        }, 'Delete…'))],
    ], alerts, { empty: 'No usage alerts yet.' }));
  }

  await Promise.all([loadHooks(), loadAlerts()]);
}
