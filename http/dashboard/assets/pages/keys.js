// API keys of the project's current environment: create (shown once),
// list, revoke, and the rotation steps of the spec.
import { h, clear, field, input, select, table, timeEl, fmtAgo, toast, errorBox, pageHead, confirmDialog, secretOnce, envBadge } from '../ui.js';
import { get, post, del, projectPath } from '../api.js';

export async function render(view, ctx) {
  const { project: p, env } = ctx;
  view.append(pageHead('API keys', env));
  const fresh = h('div');
  const listBox = h('div');
  const other = env === 'live' ? 'test' : 'live';

  const name = input({ required: true, maxlength: '200', autocomplete: 'off', placeholder: 'Backend' });
  const type = select([['secret', 'Secret (sk_): server side, read and write'], ['public', 'Public (pk_): browsers and apps, write only']], 'secret');
  const errors = h('div');
  const form = h('form.panel', { 'aria-labelledby': 'new-key-title' },
    h('h2', { id: 'new-key-title' }, 'Create a key ', envBadge(env)),
    h('p.muted', `The key is made for the ${env} environment; switch at the top for a ${other} key.`),
    h('div.row', field('Key name', name), field('Type', type),
      h('div.buttons', h('button.button', { type: 'submit' }, `Create ${env} key`))),
    errors);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    clear(errors);
    try {
      const k = await post(projectPath(p.id, 'keys'), { name: name.value.trim(), type: type.value, environment: env });
      name.value = '';
      clear(fresh).append(secretOnce({
        title: `New ${k.type} key “${k.name}”`,
        value: k.key,
        testid: 'new-key',
        warning: 'eventd stores only a hash of it and cannot show it again. If it is lost, create a new key and revoke this one.',
      }));
      fresh.querySelector('h2').focus();
      await loadList();
    } catch (err) {
      errors.append(errorBox(err));
    }
  });

  const guide = h('details.panel.guide',
    h('summary', 'Rotating a key'),
    h('ol',
      h('li', 'Create a new key of the same type in the same environment (above).'),
      h('li', 'Switch your applications to the new key and deploy them.'),
      h('li', 'Test: send an event with the new key and watch it arrive in Live events; the old key\'s “last used” stops moving.'),
      h('li', 'Revoke the old key below. Requests with it answer 401 within a second.')));

  async function revoke(k) {
    const ok = await confirmDialog({
      title: `Revoke key “${k.name}”?`,
      body: [`${k.prefix}… stops working at once: every request with it gets 401. This cannot be undone.`],
      ok: 'Revoke key', danger: true,
    });
    if (!ok) return;
    try {
      await del(`/admin/v1/keys/${encodeURIComponent(k.id)}`);
      toast(`Key ${k.name} revoked`);
      await loadList();
    } catch (err) {
      toast(err.message, 'error');
    }
  }

  async function loadList() {
    let keys;
    try {
      keys = (await get(projectPath(p.id, 'keys'))).data || [];
    } catch (err) {
      clear(listBox).append(errorBox(err));
      return;
    }
    const mine = keys.filter((k) => k.environment === env);
    const elsewhere = keys.filter((k) => k.environment !== env && !k.revoked_at).length;
    mine.sort((a, b) => (!!a.revoked_at - !!b.revoked_at) || b.created_at.localeCompare(a.created_at));
    clear(listBox).append(
      table(`Keys of the ${env} environment`, [
        ['Name', (k) => k.name],
        ['Type', (k) => h('span', { class: ['pill', k.type === 'secret' ? 'warn' : ''] }, k.type)],
        ['Environment', (k) => envBadge(k.environment)],
        ['Prefix', (k) => h('code', `${k.prefix}…`)],
        ['Created', (k) => timeEl(k.created_at)],
        ['Last used', (k) => (k.last_used_at ? timeEl(k.last_used_at, fmtAgo(k.last_used_at)) : h('span.muted', 'never'))],
        ['Status', (k) => (k.revoked_at ? h('span.pill.bad', 'revoked ', timeEl(k.revoked_at)) : h('span.pill.ok', 'active'))],
        ['', (k) => (k.revoked_at ? '' : h('button.button.small.danger', { type: 'button', onclick: () => revoke(k), 'aria-label': `Revoke key ${k.name}` }, 'Revoke…'))],
      ], mine, { empty: `No ${env} keys yet.`, rowClass: (k) => (k.revoked_at ? 'revoked' : null) }),
      elsewhere ? h('p.hint', `${elsewhere} active key${elsewhere > 1 ? 's' : ''} in the ${other} environment: `,
        h('a', { href: ctx.href(p.id, other, 'keys') }, `show ${other} keys`), '.') : '');
  }

  view.append(fresh, form, guide, h('section', { 'aria-label': 'Key list' }, listBox));
  await loadList();
}
