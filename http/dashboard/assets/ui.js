// DOM helpers. Every text goes in through text nodes or properties and is
// never parsed as markup, so data from the API (event names, properties, URLs)
// cannot inject markup.

let uid = 0;
/** A fresh id for label/input pairs. */
export function nextId(prefix = 'f') {
  uid += 1;
  return `${prefix}-${uid}`;
}

const BOOLEAN_PROPS = new Set(['hidden', 'disabled', 'checked', 'required', 'selected', 'readOnly', 'multiple', 'open']);

function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') {
      el.addEventListener(k.slice(2).toLowerCase(), v);
    } else if (k === 'class') {
      el.setAttribute('class', Array.isArray(v) ? v.filter(Boolean).join(' ') : v);
    } else if (k === 'dataset') {
      Object.assign(el.dataset, v);
    } else if (k === 'value' && 'value' in el && !(el instanceof SVGElement)) {
      el.value = v;
    } else if (BOOLEAN_PROPS.has(k)) {
      el[k] = true;
    } else if (k === 'for') {
      el.setAttribute('for', v);
    } else {
      el.setAttribute(k, v === true ? '' : String(v));
    }
  }
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** h('tag.class', {attrs}, ...children) builds an HTML element. */
export function h(tag, attrs, ...children) {
  const [name, ...classes] = tag.split('.');
  const el = document.createElement(name);
  if (classes.length) el.className = classes.join(' ');
  if (attrs && (attrs instanceof Node || Array.isArray(attrs) || typeof attrs !== 'object')) {
    children.unshift(attrs);
    attrs = null;
  }
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

const SVGNS = 'http://www.w3.org/2000/svg';
/** s('tag', {attrs}, ...children) builds an SVG element. */
export function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVGNS, tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

// ---- formatting

const nf = new Intl.NumberFormat(undefined, { maximumFractionDigits: 2 });
export function fmtNum(n) {
  return n === null || n === undefined || Number.isNaN(n) ? '–' : nf.format(n);
}
export function fmtPct(x) {
  return x === null || x === undefined ? '–' : `${(x * 100).toFixed(x < 0.1 && x > 0 ? 1 : 0)}%`;
}
export function fmtTime(iso) {
  if (!iso) return '–';
  const d = new Date(iso);
  return d.toLocaleString(undefined, { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });
}
export function fmtClock(iso) {
  const d = new Date(iso);
  return d.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit' });
}
export function fmtAgo(iso) {
  if (!iso) return 'never';
  const s = Math.round((Date.now() - new Date(iso).getTime()) / 1000);
  if (s < 60) return 'just now';
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} d ago`;
}
export function timeEl(iso, text) {
  return iso ? h('time', { datetime: iso, title: iso }, text ?? fmtTime(iso)) : h('span.muted', 'never');
}

// ---- forms

/** field(label, control, {hint}) wraps a control with its label (and hint, linked by aria-describedby). */
export function field(label, control, opts = {}) {
  if (!control.id) control.id = nextId();
  const parts = [h('label', { for: control.id }, label), control];
  if (opts.hint) {
    const hid = nextId('hint');
    control.setAttribute('aria-describedby', hid);
    parts.push(h('p.hint', { id: hid }, opts.hint));
  }
  return h('div.field', { class: ['field', opts.class] }, parts);
}

export function input(attrs = {}) {
  return h('input', { type: 'text', ...attrs });
}

export function select(options, value, attrs = {}) {
  const el = h('select', attrs);
  for (const o of options) {
    const [v, label] = Array.isArray(o) ? o : [o, o];
    el.append(h('option', { value: v, selected: String(v) === String(value) }, label));
  }
  return el;
}

export function checkbox(label, checked, attrs = {}) {
  const box = h('input', { type: 'checkbox', checked, ...attrs });
  return { box, el: h('label.check', box, label) };
}

// ---- feedback

export function toast(message, kind = '') {
  const box = document.getElementById('toasts');
  const t = h('div', { class: ['toast', kind] }, message);
  box.append(t);
  setTimeout(() => t.remove(), kind === 'error' ? 8000 : 4000);
}

/** errorBox renders an API error with its details, field by field. */
export function errorBox(err) {
  const details = err && err.details ? Object.entries(err.details) : [];
  return h('div.notice.error', { role: 'alert' },
    h('strong', err && err.message ? err.message : String(err)),
    details.length ? h('ul', details.map(([k, v]) => h('li', h('code', k), ': ', v))) : null);
}

/** unavailable is the state of a page whose admin API this server does not offer. */
export function unavailable(what, route) {
  return h('div.notice.unavailable', { role: 'status' },
    h('strong', `${what}: not available on this server.`), ' ',
    'This eventd does not serve ', h('code', route), ' yet; the rest of the dashboard works. ',
    'Upgrade eventd to use this page.');
}

/** section renders a page body that failed to load: unavailable, or the error. */
export function failure(err, what, route) {
  if (err && err.unavailable) return unavailable(what, route);
  return errorBox(err);
}

// ---- dialogs

/**
 * confirmDialog asks before something irreversible. With requireText the
 * OK button only works once that text is typed (deleting a project).
 */
export function confirmDialog({ title, body, ok = 'OK', danger = false, requireText = '' }) {
  const dlg = document.getElementById('dialog');
  const okBtn = document.getElementById('dialog-ok');
  document.getElementById('dialog-title').textContent = title;
  const bodyEl = clear(document.getElementById('dialog-body'));
  bodyEl.append(...[].concat(body).map((b) => (typeof b === 'string' ? h('p', b) : b)));
  okBtn.textContent = ok;
  okBtn.className = danger ? 'button danger' : 'button';
  let typed = null;
  if (requireText) {
    typed = input({ autocomplete: 'off', spellcheck: 'false' });
    bodyEl.append(field(`Type ${requireText} to confirm`, typed));
    okBtn.disabled = true;
    typed.addEventListener('input', () => { okBtn.disabled = typed.value !== requireText; });
  } else {
    okBtn.disabled = false;
  }
  return new Promise((resolve) => {
    dlg.addEventListener('close', () => resolve(dlg.returnValue === 'ok' && (!typed || typed.value === requireText)), { once: true });
    dlg.returnValue = '';
    dlg.showModal();
    (typed || document.getElementById('dialog-cancel')).focus();
  });
}

/** copyButton copies text() to the clipboard and says so. */
export function copyButton(text, label = 'Copy') {
  const btn = h('button.button.secondary', { type: 'button' }, label);
  btn.addEventListener('click', async () => {
    const value = text();
    let ok = false;
    try {
      await navigator.clipboard.writeText(value);
      ok = true;
    } catch {
      // Clipboard API refused (no permission, plain http on another host): select and copy instead.
      const ta = h('textarea', { class: 'visually-hidden', readonly: 'readonly' });
      ta.value = value;
      document.body.append(ta);
      ta.select();
      ok = document.execCommand('copy');
      ta.remove();
    }
    btn.textContent = ok ? 'Copied' : 'Copy failed: select and copy by hand';
    toast(ok ? 'Copied to the clipboard' : 'Could not copy; select the text and copy it by hand', ok ? '' : 'error');
    setTimeout(() => { btn.textContent = label; }, 2500);
  });
  return btn;
}

/** secretOnce shows a secret that the server will never show again. */
export function secretOnce({ title, value, warning, onDone, testid }) {
  const out = h('input', { type: 'text', readonly: true, value, spellcheck: 'false', dataset: testid ? { testid } : undefined });
  out.id = nextId('secret');
  const warnId = nextId('warn');
  out.setAttribute('aria-describedby', warnId);
  out.addEventListener('focus', () => out.select());
  const box = h('section.panel.secret-once',
    h('h2', { tabindex: '-1' }, title),
    h('p', { id: warnId }, h('strong', 'Copy it now: it will not be shown again. '), warning),
    h('div.secret-value', h('label.visually-hidden', { for: out.id }, title), out, copyButton(() => value)),
    h('button.button', { type: 'button', onclick: () => { box.remove(); if (onDone) onDone(); } }, 'I have copied it'));
  return box;
}

/** table builds a table: cols are [header, (row) => cell, {num}] triples. */
export function table(caption, cols, rows, { empty = 'Nothing yet.', rowClass } = {}) {
  if (!rows.length) return h('p.empty', empty);
  return h('div.table-wrap', h('table',
    h('caption', caption),
    h('thead', h('tr', cols.map(([head, , o]) => h('th', { scope: 'col', class: o && o.num ? 'num' : null }, head)))),
    h('tbody', rows.map((r) => h('tr', { class: rowClass ? rowClass(r) : null },
      cols.map(([, cell, o]) => h('td', { class: o && o.num ? 'num' : null }, cell(r))))))));
}

export function envBadge(env) {
  return h('span', { class: ['env-badge', env] }, env === 'live' ? 'Live' : 'Test');
}

/** pageHead is the page's h1 with the environment it shows, and actions. */
export function pageHead(title, env, ...actions) {
  return h('div.page-head', h('h1', { id: 'page-title' }, title), env ? envBadge(env) : null, h('span.spacer'), ...actions);
}
