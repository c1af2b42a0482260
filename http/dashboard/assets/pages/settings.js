// Project settings: name, plan, custom limits, allowed origins, deletion.
import { h, clear, field, input, select, checkbox, toast, errorBox, pageHead, confirmDialog, nextId } from '../ui.js';
import { patch, del, projectPath } from '../api.js';
import { PLANS, limitsText } from './projects.js';

export async function render(view, ctx) {
  const p = ctx.project;
  view.append(pageHead('Project settings', null), h('p.muted', 'These settings apply to both environments.'));

  const name = input({ required: true, maxlength: '200', value: p.name, autocomplete: 'off' });
  const plan = select(PLANS, p.plan);
  const custom = checkbox('Use custom limits instead of the plan\'s', !!p.custom_limits);
  const lim = p.custom_limits || p.limits;
  const nums = ['minute', 'hour', 'day'].map((w) => [w, input({ type: 'number', min: '1', step: '1', value: String(lim[w]), inputmode: 'numeric' })]);
  const setDisabled = () => nums.forEach(([, el]) => { el.disabled = !custom.box.checked; });
  custom.box.addEventListener('change', setDisabled);
  setDisabled();
  const originsId = nextId('origins');
  const origins = h('textarea', { id: originsId, rows: '3', spellcheck: 'false', placeholder: 'https://shop.example.com' });
  origins.value = p.allowed_origins.join('\n');
  const errors = h('div');
  const effective = h('p.hint', `In force now: ${limitsText(p.limits)} requests per minute / hour / day per key.`);

  const form = h('form.panel.stack',
    h('h2', 'General'),
    field('Project name', name),
    field('Plan', plan, { hint: 'Free 100 / 5,000 / 50,000; professional 500 / 25,000 / 250,000; enterprise 2,000 / 100,000 / 1,000,000 requests per minute / hour / day per key.' }),
    h('fieldset', h('legend', 'Rate limits per key'), custom.el,
      h('div.row', nums.map(([w, el]) => field(`Per ${w}`, el))), effective),
    field('Allowed origins', origins, { hint: 'One origin per line, such as https://shop.example.com. Browsers on other origins are refused. Empty: any origin.' }),
    h('div.buttons', h('button.button', { type: 'submit' }, 'Save changes')),
    errors);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    clear(errors);
    const body = {
      name: name.value.trim(),
      plan: plan.value,
      allowed_origins: origins.value.split(/[\s,]+/).map((o) => o.trim()).filter(Boolean),
      limits: custom.box.checked ? Object.fromEntries(nums.map(([w, el]) => [w, Number(el.value)])) : null,
    };
    try {
      const np = await patch(projectPath(p.id), body);
      toast('Project saved');
      await ctx.refreshProjects();
      effective.textContent = `In force now: ${limitsText(np.limits)} requests per minute / hour / day per key.`;
      ctx.navigate(ctx.href(p.id, ctx.env, 'settings'));
    } catch (err) {
      errors.append(errorBox(err));
    }
  });

  const delErrors = h('div');
  const danger = h('section.panel', { 'aria-labelledby': 'danger-title' },
    h('h2', { id: 'danger-title' }, 'Delete this project'),
    h('p', 'Deleting revokes every key of the project and deletes its events, definitions, goals, funnels and webhooks, live and test. This cannot be undone.'),
    h('button.button.danger', {
      type: 'button',
      onclick: async () => {
        clear(delErrors);
        const ok = await confirmDialog({
          title: `Delete project ${p.name}?`,
          body: ['Every key of the project stops working at once, and all its data is deleted, live and test.'],
          ok: 'Delete project', danger: true, requireText: p.name,
        });
        if (!ok) return;
        try {
          await del(projectPath(p.id));
          toast(`Project ${p.name} deleted`);
          localStorage.removeItem('eventd.project');
          await ctx.refreshProjects();
          ctx.navigate('#/projects');
        } catch (err) {
          delErrors.append(errorBox(err));
        }
      },
    }, 'Delete project…'),
    delErrors);
  view.append(form, danger);
}
