package engine

import (
	"encoding/json"
	"slices"

	"github.com/eventd/eventd/actors"
	"github.com/eventd/eventd/engine/ids"
)

// Usage-alert windows: the rate-limit windows a threshold can watch.
var alertWindows = []string{"minute", "hour", "day"}

const (
	maxAlertsPerProject = 50
	recentFirings       = 20
)

// alertRecord is the stored form of a usage alert.
type alertRecord struct {
	ID               string  `json:"id"`
	ProjectID        string  `json:"project_id"`
	KeyID            string  `json:"key_id,omitempty"` // "": every key of the project
	Window           string  `json:"window"`
	ThresholdPercent float64 `json:"threshold_percent"`
	CreatedAt        string  `json:"created_at"`
	UpdatedAt        string  `json:"updated_at"`
}

// Alert is a usage alert as the admin API shows it.
type Alert struct {
	ID               string  `json:"id"`
	KeyID            *string `json:"key_id"`
	Window           string  `json:"window"`
	ThresholdPercent float64 `json:"threshold_percent"`
	CreatedAt        string  `json:"created_at"`
	UpdatedAt        string  `json:"updated_at"`
	LastFiredAt      *string `json:"last_fired_at"`
	// Firings are the most recent times it fired, newest first (single reads only).
	Firings []actors.AlertFiring `json:"firings,omitzero"`
}

// AlertInput is the body of alert create and update; nil fields are unchanged.
type AlertInput struct {
	KeyID            *string  `json:"key_id"`
	ClearKey         bool     `json:"-"` // "key_id": null in an update: every key
	Window           *string  `json:"window"`
	ThresholdPercent *float64 `json:"threshold_percent"`
}

func (e *Engine) checkAlert(r *alertRecord) error {
	d := map[string]string{}
	if !slices.Contains(alertWindows, r.Window) {
		d["window"] = "must be minute, hour or day"
	}
	if !(r.ThresholdPercent > 0 && r.ThresholdPercent <= 100) {
		d["threshold_percent"] = "must be a number above 0 and at most 100"
	}
	if r.KeyID != "" {
		e.mu.RLock()
		k := e.keyRecords[r.KeyID]
		e.mu.RUnlock()
		if k == nil || k.ProjectID != r.ProjectID {
			d["key_id"] = "must be the id of a key of this project"
		}
	}
	if len(d) > 0 {
		return &InputError{Details: d}
	}
	return nil
}

