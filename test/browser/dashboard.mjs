// Browser driver for test/dashboard_test.go: the Go test owns the scenario
// and the checks; this script runs headless Chromium through playwright-core
// and finds elements the way a user (or a screen reader) does: by their
// label, role and accessible name.
//
// Protocol as driver.mjs: one JSON command per line on stdin, one JSON
// answer per line on stdout: {"id":1,"op":"goto","page":"p1","url":"..."} ->
// {"id":1,"ok":true,"value":...} or {"id":1,"ok":false,"error":"..."}.
import { createInterface } from 'node:readline';
import { chromium } from 'playwright-core';

const executablePath = process.env.EVENTD_CHROMIUM || '/usr/bin/chromium';
const browser = await chromium.launch({
  executablePath,
  headless: true,
  // No sandbox as root, and no background traffic to Google's hosts, which
  // the closed network would refuse.
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});

const contexts = new Map();
const pages = new Map();
// problems[page]: console errors, uncaught exceptions and failed requests:
// the test expects none (a CSP violation shows up here too).
const problems = new Map();
// requests[page]: every URL the page asked for, to prove it asks only eventd.
const requests = new Map();
const T = 10000;

function page(name) {
  const p = pages.get(name);
  if (!p) throw new Error(`no page ${name}`);
  return p;
}

// scope narrows a lookup to a region (a CSS selector) when given.
function scope(p, within) {
  return within ? p.locator(within).first() : p;
}

const ops = {
  async context({ name, width = 1280, height = 800, mobile = false }) {
    const ctx = await browser.newContext({
      viewport: { width, height }, isMobile: mobile, hasTouch: mobile, deviceScaleFactor: 1,
      reducedMotion: 'reduce',
    });
    await ctx.grantPermissions(['clipboard-read', 'clipboard-write']);
    contexts.set(name, ctx);
  },
  // missing makes routes matching pattern answer like a server without
  // them (the router's 404), for the "not available" states.
  async missing({ ctx, pattern }) {
    await contexts.get(ctx).route(pattern, (r) => r.fulfill({
      status: 404, contentType: 'application/json', body: '{"error":"not_found","message":"Not found"}',
    }));
  },
  async page({ ctx, name }) {
    const p = await contexts.get(ctx).newPage();
    const pr = [];
    const rq = [];
    problems.set(name, pr);
    requests.set(name, rq);
    p.on('console', (m) => { if (m.type() === 'error') pr.push(`console: ${m.text()} at ${m.location().url}`); });
    p.on('pageerror', (e) => pr.push(`exception: ${e.message}`));
    p.on('request', (r) => rq.push(r.url()));
    p.on('requestfailed', (r) => {
      const f = r.failure() ? r.failure().errorText : 'failed';
      // Navigating away aborts what is in flight; that is not a fault.
      if (f !== 'net::ERR_ABORTED') pr.push(`request failed: ${r.url()} ${f}`);
    });
    pages.set(name, p);
  },
  async goto({ page: n, url }) {
    const res = await page(n).goto(url, { waitUntil: 'load' });
    return res ? res.status() : 0;
  },
  async reload({ page: n }) {
    await page(n).reload({ waitUntil: 'load' });
  },
  async url({ page: n }) {
    return page(n).url();
  },
  async fill({ page: n, label, value, within }) {
    await scope(page(n), within).getByLabel(label, { exact: true }).fill(value, { timeout: T });
  },
  async select({ page: n, label, value, within }) {
    await scope(page(n), within).getByLabel(label, { exact: true }).selectOption(value, { timeout: T });
  },
  async check({ page: n, label, within, checked = true }) {
    await scope(page(n), within).getByLabel(label, { exact: true }).setChecked(checked, { timeout: T });
  },
  async click({ page: n, role = 'button', name, within, exact = true }) {
    await scope(page(n), within).getByRole(role, { name, exact }).first().click({ timeout: T });
  },
  async press({ page: n, key }) {
    await page(n).keyboard.press(key);
  },
  async waitText({ page: n, text, within, timeout = T }) {
    await scope(page(n), within).getByText(text, { exact: false }).first().waitFor({ timeout });
  },
  async waitSelector({ page: n, selector, state = 'visible', timeout = T }) {
    await page(n).locator(selector).first().waitFor({ state, timeout });
  },
  // waitFunction polls js from here: Playwright's own waitForFunction
  // evaluates strings inside the page, which the dashboard's CSP (rightly)
  // refuses as eval.
  async waitFunction({ page: n, js, timeout = T }) {
    const end = Date.now() + timeout;
    let last;
    for (;;) {
      try {
        if (await page(n).evaluate(js)) return;
      } catch (e) {
        last = e; // the page may be navigating
      }
      if (Date.now() > end) throw new Error(`timed out after ${timeout} ms waiting for ${js}${last ? `: ${last}` : ''}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  },
  async text({ page: n, selector }) {
    return await page(n).locator(selector).first().textContent({ timeout: T });
  },
  async value({ page: n, selector }) {
    return await page(n).locator(selector).first().inputValue({ timeout: T });
  },
  async eval({ page: n, js }) {
    return await page(n).evaluate(js);
  },
  async focused({ page: n }) {
    return await page(n).evaluate(() => {
      const e = document.activeElement;
      return e ? `${e.tagName.toLowerCase()}#${e.id}` : '';
    });
  },
  async screenshot({ page: n, path, fullPage = true }) {
    // Toasts of earlier steps would cover the page; let charts redraw at
    // the final width before the picture.
    await page(n).evaluate(() => {
      const t = document.getElementById('toasts');
      if (t) t.replaceChildren();
      return new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
    });
    await page(n).screenshot({ path, fullPage, animations: 'disabled' });
  },
  async cookies({ ctx }) {
    return await contexts.get(ctx).cookies();
  },
  async problems({ page: n }) {
    return problems.get(n);
  },
  async requests({ page: n }) {
    return requests.get(n);
  },
  async close({ page: n }) {
    await page(n).close();
    pages.delete(n);
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
