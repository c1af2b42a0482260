package actors

import (
	"time"

	"github.com/eventd/eventd/engine/ids"
	"github.com/eventd/eventd/engine/ratelimit"
	"github.com/eventd/eventd/storage"
)

// GoalCompletion is one goal completion to announce as goal.completed.
type GoalCompletion struct {
	GoalID     string
	Name       string
	VisitorID  string
	HasVisitor bool
	EventID    storage.ID
}

// GoalCompletedData is the data of a goal.completed message, the same for
// a webhook delivery and a /stream message: {goal_id, name, visitor_id, event_id}.
func GoalCompletedData(c GoalCompletion) map[string]any {
	data := map[string]any{"goal_id": c.GoalID, "name": c.Name, "visitor_id": nil, "event_id": ids.FormatEvent(c.EventID)}
	if c.HasVisitor {
		data["visitor_id"] = c.VisitorID
	}
	return data
}

// UsageAlertData is the data of a usage.alert message, the same for a
// webhook delivery and a /stream message: {alert_id, key_id, window, limit, used, threshold}.
func UsageAlertData(u *UsageAlert) map[string]any {
	return map[string]any{"alert_id": u.AlertID, "key_id": u.KeyID, "window": u.Window, "limit": u.Limit,
		"used": u.Used, "threshold": u.Threshold}
}

// AlertRule is a usage alert as a key actor checks it.
type AlertRule struct {
	ID      string
	KeyID   string  // "" applies to every key of the project
	Window  string  // minute, hour or day
	Percent float64 // threshold in percent of the window's limit, in (0, 100]
}

// UsageAlert is a threshold crossing, reported by a key actor.
type UsageAlert struct {
	AlertID     string
	KeyID       string
	Dataset     uint32 // the key's dataset: its endpoints receive the alert
	Window      string
	Limit       int64
	Used        int64
	Threshold   float64
	PeriodStart int64 // Unix second where the window period began
	At          time.Time
}

// AlertFiring is what the store remembers of a fired alert.
type AlertFiring struct {
	AlertID     string  `json:"alert_id"`
	KeyID       string  `json:"key_id"`
	Window      string  `json:"window"`
	Limit       int64   `json:"limit"`
	Used        int64   `json:"used"`
	Threshold   float64 `json:"threshold"`
	PeriodStart string  `json:"period_start"`
	FiredAt     string  `json:"fired_at"`
}

// GoalAnnouncer is a GoalSource that also announces completions as
// goal.completed webhooks; the engine's source does.
type GoalAnnouncer interface {
	AnnounceGoals(ds uint32, cs []GoalCompletion) error
}

// announceGoals hands an evaluation's new completions to the source's
// announcer. The goals actor calls it before RecordGoals moves the cursor
// past them: if the process dies in between, catch-up finds them again and
// the repeated announcement is a no-op (delivery ids derive from endpoint,
// goal and event); the other order could lose the webhook.
func (g *goalsActor) announceGoals(completions map[uint32][]storage.Completion) error {
	an, ok := g.src.(GoalAnnouncer)
	if !ok {
		return nil
	}
	for ds, cs := range completions {
		names := map[string]string{}
		for _, goal := range g.src.Goals(ds) {
			names[goal.ID] = goal.Spec.Name
		}
		out := make([]GoalCompletion, 0, len(cs))
		for _, c := range cs {
			out = append(out, GoalCompletion{GoalID: c.Goal, Name: names[c.Goal], VisitorID: c.Visitor,
				HasVisitor: c.HasVisitor, EventID: c.ID})
		}
		if err := an.AnnounceGoals(ds, out); err != nil {
			return err
		}
	}
	return nil
}

// SetWebhooks makes the shards write outbox entries for endpoints of w; call it before traffic.
func (s *Shards) SetWebhooks(w *Webhooks) {
	for _, sh := range s.shards {
		sh.hooks = w
	}
}

// addOutbox writes the outbox entries of one event into the open batch.
func (s *shard) addOutbox(routes []*WebhookConfig, ds uint32, e *storage.Event) {
	for _, r := range routes {
		if r.matches(e.Name) {
			s.batch.AddOutbox(r.ID, ds, e.ID)
			s.outbox = append(s.outbox, outboxEvent{webhook: r.ID, ds: ds, ev: e})
		}
	}
}

// sendOutbox tells the webhook actor of the outbox entries just committed;
// after a failed commit they do not exist and are dropped.
func (s *shard) sendOutbox(failed bool) {
	if len(s.outbox) == 0 {
		return
	}
	if failed {
		clear(s.outbox)
		s.outbox = s.outbox[:0]
		return
	}
	s.system.Root.Send(s.hooks.pid, &outboxAdded{entries: s.outbox})
	s.outbox = nil
}

// checkAlerts fires each usage alert whose threshold the standard bucket's
// windows reach, at most once per rule and window period (UTC-aligned
// minute, hour or day). ws is the bucket's status after the admitted request.
func (k *keyActor) checkAlerts(now time.Time, ws []ratelimit.WindowStatus) {
	rules := k.cfg.Alerts()
	if len(rules) == 0 {
		return
	}
	for i := range rules {
		r := &rules[i]
		if r.KeyID != "" && r.KeyID != k.cfg.ID {
			continue
		}
		for _, w := range ws {
			if w.Name != r.Window || w.Limit <= 0 {
				continue
			}
			used := w.Limit - w.Remaining
			if float64(used)*100 < float64(w.Limit)*r.Percent {
				break
			}
			sec := now.Unix()
			period := sec - ((sec%w.Seconds)+w.Seconds)%w.Seconds
			if k.fired == nil {
				k.fired = map[string]int64{}
			}
			if last, ok := k.fired[r.ID]; ok && last == period {
				break
			}
			k.fired[r.ID] = period
			k.cfg.OnAlert(UsageAlert{AlertID: r.ID, KeyID: k.cfg.ID, Window: r.Window, Limit: w.Limit, Used: used,
				Threshold: r.Percent, PeriodStart: period, At: now})
			break
		}
	}
}
