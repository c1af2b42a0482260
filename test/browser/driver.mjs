// Browser driver for test/tjs_test.go and test/segment_browser_test.go: the
// Go test owns the scenario and the checks; this script only runs headless
// Chromium through playwright-core.
//
// Protocol: one JSON command per line on stdin, one JSON answer per line on
// stdout: {"id":1,"op":"goto","page":"p1","url":"..."} ->
// {"id":1,"ok":true,"value":...} or {"id":1,"ok":false,"error":"..."}.
import { createInterface } from 'node:readline';
import { chromium } from 'playwright-core';

const executablePath = process.env.EVENTD_CHROMIUM || '/usr/bin/chromium';
const browser = await chromium.launch({
  executablePath,
  headless: true,
  // The flags this machine needs: no sandbox as root, and no background
  // traffic to Google's hosts, which the closed network would refuse.
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync',
    // EVENTD_LOOPBACK_ONLY=1: every request to a host that is not loopback
    // goes to a proxy that is not there (port 9 on loopback) and fails, with
    // no DNS look-up; Chromium never proxies loopback itself. (Playwright's
    // request routing would do it too, but it answers CORS preflights
    // itself, hiding the server's.)
    ...(process.env.EVENTD_LOOPBACK_ONLY === '1' ? ['--proxy-server=http://127.0.0.1:9'] : [])],
});

const contexts = new Map();
const pages = new Map();
// net[page] lists the page's requests to /events/batch as the network saw
// them, including those CORS hides from the page's own script.
const net = new Map();
const consoleLog = new Map();
// requests[page]: every request the page made (documents, scripts, fetches),
// with its answer's status or its failure: what the Go test checks for hosts
// other than loopback.
const requests = new Map();
// wireLog[page]: status lines and failures of /events/batch as DevTools saw them.
const wireLog = new Map();

const ops = {
  async context({ name }) {
    contexts.set(name, await browser.newContext());
  },
  async page({ ctx, name, init }) {
    const page = await contexts.get(ctx).newPage();
    if (init) await page.addInitScript(init);
    const log = [];
    net.set(name, log);
    const all = [];
    requests.set(name, all);
    const entries = new WeakMap();
    page.on('request', (r) => {
      const entry = { url: r.url(), method: r.method(), type: r.resourceType(), headers: r.headers(), body: r.postData(), t: Date.now() };
      entries.set(r, entry);
      all.push(entry);
      r.allHeaders().then((h) => { entry.headers = h; }, () => {});
      r.response().then((res) => { entry.status = res ? res.status() : 0; }, () => {});
    });
    page.on('requestfinished', (r) => {
      const e = entries.get(r);
      if (e) e.done = true;
    });
    page.on('requestfailed', (r) => {
      const e = entries.get(r);
      if (e) { e.failure = r.failure() ? r.failure().errorText : 'failed'; e.done = true; }
    });
    consoleLog.set(name, []);
    page.on('console', (m) => consoleLog.get(name).push(`${m.type()}: ${m.text()}`));
    page.on('request', (r) => {
      if (!r.url().includes('/events/batch')) return;
      const entry = { url: r.url(), method: r.method(), body: r.postData(), headers: r.headers(), t: Date.now() };
      log.push(entry);
      r.response().then((res) => { entry.status = res ? res.status() : 0; }, () => {});
    });
    page.on('requestfailed', (r) => {
      const e = log.find((x) => x.url === r.url() && x.body === r.postData() && x.failure === undefined);
      if (e) e.failure = r.failure() ? r.failure().errorText : 'failed';
    });
    // CORS hides a refused answer from the page and from Playwright's
    // response event; the DevTools protocol still sees its status line.
    const cdp = await page.context().newCDPSession(page);
    const wire = [];
    wireLog.set(name, wire);
    const urls = new Map();
    cdp.on('Network.requestWillBeSent', (e) => urls.set(e.requestId, e.request.url));
    cdp.on('Network.responseReceivedExtraInfo', (e) => {
      const u = urls.get(e.requestId);
      if (u && (u.includes('/events/batch') || u.includes('/v1/'))) wire.push({ url: u, status: e.statusCode });
    });
    cdp.on('Network.loadingFailed', (e) => {
      const u = urls.get(e.requestId);
      if (u && (u.includes('/events/batch') || u.includes('/v1/'))) wire.push({ url: u, failure: e.errorText, cors: e.corsErrorStatus ? e.corsErrorStatus.corsError : '' });
    });
    await cdp.send('Network.enable');
    pages.set(name, page);
  },
  async goto({ page, url }) {
    const res = await pages.get(page).goto(url, { waitUntil: 'load' });
    return res ? res.status() : 0;
  },
  async eval({ page, js }) {
    return await pages.get(page).evaluate(js);
  },
  async reload({ page }) {
    await pages.get(page).reload({ waitUntil: 'load' });
  },
  async close({ page }) {
    await pages.get(page).close({ runBeforeUnload: true });
    pages.delete(page);
  },
  async net({ page }) {
    return net.get(page);
  },
  async requests({ page }) {
    return requests.get(page);
  },
  async wire({ page }) {
    return wireLog.get(page);
  },
  async console({ page }) {
    return consoleLog.get(page);
  },
  async cookies({ ctx }) {
    return await contexts.get(ctx).cookies();
  },
  async quit() {
    await browser.close();
    setImmediate(() => process.exit(0));
  },
};

const rl = createInterface({ input: process.stdin });
rl.on('line', async (line) => {
  let cmd;
  try {
    cmd = JSON.parse(line);
    const value = await ops[cmd.op](cmd);
    process.stdout.write(JSON.stringify({ id: cmd.id, ok: true, value: value ?? null }) + '\n');
  } catch (e) {
    process.stdout.write(JSON.stringify({ id: cmd && cmd.id, ok: false, error: String(e && e.stack || e) }) + '\n');
  }
});
rl.on('close', async () => {
  await browser.close().catch(() => {});
  process.exit(0);
});
process.stdout.write(JSON.stringify({ ready: true, version: browser.version() }) + '\n');