func (e *Engine) alertView(r *alertRecord, firings int) Alert {
	a := Alert{ID: r.ID, Window: r.Window, ThresholdPercent: r.ThresholdPercent, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	if r.KeyID != "" {
		k := r.KeyID
		a.KeyID = &k
	}
	n := max(firings, 1)
	_ = e.db.ScanAlertFirings(r.ID, func(rec []byte) bool {
		var f actors.AlertFiring
		if json.Unmarshal(rec, &f) != nil {
			return true
		}
		if a.LastFiredAt == nil {
			at := f.FiredAt
			a.LastFiredAt = &at
		}
		if firings > 0 {
			a.Firings = append(a.Firings, f)
		}
		n--
		return n > 0
	})
	if firings > 0 && a.Firings == nil {
		a.Firings = []actors.AlertFiring{}
	}
	return a
}

// CreateAlert adds a usage alert; without key_id it watches every key of the project.
func (e *Engine) CreateAlert(projectID string, in AlertInput) (Alert, error) {
	now := nowText()
	r := &alertRecord{ID: ids.Random("alt_", 16), ProjectID: projectID, CreatedAt: now, UpdatedAt: now}
	if in.KeyID != nil {
		r.KeyID = *in.KeyID
	}
	if in.Window != nil {
		r.Window = *in.Window
	}
	if in.ThresholdPercent != nil {
		r.ThresholdPercent = *in.ThresholdPercent
	}
	e.adminMu.Lock()
	defer e.adminMu.Unlock()
	if _, err := e.project(projectID); err != nil {
		return Alert{}, err
	}
	if err := e.checkAlert(r); err != nil {
		return Alert{}, err
	}
	if len(e.alertsOf(projectID)) >= maxAlertsPerProject {
		return Alert{}, invalid("window", "a project can have at most 50 usage alerts")
	}
	if err := e.putJSON(kindAlert, r.ID, r); err != nil {
		return Alert{}, err
	}
	e.hooks.mu.Lock()
	e.hooks.alerts[r.ID] = r
	e.hooks.mu.Unlock()
	e.publishAlerts()
	return e.alertView(r, 0), nil
}

func (e *Engine) alertsOf(projectID string) []*alertRecord {
	e.hooks.mu.RLock()
	defer e.hooks.mu.RUnlock()
	return ofProject(e.hooks.alerts, projectID)
}

func (e *Engine) alert(projectID, id string) (*alertRecord, error) {
	if _, err := e.project(projectID); err != nil {
		return nil, err
	}
	e.hooks.mu.RLock()
	r := e.hooks.alerts[id]
	e.hooks.mu.RUnlock()
	if r == nil || r.ProjectID != projectID {
		return nil, ErrNotFound
	}
	return r, nil
}

// Alerts lists a project's usage alerts, oldest first, with when each last fired.
func (e *Engine) Alerts(projectID string) ([]Alert, error) {
	if _, err := e.project(projectID); err != nil {
		return nil, err
	}
	recs := e.alertsOf(projectID)
	out := make([]Alert, 0, len(recs))
	for _, r := range recs {
		out = append(out, e.alertView(r, 0))
	}
	return out, nil
}

// GetAlert reads one usage alert with its most recent firings.
func (e *Engine) GetAlert(projectID, id string) (Alert, error) {
	r, err := e.alert(projectID, id)
	if err != nil {
		return Alert{}, err
	}
	return e.alertView(r, recentFirings), nil
}

// UpdateAlert changes the key, window or threshold of a usage alert.
func (e *Engine) UpdateAlert(projectID, id string, in AlertInput) (Alert, error) {
	e.adminMu.Lock()
	defer e.adminMu.Unlock()
	old, err := e.alert(projectID, id)
	if err != nil {
		return Alert{}, err
	}
	r := *old
	if in.KeyID != nil {
		r.KeyID = *in.KeyID
	} else if in.ClearKey {
		r.KeyID = ""
	}
	if in.Window != nil {
		r.Window = *in.Window
	}
	if in.ThresholdPercent != nil {
		r.ThresholdPercent = *in.ThresholdPercent
	}
	if err := e.checkAlert(&r); err != nil {
		return Alert{}, err
	}
	r.UpdatedAt = nowText()
	if err := e.putJSON(kindAlert, r.ID, &r); err != nil {
		return Alert{}, err
	}
	e.hooks.mu.Lock()
	e.hooks.alerts[r.ID] = &r
	e.hooks.mu.Unlock()
	e.publishAlerts()
	return e.alertView(&r, 0), nil
}

// DeleteAlert removes a usage alert and its firing history.
func (e *Engine) DeleteAlert(projectID, id string) error {
	e.adminMu.Lock()
	defer e.adminMu.Unlock()
	if _, err := e.alert(projectID, id); err != nil {
		return err
	}
	if err := e.db.DeleteConfig(kindAlert, id); err != nil {
		return err
	}
	e.hooks.mu.Lock()
	delete(e.hooks.alerts, id)
	e.hooks.mu.Unlock()
	e.publishAlerts()
	return e.db.DeleteAlertFirings(id)
}

// publishAlerts rebuilds the per-project rules the key actors read on every admitted request.
func (e *Engine) publishAlerts() {
	e.hooks.mu.RLock()
	m := make(map[string][]actors.AlertRule)
	for _, r := range e.hooks.alerts {
		m[r.ProjectID] = append(m[r.ProjectID], actors.AlertRule{ID: r.ID, KeyID: r.KeyID, Window: r.Window, Percent: r.ThresholdPercent})
	}
	e.hooks.mu.RUnlock()
	e.hooks.rules.Store(&m)
}

// loadAlerts reads the alert records (after the projects).
func (e *Engine) loadAlerts() error {
	var orphans []string
	err := e.db.ScanConfig(kindAlert, func(id string, v []byte) error {
		var r alertRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return err
		}
		if e.projects[r.ProjectID] == nil {
			orphans = append(orphans, id)
			return nil
		}
		e.hooks.alerts[r.ID] = &r
		return nil
	})
	if err != nil {
		return err
	}
	for _, id := range orphans {
		if err := e.db.DeleteConfig(kindAlert, id); err != nil {
			return err
		}
		if err := e.db.DeleteAlertFirings(id); err != nil {
			return err
		}
	}
	e.publishAlerts()
	return nil
}

// wireKeyAlerts connects a key's actor to its project's usage alerts: the
// rules are read on every admitted standard request, and a crossing goes to
// the webhook actor without blocking.
func (e *Engine) wireKeyAlerts(p *Principal) {
	projectID, ds := p.rec.ProjectID, p.dataset
	p.cfg.Alerts = func() []actors.AlertRule { return (*e.hooks.rules.Load())[projectID] }
	p.cfg.OnAlert = func(a actors.UsageAlert) {
		if wh := e.hooks.wh; wh != nil {
			a.Dataset = ds
			wh.FireAlert(a)
		}
	}
}

func (r *alertRecord) owner() string                 { return r.ProjectID }
func (r *alertRecord) order() (createdAt, id string) { return r.CreatedAt, r.ID }
