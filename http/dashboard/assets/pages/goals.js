// Goals (occurrence, value threshold, sequence) of the current environment
// with their completions, and saved funnels with their conversion.
import { h, clear, field, input, select, table, toast, errorBox, failure, pageHead, confirmDialog, fmtNum, envBadge } from '../ui.js';
import { get, post, put, del, projectPath, analytics } from '../api.js';
import { barChart, funnelChart } from '../charts.js';
import { rangePicker, rangeQuery, readFailure } from './common.js';

const OPS = [['gt', '>'], ['gte', '≥'], ['lt', '<'], ['lte', '≤'], ['eq', '=']];
const opText = (op) => (OPS.find((o) => o[0] === op) || [op, op])[1];
const names = (text) => text.split(/[\s,>→]+/).map((x) => x.trim()).filter(Boolean);

function duration(sec) {
  if (!sec) return '';
  if (sec % 86400 === 0) return `${sec / 86400} d`;
  if (sec % 3600 === 0) return `${sec / 3600} h`;
  if (sec % 60 === 0) return `${sec / 60} min`;
  return `${sec} s`;
}

function goalText(g) {
  switch (g.type) {
    case 'value':
      return `${g.event}.${g.property} ${opText(g.op)} ${g.threshold}`;
    case 'sequence':
      return `${(g.steps || []).join(' → ')} within ${duration(g.window)}`;
    default:
      return g.where ? `${g.event} where ${g.where.property} ${opText(g.where.op)} ${JSON.stringify(g.where.value)}` : g.event;
  }
}

/** A where value typed as text becomes a number or boolean when it looks like one. */
function typedValue(text) {
  const t = text.trim();
  if (t === 'true' || t === 'false') return t === 'true';
  if (t !== '' && !Number.isNaN(Number(t))) return Number(t);
  return t;
}

