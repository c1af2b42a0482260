// The dashboard shell: session, project list, hash routes, navigation and
// the live/test switch. Pages live in ./pages/*.js; each exports
// render(view, ctx) and may return a cleanup function (timers, sockets).
import { h, clear, errorBox } from './ui.js';
import { get, loadSession, logout } from './api.js';

const PAGES = [
  { slug: 'analytics', title: 'Analytics', group: 'Data', load: () => import('./pages/analytics.js') },
  { slug: 'overview', title: 'Overview', group: 'Data', load: () => import('./pages/overview.js') },
  { slug: 'retention', title: 'Retention', group: 'Data', load: () => import('./pages/retention.js') },
  { slug: 'paths', title: 'Paths', group: 'Data', load: () => import('./pages/paths.js') },
  { slug: 'live', title: 'Live events', group: 'Data', load: () => import('./pages/live.js') },
  { slug: 'profiles', title: 'Profiles', group: 'Data', load: () => import('./pages/profiles.js') },
  { slug: 'cursors', title: 'Stream cursors', group: 'Data', load: () => import('./pages/cursors.js') },
  { slug: 'events', title: 'Event definitions', group: 'Configure', load: () => import('./pages/events.js') },
  { slug: 'goals', title: 'Goals and funnels', group: 'Configure', load: () => import('./pages/goals.js') },
  { slug: 'webhooks', title: 'Webhooks and alerts', group: 'Configure', load: () => import('./pages/webhooks.js') },
  { slug: 'keys', title: 'API keys', group: 'Project', load: () => import('./pages/keys.js') },
  { slug: 'usage', title: 'Usage', group: 'Project', load: () => import('./pages/usage.js') },
  { slug: 'settings', title: 'Settings', group: 'Project', load: () => import('./pages/settings.js') },
];
const PROJECTS = { slug: 'projects', title: 'Projects', load: () => import('./pages/projects.js') };

const state = { projects: [] };
let cleanup = null;
let renderSeq = 0;
let first = true;

/** href is the hash route of a page of a project's environment. */
export function href(projectId, env, page = 'analytics') {
  return `#/p/${encodeURIComponent(projectId)}/${env}/${page}`;
}

/** The environment last chosen; test at first, the side where nothing can break. */
function preferredEnv() {
  return localStorage.getItem('eventd.env') === 'live' ? 'live' : 'test';
}

function parseHash() {
  const parts = location.hash.replace(/^#\/?/, '').split('/').map((p) => decodeURIComponent(p));
  if (parts[0] === 'p' && parts[1]) {
    const env = parts[2] === 'live' ? 'live' : 'test';
    const page = PAGES.find((p) => p.slug === parts[3]) || PAGES[0];
    return { projectId: parts[1], env, page };
  }
  return { page: PROJECTS, env: preferredEnv() };
}

function navigate(hash) {
  if (location.hash === hash) render();
  else location.hash = hash;
}

async function refreshProjects() {
  const r = await get('/admin/v1/projects');
  state.projects = r.data || [];
  return state.projects;
}

function updateChrome(route, project) {
  const env = route.env;
  document.body.classList.toggle('env-test', !!project && env === 'test');
  document.body.classList.toggle('env-live', !!project && env === 'live');
  document.getElementById('env-banner').hidden = !(project && env === 'test');

  const controls = document.getElementById('topbar-controls');
  controls.hidden = !project;
  const sel = clear(document.getElementById('project-select'));
  for (const p of state.projects) sel.append(h('option', { value: p.id, selected: project && p.id === project.id }, p.name));
  document.getElementById('env-live').checked = env === 'live';
  document.getElementById('env-test').checked = env === 'test';

  const nav = clear(document.getElementById('nav'));
  const items = [h('li', h('a', { href: '#/projects', 'aria-current': route.page === PROJECTS ? 'page' : null }, 'All projects'))];
  if (project) {
    let group = '';
    for (const p of PAGES) {
      if (p.group !== group) {
        group = p.group;
        items.push(h('li.nav-group', { 'aria-hidden': 'true' }, group));
      }
      items.push(h('li', h('a', { href: href(project.id, env, p.slug), 'aria-current': route.page === p ? 'page' : null }, p.title)));
    }
  }
  nav.append(h('ul', items));
}

async function render() {
  if (cleanup) {
    try { cleanup(); } catch { /* a page's cleanup must not stop navigation */ }
    cleanup = null;
  }
  const seq = ++renderSeq;
  const route = parseHash();
  const main = document.getElementById('main');
  let project = null;
  if (route.projectId) {
    project = state.projects.find((p) => p.id === route.projectId);
    if (!project) {
      await refreshProjects().catch(() => {});
      project = state.projects.find((p) => p.id === route.projectId);
    }
    if (seq !== renderSeq) return;
    if (!project) {
      updateChrome({ page: PROJECTS, env: route.env }, null);
      clear(main).append(h('div.notice.error', { role: 'alert' }, 'This project does not exist (any more). ',
        h('a', { href: '#/projects' }, 'Show all projects')));
      return;
    }
    localStorage.setItem('eventd.project', project.id);
    localStorage.setItem('eventd.env', route.env);
  }
  updateChrome(route, project);
  // Each render writes into its own view: a slow page that finishes after
  // the user moved on writes into a detached node, not over the new page.
  const view = h('div.view');
  clear(main).append(view);
  document.title = `${route.page.title}${project ? ` · ${project.name}` : ''} · eventd`;
  const ctx = {
    project, env: route.env, projects: state.projects, href, navigate,
    refreshProjects: async () => { await refreshProjects(); return state.projects; },
    alive: () => seq === renderSeq,
  };
  try {
    const mod = await route.page.load();
    const done = await mod.render(view, ctx);
    if (typeof done === 'function') {
      if (seq === renderSeq) cleanup = done;
      else done();
    }
  } catch (e) {
    if (seq === renderSeq) view.append(errorBox(e));
  }
  if (seq === renderSeq && !first) (document.getElementById('page-title') || main).focus();
  first = false;
}

async function boot() {
  try {
    await loadSession();
    await refreshProjects();
  } catch (e) {
    clear(document.getElementById('main')).append(errorBox(e));
    return;
  }
  document.getElementById('logout').addEventListener('click', logout);
  document.getElementById('project-select').addEventListener('change', (e) => {
    const r = parseHash();
    navigate(href(e.target.value, r.env, r.projectId ? r.page.slug : 'analytics'));
  });
  for (const radio of document.querySelectorAll('#env-switch input')) {
    radio.addEventListener('change', (e) => {
      const r = parseHash();
      if (r.projectId) navigate(href(r.projectId, e.target.value, r.page.slug));
    });
  }
  window.addEventListener('hashchange', render);
  if (!location.hash || location.hash === '#' || location.hash === '#/') {
    const last = localStorage.getItem('eventd.project');
    const target = state.projects.find((p) => p.id === last) ? href(last, preferredEnv()) : '#/projects';
    history.replaceState(null, '', target);
  }
  await render();
  document.body.dataset.ready = 'true';
}

boot();
