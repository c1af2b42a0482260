package engine

import (
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/eventd/eventd/actors"
	"github.com/eventd/eventd/engine/event"
	"github.com/eventd/eventd/engine/ratelimit"
)

// Plans a project can be on.
var Plans = []string{"free", "professional", "enterprise"}

// Environments of a project; each has its own dataset.
const (
	Live = "live"
	Test = "test"
)

// Key kinds.
const (
	Public = "public"
	Secret = "secret"
)

// Project is a project as the admin API shows it.
type Project struct {
	ID             string            `json:"id"`
	Name           string            `json:"name"`
	Plan           string            `json:"plan"`
	Limits         ratelimit.Limits  `json:"limits"`
	CustomLimits   *ratelimit.Limits `json:"custom_limits"`
	AllowedOrigins []string          `json:"allowed_origins"`
	RetentionDays  Retention         `json:"retention_days"`
	// SessionTimeoutMinutes ends a visitor's session after this long
	// without an event (type=sessions).
	SessionTimeoutMinutes int    `json:"session_timeout_minutes"`
	CreatedAt             string `json:"created_at"`
}

// DefaultSessionTimeoutMinutes is a new project's session timeout.
const DefaultSessionTimeoutMinutes = 30

// Retention is how many days of events a project keeps per environment; 0 keeps everything.
type Retention struct {
	Live int `json:"live"`
	Test int `json:"test"`
}

// projectRecord is the stored form of a project.
type projectRecord struct {
	ID             string            `json:"id"`
	Name           string            `json:"name"`
	Plan           string            `json:"plan"`
	CustomLimits   *ratelimit.Limits `json:"custom_limits,omitempty"`
	AllowedOrigins []string          `json:"allowed_origins,omitempty"`
	CreatedAt      string            `json:"created_at"`
	Datasets       [2]uint32         `json:"datasets"` // live, test
	RetentionDays  Retention         `json:"retention_days"`
	// SessionTimeoutMinutes: 0 (records from before it existed) means the default.
	SessionTimeoutMinutes int `json:"session_timeout_minutes,omitempty"`
}

// sessionTimeout is the project's session timeout in minutes.
func (r *projectRecord) sessionTimeout() int {
	if r.SessionTimeoutMinutes == 0 {
		return DefaultSessionTimeoutMinutes
	}
	return r.SessionTimeoutMinutes
}

// projectState is the live view of a project; fields read on the hot path are atomic.
type projectState struct {
	rec         atomic.Pointer[projectRecord]
	limits      atomic.Pointer[ratelimit.Limits]
	definitions atomic.Pointer[map[string]*event.Definition]
	// suppressed holds "<dataset>/<visitor>" of erased visitors whose new
	// events are refused; copy on write.
	suppressed atomic.Pointer[map[string]bool]
	// deleted is set when DeleteProject starts: the project's open streams,
	// dashboard feeds included, close with "project deleted".
	deleted atomic.Bool
}

func (p *projectState) setRecord(r *projectRecord) {
	p.rec.Store(r)
	lim := effectiveLimits(r)
	p.limits.Store(&lim)
}

func effectiveLimits(r *projectRecord) ratelimit.Limits {
	if r.CustomLimits != nil {
		return *r.CustomLimits
	}
	lim, _ := ratelimit.PlanLimits(r.Plan)
	return lim
}

func (p *projectState) view() Project {
	r := p.rec.Load()
	origins := r.AllowedOrigins
	if origins == nil {
		origins = []string{}
	}
	return Project{ID: r.ID, Name: r.Name, Plan: r.Plan, Limits: *p.limits.Load(), CustomLimits: r.CustomLimits,
		AllowedOrigins: origins, RetentionDays: r.RetentionDays, SessionTimeoutMinutes: r.sessionTimeout(), CreatedAt: r.CreatedAt}
}

// Key is an API key as the admin API lists it; the secret text is never kept.
type Key struct {
	ID          string  `json:"id"`
	ProjectID   string  `json:"project_id"`
	Name        string  `json:"name"`
	Type        string  `json:"type"`
	Environment string  `json:"environment"`
	Prefix      string  `json:"prefix"`
	CreatedAt   string  `json:"created_at"`
	LastUsedAt  *string `json:"last_used_at"`
	RevokedAt   *string `json:"revoked_at"`
}

