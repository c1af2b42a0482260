// eventd t.js: pageviews and custom events for eventd. No cookies, no dependencies.
// <script src="https://HOST/t.js" data-key="pk_live_..." defer></script>
// Reference: docs/clients.md. eventd serves it with comment lines and indentation removed,
// so keep every comment on a line of its own and end statements with semicolons.
(function (w, d) {
  var s = d.currentScript || d.querySelector('script[data-key]');
  if (!s || (w.eventd && w.eventd.flush)) return;
  var n = navigator, noop = function () {};
  // data-respect-dnt: honour Do Not Track and Global Privacy Control by sending
  // nothing and storing nothing, while keeping the API callable.
  if (s.hasAttribute('data-respect-dnt') && (n.doNotTrack == '1' || w.doNotTrack == '1' || n.globalPrivacyControl)) {
    w.eventd = {track: noop, identify: noop, flush: noop, visitorId: noop};
    w.eventdq = {push: noop};
    return;
  }
  // The public key rides in the query and the body is text/plain: a "simple"
  // CORS request needs no preflight, and keepalive fetches cannot always be preflighted.
  var url = (s.getAttribute('data-api') || new URL(s.src, location.href).origin).replace(/\/+$/, '') +
    '/events/batch?api_key=' + encodeURIComponent(s.getAttribute('data-key'));
  var VK = 'eventd_vid', q = [], busy = 0, tries = 0, timer, last, vid, api, pre;

  function rid() {
    var a = crypto.getRandomValues(new Uint8Array(16)), r = '', i;
    for (i = 0; i < 16; i++) r += (a[i] | 256).toString(16).slice(1);
    return r;
  }
  // localStorage throws where storage is blocked: the id then lives for the page only.
  function store(v) {
    try { localStorage.setItem(VK, v); } catch (e) {}
  }
  try { vid = localStorage.getItem(VK); } catch (e) {}
  if (!vid) store(vid = rid());

  // Each event carries its own idempotency key, so a retried batch is never stored twice.
  function track(name, props) {
    q.push({event: '' + name, visitor_id: vid, properties: props || {},
      timestamp: new Date().toISOString(), idempotency_key: rid()});
    if (q.length >= 20) flush();
  }
  // Pageviews travel in batches of their own: a batch of only pageviews counts
  // in no rate-limit bucket, a mixed one in the key's batch bucket.
  function take() {
    var pv = q[0].event == 'pageview', b = [], r = [];
    q.forEach(function (e) { (b.length < 20 && (e.event == 'pageview') == pv ? b : r).push(e); });
    q = r;
    return b;
  }
  // One batch in flight at a time, except when the page hides: then all of it
  // goes at once, with keepalive so the requests outlive the page.
  function flush(hide) {
    while (q.length && (hide || !busy)) {
      busy = 1;
      send(take());
    }
  }
  function warn(x) {
    w.console && console.warn('eventd:', x);
  }
  function send(b) {
    var body = JSON.stringify({events: b, sent_at: new Date().toISOString()});
    fetch(url, {method: 'POST', body: body, keepalive: body.length < 6e4, credentials: 'omit',
      headers: {'Content-Type': 'text/plain'}}).then(function (r) {
      if (r.status == 429 || r.status > 499) return fail(b, r.headers.get('Retry-After'));
      tries = busy = 0;
      // Other errors (400, 401, 413) would fail again: drop the batch and say why.
      if (r.status > 399) warn(r.status);
      else r.json().then(function (j) { j.rejected && warn(j.results); }, noop);
      flush();
    }, function () { fail(b); });
  }
  // Exponential backoff with jitter, never sooner than Retry-After; a batch is
  // dropped after 8 tries (a refused CORS origin looks like a network error).
  function fail(b, ra) {
    if (++tries < 9) q = b.concat(q);
    else tries = 0;
    busy = 1;
    clearTimeout(timer);
    timer = setTimeout(function () { busy = 0; flush(); },
      Math.max(ra * 1e3 || 0, Math.min(6e4, (1 << tries) * 500 * (1 + Math.random()))));
  }
  // A pageview per distinct URL (the fragment ignored); within the page the
  // referrer is the previous URL.
  function pv() {
    var l = location, h = l.href.split('#')[0], p;
    if (h == last) return;
    p = {url: l.href, path: l.pathname, referrer: last || d.referrer, title: d.title,
      screen_width: screen.width, screen_height: screen.height};
    new URLSearchParams(l.search).forEach(function (v, k) {
      if (!k.indexOf('utm_')) p[k] = v;
    });
    last = h;
    track('pageview', p);
  }

  ['pushState', 'replaceState'].forEach(function (m) {
    var o = history[m];
    history[m] = function () {
      var r = o.apply(this, arguments);
      pv();
      return r;
    };
  });
  w.addEventListener('popstate', pv);
  w.addEventListener('pagehide', function () { flush(1); });
  d.addEventListener('visibilitychange', function () {
    if (d.visibilityState == 'hidden') flush(1);
  });
  setInterval(function () { flush(); }, 5e3);

  api = w.eventd = {
    track: track,
    // identify(id) names the visitor from now on; identify() starts a new anonymous id.
    identify: function (v) { store(vid = v ? '' + v : rid()); },
    flush: function () { flush(); },
    visitorId: function () { return vid; }
  };
  // Calls queued before the script ran: window.eventdq = [['track', 'signup', {...}]].
  pre = w.eventdq || [];
  w.eventdq = {push: function (c) { api[c[0]] && api[c[0]].apply(api, [].slice.call(c, 1)); }};
  pre.forEach(w.eventdq.push);
  pv();
})(window, document);
