// Event definitions (checked at ingest: required properties and types) and
// the events that arrive without one.
import { h, clear, field, input, select, checkbox, table, toast, errorBox, failure, pageHead, confirmDialog, fmtNum } from '../ui.js';
import { get, post, put, del, projectPath, analytics } from '../api.js';
import { readFailure } from './common.js';

const TYPES = [['string', 'string (text)'], ['number', 'number'], ['boolean', 'boolean (true/false)'], ['datetime', 'datetime (RFC 3339)'], ['url', 'url (http/https)']];
const NAME_RE = /^[A-Za-z0-9_]{1,128}$/;

export async function render(view, ctx) {
  const { project: p, env } = ctx;
  view.append(pageHead('Event definitions', null),
    h('p.muted', 'A definition lists the properties an event must or may carry, with their types. eventd checks every event of that name, live and test, and refuses a bad one with 422. Extra properties are allowed.'));
  const formBox = h('div');
  const listBox = h('div');
  const seenBox = h('section.panel', { 'aria-labelledby': 'seen-title' });
  view.append(formBox, listBox, seenBox);
  let defs = [];

  function propRow(prop = { name: '', type: 'string', required: false }) {
    const name = input({ value: prop.name, required: true, autocomplete: 'off', spellcheck: 'false' });
    const type = select(TYPES, prop.type);
    const req = checkbox('Required', prop.required);
    const row = h('div.prop-row', { role: 'group', 'aria-label': 'Property' },
      field('Property name', name), field('Type', type), req.el,
      h('button.button.secondary.small', { type: 'button', onclick: () => row.remove() }, 'Remove'));
    row.read = () => ({ name: name.value.trim(), type: type.value, required: req.box.checked });
    return row;
  }

  function showForm(def) {
    const editing = !!def;
    def = def || { name: '', display_name: '', category: '', properties: [] };
    const name = input({ value: def.name, required: true, pattern: '[A-Za-z0-9_]{1,128}', autocomplete: 'off', spellcheck: 'false', disabled: editing });
    const display = input({ value: def.display_name || '', autocomplete: 'off' });
    const category = input({ value: def.category || '', maxlength: '64', autocomplete: 'off' });
    const rows = h('div.stack');
    (def.properties || []).forEach((pr) => rows.append(propRow(pr)));
    const errors = h('div');
    const form = h('form.panel.stack', { 'aria-labelledby': 'def-form-title' },
      h('h2', { id: 'def-form-title', tabindex: '-1' }, editing ? `Edit ${def.name}` : 'New definition'),
      h('div.row',
        field('Event name', name, { hint: 'Letters, digits and _ (as sent in "event").' }),
        field('Display name', display),
        field('Category', category, { hint: 'A free label, up to 64 characters.' })),
      h('fieldset', h('legend', 'Properties'), rows,
        h('button.button.secondary.small', { type: 'button', onclick: () => { const r = propRow(); rows.append(r); r.querySelector('input').focus(); } }, 'Add property')),
      h('div.buttons',
        h('button.button', { type: 'submit' }, editing ? 'Save definition' : 'Create definition'),
        editing ? h('button.button.secondary', { type: 'button', onclick: () => showForm(null) }, 'Cancel') : null),
      errors);
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      clear(errors);
      const body = {
        name: name.value.trim(),
        display_name: display.value.trim(),
        category: category.value.trim(),
        properties: [...rows.children].map((r) => r.read()),
      };
      if (!NAME_RE.test(body.name)) {
        errors.append(errorBox({ message: 'Invalid event name', details: { name: 'letters, digits and _ only, 1-128 characters' } }));
        return;
      }
      try {
        if (editing) await put(projectPath(p.id, 'event-definitions', def.name), body);
        else await post(projectPath(p.id, 'event-definitions'), body);
        toast(`Definition ${body.name} saved`);
        showForm(null);
        await load();
      } catch (err) {
        errors.append(errorBox(err));
      }
    });
    clear(formBox).append(form);
    return form;
  }

  async function remove(d) {
    const ok = await confirmDialog({ title: `Delete the definition of ${d.name}?`, body: ['Events of that name are no longer checked. Stored events stay.'], ok: 'Delete definition', danger: true });
    if (!ok) return;
    try {
      await del(projectPath(p.id, 'event-definitions', d.name));
      toast(`Definition ${d.name} deleted`);
      await load();
    } catch (err) {
      toast(err.message, 'error');
    }
  }

  async function load() {
    try {
      defs = (await get(projectPath(p.id, 'event-definitions'))).data || [];
    } catch (err) {
      clear(listBox).append(failure(err, 'Event definitions', 'GET /admin/v1/projects/{id}/event-definitions'));
      clear(formBox);
      return;
    }
    clear(listBox).append(table('Defined events', [
      ['Event', (d) => h('code', d.name)],
      ['Display name', (d) => d.display_name || h('span.muted', '–')],
      ['Category', (d) => d.category || h('span.muted', '–')],
      ['Properties', (d) => ((d.properties || []).length
        ? h('ul.plain', d.properties.map((pr) => h('li', h('code', pr.name), `: ${pr.type}${pr.required ? ', required' : ''}`)))
        : h('span.muted', 'none'))],
      ['', (d) => h('div.buttons',
        h('button.button.secondary.small', { type: 'button', onclick: () => showForm(d).querySelector('h2').focus(), 'aria-label': `Edit ${d.name}` }, 'Edit'),
        h('button.button.danger.small', { type: 'button', onclick: () => remove(d), 'aria-label': `Delete definition ${d.name}` }, 'Delete…'))],
    ], defs, { empty: 'No definitions yet.' }));
    await loadSeen();
  }

  async function loadSeen() {
    clear(seenBox).append(h('h2', { id: 'seen-title' }, 'Seen but not defined ', h('span.muted', `(${env}, last 30 days)`)));
    try {
      const from = new Date(Date.now() - 30 * 86400e3).toISOString();
      const r = await analytics(p.id, env, { type: 'breakdown', group_by: 'event', limit: 100, from });
      const known = new Set(defs.map((d) => d.name));
      const rows = (r.data || []).filter((x) => !known.has(x.key));
      seenBox.append(table('Events received without a definition', [
        ['Event', (x) => h('code', x.key)],
        ['Events', (x) => fmtNum(x.value), { num: true }],
        ['', (x) => h('button.button.secondary.small', {
          type: 'button', 'aria-label': `Define ${x.key}`,
          onclick: () => { const f = showForm(null); f.querySelector('input').value = x.key; f.querySelector('h2').focus(); },
        }, 'Define')],
      ], rows, { empty: 'Every event received in this period has a definition.' }));
    } catch (err) {
      seenBox.append(readFailure(err, ctx, 'Received events'));
    }
  }

  showForm(null);
  await load();
}
