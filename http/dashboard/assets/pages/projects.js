// All projects: the list and a form to create one.
import { h, clear, field, input, select, table, timeEl, toast, errorBox, pageHead, fmtNum } from '../ui.js';
import { post } from '../api.js';

export const PLANS = [['free', 'Free'], ['professional', 'Professional'], ['enterprise', 'Enterprise']];

export function limitsText(l) {
  return l ? `${fmtNum(l.minute)} / ${fmtNum(l.hour)} / ${fmtNum(l.day)}` : '–';
}

export async function render(view, ctx) {
  view.append(pageHead('Projects', null));
  const name = input({ required: true, maxlength: '200', autocomplete: 'off', name: 'name' });
  const plan = select(PLANS, 'free', { name: 'plan' });
  const errors = h('div');
  const form = h('form.panel', { 'aria-labelledby': 'new-project-title' },
    h('h2', { id: 'new-project-title' }, 'New project'),
    h('p.muted', 'A project has its own keys, plan, event definitions and two datasets: live and test.'),
    h('div.row', field('Project name', name), field('Plan', plan),
      h('div.buttons', h('button.button', { type: 'submit' }, 'Create project'))),
    errors);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    clear(errors);
    try {
      const p = await post('/admin/v1/projects', { name: name.value.trim(), plan: plan.value });
      toast(`Project ${p.name} created`);
      await ctx.refreshProjects();
      // The next thing a new project needs is a key.
      ctx.navigate(ctx.href(p.id, ctx.env, 'keys'));
    } catch (err) {
      errors.append(errorBox(err));
    }
  });

  const list = table('All projects', [
    ['Name', (p) => h('a', { href: ctx.href(p.id, ctx.env, 'analytics') }, p.name)],
    ['Plan', (p) => (p.custom_limits ? `${p.plan} (custom limits)` : p.plan)],
    ['Limits per minute / hour / day', (p) => limitsText(p.limits), { num: true }],
    ['Allowed origins', (p) => (p.allowed_origins.length ? p.allowed_origins.join(', ') : h('span.muted', 'any'))],
    ['Created', (p) => timeEl(p.created_at)],
    ['', (p) => h('a', { href: ctx.href(p.id, ctx.env, 'settings'), 'aria-label': `Settings of ${p.name}` }, 'Settings')],
  ], ctx.projects, { empty: 'No projects yet: create the first one above.' });
  view.append(h('section', { 'aria-label': 'Project list' }, list), form);
}
