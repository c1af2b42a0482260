// Drives Segment's own Node SDK (@segment/analytics-node) against eventd for
// test/segment_test.go: the Go test passes a plan as JSON on stdin
// ({host, writeKey, flushAt, maxRetries, calls: [{method, args}]}), this
// makes each call in order, flushes, and prints what the SDK reported as one
// JSON line: {statuses: [HTTP status per request], errors: [...]}.
import { Analytics } from '@segment/analytics-node'

let input = ''
for await (const chunk of process.stdin) input += chunk
const plan = JSON.parse(input)

const analytics = new Analytics({
  writeKey: plan.writeKey,
  host: plan.host,
  flushAt: plan.flushAt ?? 15,
  flushInterval: 60000, // flushes come from flushAt and closeAndFlush only
  maxRetries: plan.maxRetries ?? 3,
  httpRequestTimeout: 30000,
})
const statuses = []
const errors = []
analytics.on('http_response', (r) => statuses.push(r.status))
analytics.on('error', (e) => errors.push(String(e?.reason?.message ?? e?.reason ?? e?.message ?? e)))

for (const c of plan.calls) analytics[c.method](c.args)
await analytics.closeAndFlush({ timeout: 60000 })
console.log(JSON.stringify({ statuses, errors }))
