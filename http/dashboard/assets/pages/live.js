// The live feed: the project's environment streamed over a WebSocket on the
// admin listener (session cookie, same origin), with filters and pause.
import { h, clear, field, input, pageHead, fmtClock, timeEl } from '../ui.js';
import { get, projectPath, loadSession } from '../api.js';

const MAX_SHOWN = 200;
const MAX_HELD = 1000;

export async function render(view, ctx) {
  const { project: p, env } = ctx;
  const status = h('span', { 'data-testid': 'feed-status' }, 'Connecting…');
  const dot = h('span.status-dot', { 'aria-hidden': 'true' });
  const pauseBtn = h('button.button.secondary', { type: 'button', 'aria-pressed': 'false' }, 'Pause');
  const clearBtn = h('button.button.secondary', { type: 'button' }, 'Clear');
  view.append(pageHead('Live events', env, h('p.muted', { role: 'status', 'aria-live': 'polite' }, dot, status), pauseBtn, clearBtn));

  const events = input({ autocomplete: 'off', spellcheck: 'false', placeholder: 'signup, purchase' });
  const visitor = input({ autocomplete: 'off', spellcheck: 'false' });
  const filterForm = h('form.panel', { 'aria-label': 'Filters' },
    h('div.row',
      field('Event names', events, { hint: 'Comma-separated; empty shows every event.' }),
      field('Visitor id', visitor, { hint: 'Empty shows every visitor.' }),
      h('div.buttons', h('button.button', { type: 'submit' }, 'Apply filters'))));
  const count = h('span', '0');
  const feed = h('ol.feed', { 'aria-label': 'Events, newest first', 'data-testid': 'feed' });
  const notice = h('div');
  view.append(filterForm, notice,
    h('section.panel', { 'aria-labelledby': 'feed-title' },
      h('h2', { id: 'feed-title' }, 'Events ', h('span.muted', '(', count, ' shown, newest first)')),
      feed));

  // The stream reads through one of the environment's keys; say so instead of failing silently.
  try {
    const keys = (await get(projectPath(p.id, 'keys'))).data || [];
    if (!keys.some((k) => k.environment === env && !k.revoked_at)) {
      notice.append(h('div.notice.warn', { role: 'status' }, h('strong', `No active ${env} key. `),
        `The live feed reads the ${env} data through one of its API keys. `,
        h('a', { href: ctx.href(p.id, env, 'keys') }, `Create a ${env} key`), ', then come back.'));
      status.textContent = 'Not connected';
      dot.className = 'status-dot off';
      return undefined;
    }
  } catch { /* the stream itself will tell */ }

  let ws = null;
  let lastId = '';
  let paused = false;
  let held = [];
  let dropped = 0;
  let closed = false;
  let retry = 0;
  let timer = null;
  const filters = { event: [], visitor_id: '' };

  function setStatus(text, cls) {
    status.textContent = text;
    dot.className = `status-dot ${cls}`;
  }

  function row(e) {
    const props = JSON.stringify(e.properties || {});
    return h('li', { 'data-event': e.event, 'data-id': e.id },
      h('span', timeEl(e.timestamp, fmtClock(e.timestamp))),
      h('span.ev-name', e.event),
      h('span.mono', e.visitor_id || h('span.muted', 'no visitor')),
      h('code.ev-props', props.length > 300 ? `${props.slice(0, 300)}…` : props));
  }

  function show(list) {
    const frag = document.createDocumentFragment();
    for (let i = list.length - 1; i >= 0; i--) frag.append(row(list[i]));
    feed.prepend(frag);
    while (feed.children.length > MAX_SHOWN) feed.lastChild.remove();
    count.textContent = String(feed.children.length);
  }

  function subscribeMessage() {
    return { type: 'subscribe', event: filters.event.length ? filters.event : null, visitor_id: filters.visitor_id || null };
  }

  function liveText() {
    return filters.event.length || filters.visitor_id ? 'Live, filtered' : 'Live';
  }

  function pausedText() {
    return `Paused: ${held.length + dropped} new${dropped ? ` (${dropped} not kept)` : ''}`;
  }

  function url() {
    const q = new URLSearchParams({ environment: env });
    filters.event.forEach((n) => q.append('event', n));
    if (filters.visitor_id) q.set('visitor_id', filters.visitor_id);
    if (lastId) q.set('since', lastId); // resume without a gap after a reconnect
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    return `${proto}//${location.host}${projectPath(p.id, 'stream')}?${q}`;
  }

  function connect() {
    if (closed) return;
    setStatus('Connecting…', '');
    const sock = new WebSocket(url());
    ws = sock;
    sock.addEventListener('open', () => {
      retry = 0;
      // The server answers a subscribe only once the subscription is in
      // place, so "Live" never shows before events can arrive.
      sock.send(JSON.stringify(subscribeMessage()));
    });
    sock.addEventListener('message', (m) => {
      let msg;
      try { msg = JSON.parse(m.data); } catch { return; }
      if (msg.type === 'event') {
        lastId = msg.data.id;
        if (paused) {
          held.push(msg.data);
          if (held.length > MAX_HELD) { held.shift(); dropped += 1; }
          setStatus(pausedText(), 'paused');
        } else {
          show([msg.data]);
        }
      } else if (msg.type === 'subscribed') {
        if (!paused) setStatus(liveText(), 'on');
        else setStatus(pausedText(), 'paused');
      } else if (msg.type === 'error' && msg.last_id) {
        lastId = msg.last_id;
      } else if (msg.type === 'error' && msg.error === 'bad_request') {
        setStatus(`Filter refused: ${msg.message}`, 'off'); // the previous filters stay in force
      }
    });
    sock.addEventListener('close', async (ev) => {
      if (closed || ws !== sock) return;
      // 4001: the project was deleted; reconnecting cannot help.
      if (ev.code === 4001) {
        setStatus(ev.reason === 'project deleted' ? 'This project was deleted.' : `Closed: ${ev.reason}`, 'off');
        return;
      }
      setStatus('Disconnected, reconnecting…', 'off');
      // A refused upgrade looks like any other close: check the session first.
      try { await loadSession(); } catch { return; }
      retry = Math.min(retry + 1, 5);
      timer = setTimeout(connect, [0, 500, 1000, 2000, 5000, 10000][retry]);
    });
  }

  filterForm.addEventListener('submit', (e) => {
    e.preventDefault();
    filters.event = events.value.split(/[\s,]+/).filter(Boolean);
    filters.visitor_id = visitor.value.trim();
    if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(subscribeMessage()));
  });
  pauseBtn.addEventListener('click', () => {
    paused = !paused;
    pauseBtn.textContent = paused ? 'Resume' : 'Pause';
    pauseBtn.setAttribute('aria-pressed', String(paused));
    if (!paused) {
      show(held);
      held = [];
      dropped = 0;
      setStatus(ws && ws.readyState === WebSocket.OPEN ? liveText() : 'Connecting…', 'on');
    } else {
      setStatus(pausedText(), 'paused');
    }
  });
  clearBtn.addEventListener('click', () => {
    clear(feed);
    count.textContent = '0';
  });

  connect();
  return () => {
    closed = true;
    clearTimeout(timer);
    if (ws) ws.close(1000, 'page closed');
  };
}