// keyRecord is the stored form of a key.
type keyRecord struct {
	ID          string  `json:"id"`
	ProjectID   string  `json:"project_id"`
	Name        string  `json:"name"`
	Type        string  `json:"type"`
	Environment string  `json:"environment"`
	Prefix      string  `json:"prefix"`
	Hash        string  `json:"hash"` // hex SHA-256 of the key text
	CreatedAt   string  `json:"created_at"`
	RevokedAt   *string `json:"revoked_at,omitempty"`
}

// Principal is an authenticated API key: what a request may do and where.
type Principal struct {
	rec      *keyRecord
	project  *projectState
	dataset  uint32
	lastUsed atomic.Int64
	streams  atomic.Int32
	revoked  atomic.Bool // set by dropPrincipal: the key answers 401 from then on
	cfg      actors.KeyConfig
}

// KeyID is the key's id.
func (p *Principal) KeyID() string { return p.rec.ID }

// ProjectID is the id of the key's project.
func (p *Principal) ProjectID() string { return p.rec.ProjectID }

// Type is "public" or "secret".
func (p *Principal) Type() string { return p.rec.Type }

// Environment is "live" or "test".
func (p *Principal) Environment() string { return p.rec.Environment }

// CanRead reports the read permission (secret keys only).
func (p *Principal) CanRead() bool { return p.rec.Type == Secret }

// Permissions lists the key's permissions as /verify shows them.
func (p *Principal) Permissions() []string {
	if p.rec.Type == Secret {
		return []string{"read", "write"}
	}
	return []string{"write"}
}

// Project is the key's project.
func (p *Principal) Project() Project { return p.project.view() }

// AllowedOrigins are the project's CORS origins; empty allows any.
func (p *Principal) AllowedOrigins() []string { return p.project.rec.Load().AllowedOrigins }

// Plan is the project's plan name.
func (p *Principal) Plan() string { return p.project.rec.Load().Plan }

// Blocked reports whether the key's bucket of kind was full at now when its
// actor last decided, so a request can be refused before its body is read.
// It may be stale; the key actor's own decision is the authority.
func (p *Principal) Blocked(kind ratelimit.Kind, now time.Time) bool {
	return kind < ratelimit.None && now.Unix() < p.cfg.BlockedUntil[kind].Load()
}

// Dataset is the storage dataset the key reads and writes.
func (p *Principal) Dataset() uint32 { return p.dataset }

// Suppressed reports whether visitor was erased with suppression in this key's dataset.
func (p *Principal) Suppressed(visitor string) bool {
	return p.project.isSuppressed(p.dataset, visitor)
}

func (p *projectState) isSuppressed(ds uint32, visitor string) bool {
	m := p.suppressed.Load()
	return m != nil && (*m)[suppressKey(ds, visitor)]
}

func suppressKey(ds uint32, visitor string) string {
	return strconv.FormatUint(uint64(ds), 10) + "/" + visitor
}

// Definition is the project's event definition for name, or nil.
func (p *Principal) Definition(name string) *event.Definition {
	defs := p.project.definitions.Load()
	if defs == nil {
		return nil
	}
	return (*defs)[name]
}

// ReaderFor is a read-only principal for one environment of a project, for
// the admin side (dashboard analytics and live feed): it has no key, is never
// counted against a limit, and must only be used for reads.
func (e *Engine) ReaderFor(projectID, env string) (*Principal, error) {
	ps, ds, err := e.dataset(projectID, env)
	if err != nil {
		return nil, err
	}
	if env == "" {
		env = Live
	}
	return &Principal{rec: &keyRecord{ID: "admin", ProjectID: projectID, Type: Secret, Environment: env}, project: ps, dataset: ds}, nil
}

// projectOwned is a configuration record that belongs to a project.
type projectOwned interface {
	owner() string
	order() (createdAt, id string)
}

func (r *keyRecord) owner() string                 { return r.ProjectID }
func (r *keyRecord) order() (createdAt, id string) { return r.CreatedAt, r.ID }

// ofProject picks a project's records from m, oldest first (ties by id), so
// every admin list has the same stable order. The caller holds m's lock.
func ofProject[T projectOwned](m map[string]T, projectID string) []T {
	var out []T
	for _, r := range m {
		if r.owner() == projectID {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		ci, ii := out[i].order()
		cj, ij := out[j].order()
		if ci != cj {
			return ci < cj
		}
		return ii < ij
	})
	return out
}