export async function render(view, ctx) {
  const { project: p, env } = ctx;
  view.append(pageHead('Goals and funnels', env));
  const statsBox = h('div');
  view.append(h('div.panel', rangePicker(() => loadAll(), { intervals: false })));
  const goalForm = h('div');
  const goalList = h('div');
  const funnelForm = h('div');
  const funnelList = h('div');
  view.append(
    h('section', { 'aria-labelledby': 'goals-title' }, h('h2', { id: 'goals-title' }, 'Goals ', envBadge(env)), goalForm, statsBox, goalList),
    h('section', { 'aria-labelledby': 'funnels-title' }, h('h2', { id: 'funnels-title' }, 'Funnels'), funnelForm, funnelList));

  // ---------------------------------------------------------------- goals
  function showGoalForm(g) {
    const editing = !!g;
    g = g || { name: '', type: 'occurrence', event: '', steps: [], window: 86400 };
    const name = input({ value: g.name, required: true, maxlength: '128', autocomplete: 'off' });
    const type = select([['occurrence', 'Occurrence: an event happens'], ['value', 'Value: a property meets a threshold'], ['sequence', 'Sequence: events in order']], g.type);
    const event = input({ value: g.event || '', autocomplete: 'off', spellcheck: 'false' });
    const whereProp = input({ value: g.where ? g.where.property : '', autocomplete: 'off', spellcheck: 'false' });
    const whereOp = select(OPS, g.where ? g.where.op : 'eq');
    const whereVal = input({ value: g.where ? String(g.where.value) : '', autocomplete: 'off' });
    const property = input({ value: g.property || '', autocomplete: 'off', spellcheck: 'false' });
    const op = select(OPS, g.op || 'gte');
    const threshold = input({ type: 'number', step: 'any', value: g.threshold ?? '' });
    const steps = input({ value: (g.steps || []).join(', '), autocomplete: 'off', spellcheck: 'false' });
    const win = input({ type: 'number', min: '1', step: '1', value: String(g.window || 86400) });
    const occ = h('div.row', field('Event', event), field('Only where property (optional)', whereProp), field('Comparison', whereOp), field('Value', whereVal));
    const val = h('div.row', field('Property', property), field('Comparison', op), field('Threshold', threshold));
    const seq = h('div.row', field('Steps', steps, { hint: 'Event names in order, separated by commas.' }), field('Within (seconds)', win, { hint: '86400 = one day.' }));
    const sync = () => {
      occ.hidden = type.value === 'sequence';
      occ.querySelectorAll('.field').forEach((f, i) => { if (i > 0) f.hidden = type.value !== 'occurrence'; });
      val.hidden = type.value !== 'value';
      seq.hidden = type.value !== 'sequence';
    };
    type.addEventListener('change', sync);
    sync();
    const errors = h('div');
    const form = h('form.panel.stack', { id: 'goal-form', 'aria-labelledby': 'goal-form-title' },
      h('h3', { id: 'goal-form-title', tabindex: '-1' }, editing ? `Edit goal “${g.name}”` : `New ${env} goal`),
      h('div.row', field('Goal name', name), field('Type', type)), occ, val, seq,
      h('div.buttons', h('button.button', { type: 'submit' }, editing ? 'Save goal' : 'Create goal'),
        editing ? h('button.button.secondary', { type: 'button', onclick: () => showGoalForm(null) }, 'Cancel') : null),
      errors);
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      clear(errors);
      const body = { name: name.value.trim(), environment: editing ? g.environment : env, type: type.value };
      if (type.value === 'sequence') {
        Object.assign(body, { steps: names(steps.value), window: Number(win.value) });
      } else {
        body.event = event.value.trim();
        if (type.value === 'value') Object.assign(body, { property: property.value.trim(), op: op.value, threshold: Number(threshold.value) });
        else if (whereProp.value.trim()) body.where = { property: whereProp.value.trim(), op: whereOp.value, value: typedValue(whereVal.value) };
      }
      try {
        if (editing) await put(projectPath(p.id, 'goals', g.id), body);
        else await post(projectPath(p.id, 'goals'), body);
        toast(`Goal ${body.name} saved`);
        showGoalForm(null);
        await loadGoals();
      } catch (err) {
        errors.append(errorBox(err));
      }
    });
    clear(goalForm).append(form);
    return form;
  }

  async function loadGoals() {
    let goals;
    try {
      goals = ((await get(projectPath(p.id, 'goals'))).data || []).filter((g) => g.environment === env);
    } catch (err) {
      clear(goalForm);
      clear(statsBox);
      clear(goalList).append(failure(err, 'Goals', '/admin/v1/projects/{id}/goals'));
      return;
    }
    if (!goalForm.firstChild) showGoalForm(null);
    const { from, to } = rangeQuery();
    let stats = new Map();
    clear(statsBox);
    try {
      const r = await analytics(p.id, env, { type: 'goals', from, to });
      stats = new Map((r.data || []).map((x) => [x.goal_id, x]));
    } catch (err) {
      statsBox.append(readFailure(err, ctx, 'Goal completions'));
    }
    if (goals.length && stats.size) {
      statsBox.append(h('div.panel', h('h3', 'Completions in this range'),
        barChart(goals.map((g) => ({ label: g.name, value: (stats.get(g.id) || {}).completions || 0 })), { label: 'Goal completions' })));
    }
    clear(goalList).append(table(`Goals of the ${env} environment`, [
      ['Goal', (g) => g.name],
      ['Type', (g) => g.type],
      ['Rule', (g) => h('code', goalText(g))],
      ['Completions', (g) => fmtNum((stats.get(g.id) || {}).completions ?? 0), { num: true }],
      ['Visitors', (g) => fmtNum((stats.get(g.id) || {}).visitors ?? 0), { num: true }],
      ['', (g) => h('div.buttons',
        h('button.button.secondary.small', { type: 'button', 'aria-label': `Edit goal ${g.name}`, onclick: () => showGoalForm(g).querySelector('h3').focus() }, 'Edit'),
        h('button.button.danger.small', {
          type: 'button', 'aria-label': `Delete goal ${g.name}`,
          onclick: async () => {
            if (!await confirmDialog({ title: `Delete goal “${g.name}”?`, body: ['Its completions are no longer counted.'], ok: 'Delete goal', danger: true })) return;
            try { await del(projectPath(p.id, 'goals', g.id)); toast('Goal deleted'); await loadGoals(); } catch (err) { toast(err.message, 'error'); }
          },
        }, 'Delete…'))],
    ], goals, { empty: `No ${env} goals yet.` }));
  }

  // ---------------------------------------------------------------- funnels
  function showFunnelForm(f) {
    const editing = !!f;
    f = f || { name: '', steps: [], window: 86400 };
    const name = input({ value: f.name, required: true, maxlength: '128', autocomplete: 'off' });
    const steps = input({ value: f.steps.join(', '), required: true, autocomplete: 'off', spellcheck: 'false' });
    const win = input({ type: 'number', min: '1', step: '1', value: String(f.window || 86400) });
    const errors = h('div');
    const form = h('form.panel.stack', { id: 'funnel-form', 'aria-labelledby': 'funnel-form-title' },
      h('h3', { id: 'funnel-form-title', tabindex: '-1' }, editing ? `Edit funnel “${f.name}”` : 'New funnel'),
      h('div.row', field('Funnel name', name), field('Steps', steps, { hint: '2 to 10 event names in order, separated by commas.' }),
        field('Window (seconds)', win, { hint: 'From the first step; 86400 = one day.' })),
      h('div.buttons', h('button.button', { type: 'submit' }, editing ? 'Save funnel' : 'Create funnel'),
        editing ? h('button.button.secondary', { type: 'button', onclick: () => showFunnelForm(null) }, 'Cancel') : null),
      errors);
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      clear(errors);
      const body = { name: name.value.trim(), steps: names(steps.value), window: Number(win.value) };
      try {
        if (editing) await put(projectPath(p.id, 'funnels', f.id), body);
        else await post(projectPath(p.id, 'funnels'), body);
        toast(`Funnel ${body.name} saved`);
        showFunnelForm(null);
        await loadFunnels();
      } catch (err) {
        errors.append(errorBox(err));
      }
    });
    clear(funnelForm).append(form);
    return form;
  }

  async function loadFunnels() {
    let funnels;
    try {
      funnels = (await get(projectPath(p.id, 'funnels'))).data || [];
    } catch (err) {
      clear(funnelForm);
      clear(funnelList).append(failure(err, 'Funnels', '/admin/v1/projects/{id}/funnels'));
      return;
    }
    if (!funnelForm.firstChild) showFunnelForm(null);
    clear(funnelList);
    if (!funnels.length) {
      funnelList.append(h('p.empty', 'No funnels yet.'));
      return;
    }
    const { from, to } = rangeQuery();
    for (const f of funnels) {
      const body = h('div', h('p.loading', 'Computing…'));
      funnelList.append(h('section.panel', { 'aria-label': `Funnel ${f.name}` },
        h('div.page-head', h('h3', f.name), h('span.muted', `${f.steps.join(' → ')}, within ${duration(f.window)}`), h('span.spacer'),
          h('button.button.secondary.small', { type: 'button', 'aria-label': `Edit funnel ${f.name}`, onclick: () => showFunnelForm(f).querySelector('h3').focus() }, 'Edit'),
          h('button.button.danger.small', {
            type: 'button', 'aria-label': `Delete funnel ${f.name}`,
            onclick: async () => {
              if (!await confirmDialog({ title: `Delete funnel “${f.name}”?`, body: ['Only the saved definition goes; no event is touched.'], ok: 'Delete funnel', danger: true })) return;
              try { await del(projectPath(p.id, 'funnels', f.id)); toast('Funnel deleted'); await loadFunnels(); } catch (err) { toast(err.message, 'error'); }
            },
          }, 'Delete…')),
        body));
      analytics(p.id, env, { type: 'funnel', funnel_id: f.id, from, to })
        .then((r) => clear(body).append(funnelChart(r.steps || [])))
        .catch((err) => clear(body).append(readFailure(err, ctx, 'Funnel conversion')));
    }
  }

  async function loadAll() {
    await Promise.all([loadGoals(), loadFunnels()]);
  }
  await loadAll();
}
