// The dashboard's only way to the server: same-origin fetch with the
// session cookie (HttpOnly, so this script never sees it) and the session's
// CSRF token on every request that changes something. No key or token is
// kept in any JavaScript storage.

let csrf = '';

/** ApiError is a non-2xx answer of the admin API. */
export class ApiError extends Error {
  constructor(status, body, path) {
    super((body && body.message) || `The server answered ${status}`);
    this.status = status;
    this.code = body && body.error;
    this.details = body && body.details;
    this.path = path;
    // The router's own 404 ("Not found") or a 405 means the route does not
    // exist on this server, as opposed to a missing project or goal.
    this.unavailable = (status === 404 && body && body.message === 'Not found') || status === 405 || status === 501;
  }
}

/** sessionEnded sends the browser to the login page. */
export function sessionEnded() {
  location.assign('/login?expired');
}

/** loadSession fetches the session and its CSRF token; it is called at start and after a CSRF refusal. */
export async function loadSession() {
  const r = await fetch('/session', { credentials: 'same-origin', cache: 'no-store', headers: { Accept: 'application/json' } });
  if (r.status === 401) {
    sessionEnded();
    throw new ApiError(401, { message: 'Signed out' }, '/session');
  }
  if (!r.ok) throw new ApiError(r.status, await r.json().catch(() => null), '/session');
  const s = await r.json();
  csrf = s.csrf_token;
  return s;
}

function withQuery(path, query) {
  if (!query) return path;
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) {
    if (v === undefined || v === null || v === '') continue;
    if (Array.isArray(v)) v.forEach((x) => q.append(k, x));
    else q.set(k, String(v));
  }
  const qs = q.toString();
  return qs ? `${path}?${qs}` : path;
}

/** api calls the admin API and returns the decoded JSON (null for 204). */
export async function api(method, path, body, query, retried = false) {
  const url = withQuery(path, query);
  const headers = { Accept: 'application/json' };
  const init = { method, headers, credentials: 'same-origin', cache: 'no-store' };
  if (method !== 'GET' && method !== 'HEAD') headers['X-CSRF-Token'] = csrf;
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let r;
  try {
    r = await fetch(url, init);
  } catch {
    throw new ApiError(0, { error: 'network', message: 'The server did not answer. Is eventd running?' }, path);
  }
  if (r.status === 204) return null;
  const text = await r.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (r.ok) return data;
  if (r.status === 401) sessionEnded();
  // A login in another tab replaced this tab's session: fetch the new token once and retry.
  if (r.status === 403 && !retried && data && /CSRF/.test(data.message || '')) {
    await loadSession();
    return api(method, path, body, query, true);
  }
  throw new ApiError(r.status, data, path);
}

export const get = (path, query) => api('GET', path, undefined, query);
export const post = (path, body) => api('POST', path, body === undefined ? {} : body);
export const put = (path, body) => api('PUT', path, body);
export const patch = (path, body) => api('PATCH', path, body);
export const del = (path) => api('DELETE', path);

/** logout ends the session on the server, then shows the login page. */
export async function logout() {
  try {
    await api('POST', '/logout');
  } finally {
    location.assign('/login?signed_out');
  }
}

/** projectPath is the admin API path of a project's sub-resource. */
export function projectPath(projectId, ...rest) {
  return ['/admin/v1/projects', encodeURIComponent(projectId), ...rest.map((r) => encodeURIComponent(r))].join('/');
}

/** analytics is GET /analytics for a project's environment, through the admin listener. */
export function analytics(projectId, env, query) {
  return get(projectPath(projectId, 'analytics'), { environment: env, ...query });
}
