// Profiles of the current environment: the ids that Segment-compatible
// identify and alias messages gave traits, a page at a time, and one
// person (traits merged over its linked ids, first and last seen, the other
// ids) looked up by any of its ids.
import { h, clear, field, input, table, timeEl, errorBox, failure, pageHead } from '../ui.js';
import { get, projectPath } from '../api.js';

const PAGE = 50;

/** traitValue shows a trait's JSON value: strings as they are, anything else as JSON. */
function traitValue(v) {
  if (typeof v === 'string') return v;
  return h('code', JSON.stringify(v));
}

export async function render(view, ctx) {
  const { project: p, env } = ctx;
  view.append(pageHead('Profiles', env),
    h('p.muted', 'A profile holds the traits that identify messages (POST /v1/identify, Segment-compatible) set on a user id or anonymous id; ',
      'identify with both ids and alias link ids to one person. Traits are merged over the linked ids, the latest message winning per trait.'));

  const idIn = input({ required: true, autocomplete: 'off', spellcheck: 'false', maxlength: '1024', placeholder: 'user_42' });
  const lookupErr = h('div');
  const form = h('form.panel', { 'aria-labelledby': 'profile-find-title' },
    h('h2', { id: 'profile-find-title' }, 'Find a person'),
    h('div.row', field('User id or anonymous id', idIn),
      h('div.buttons', h('button.button', { type: 'submit' }, 'Show profile'))),
    lookupErr);
  const detail = h('div', { 'aria-live': 'polite' });
  const listBox = h('section', { 'aria-label': 'Profile list' });
  view.append(form, detail, listBox);

  async function show(id) {
    clear(lookupErr);
    let prof;
    try {
      prof = await get(projectPath(p.id, 'profiles', id), { environment: env });
    } catch (err) {
      if (!ctx.alive()) return;
      clear(detail);
      if (err.status === 404 && !err.unavailable && err.message === 'Profile not found') {
        lookupErr.append(h('div.notice', { role: 'status' }, `No profile or linked id “${id}” in the ${env} environment.`));
      } else {
        lookupErr.append(failure(err, 'Profiles', 'GET /admin/v1/projects/{id}/profiles/{profile_id}'));
      }
      return;
    }
    if (!ctx.alive()) return;
    const traits = Object.entries(prof.traits || {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    const linked = prof.linked_ids || [];
    const panel = h('section.panel', { 'aria-labelledby': 'profile-title', 'data-profile-id': prof.id },
      h('div.page-head', h('h2', { id: 'profile-title', tabindex: '-1' }, 'Profile ', h('code', prof.id)), h('span.spacer'),
        h('button.button.secondary.small', { type: 'button', onclick: () => clear(detail) }, 'Close')),
      h('p.muted', 'First seen ', timeEl(prof.first_seen), ', last seen ', timeEl(prof.last_seen), '.'),
      table(`Traits of ${prof.id}`, [
        ['Trait', ([k]) => h('code', k)],
        ['Value', ([, v]) => traitValue(v)],
      ], traits, { empty: 'No traits.' }),
      h('h3', 'Linked ids'),
      linked.length
        ? h('ul.buttons', { 'aria-label': 'Linked ids' }, linked.map((l) => h('li', h('button.button.secondary.small', { type: 'button', onclick: () => show(l), 'aria-label': `Show profile ${l}` }, l))))
        : h('p.empty', 'No other ids are linked to this one.'));
    clear(detail).append(panel);
    panel.querySelector('h2').focus();
  }

  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const id = idIn.value.trim();
    if (id) show(id);
  });

  // Cursor paging: the stack holds the `after` of each page shown so far.
  const cursors = [''];
  async function loadList() {
    const after = cursors[cursors.length - 1];
    let page;
    try {
      page = await get(projectPath(p.id, 'profiles'), { environment: env, limit: PAGE, after });
    } catch (err) {
      if (ctx.alive()) clear(listBox).append(failure(err, 'Profiles', 'GET /admin/v1/projects/{id}/profiles'));
      return;
    }
    if (!ctx.alive()) return;
    const rows = page.data || [];
    const pg = page.pagination || {};
    clear(listBox).append(
      table(`Profiles of the ${env} environment`, [
        ['Id', (r) => h('button.link', { type: 'button', onclick: () => show(r.id), 'aria-label': `Show profile ${r.id}` }, r.id)],
        ['Traits', (r) => Object.keys(r.traits || {}).length, { num: true }],
        ['First seen', (r) => timeEl(r.first_seen)],
        ['Last seen', (r) => timeEl(r.last_seen)],
      ], rows, { empty: `No profiles in the ${env} environment yet. They appear once identify messages arrive.` }),
      (cursors.length > 1 || pg.has_more) ? h('div.buttons',
        cursors.length > 1 ? h('button.button.secondary', { type: 'button', onclick: () => { cursors.pop(); loadList(); } }, 'Previous page') : null,
        pg.has_more ? h('button.button.secondary', { type: 'button', onclick: () => { cursors.push(pg.next_after); loadList(); } }, 'Next page') : null) : null);
  }

  try {
    await loadList();
  } catch (err) {
    listBox.append(errorBox(err));
  }
}
