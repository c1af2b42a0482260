package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/eventd/eventd/actors"
	"github.com/eventd/eventd/engine/event"
	"github.com/eventd/eventd/engine/ids"
	"github.com/eventd/eventd/engine/ratelimit"
	"github.com/eventd/eventd/storage"
)

// Config record kinds in storage.
const (
	kindProject    = "project"
	kindKey        = "key"
	kindDefinition = "definition"
	kindMeta       = "meta"
)

// keyLen is the length of every API key: prefix (8) and 32 base62 characters.
const keyLen = 8 + 32

// InputError is an admin request that fails validation; Details maps fields to problems.
type InputError struct {
	Details map[string]string
}

// Error says that the input was invalid; Details says where.
func (e *InputError) Error() string { return "invalid input" }

func invalid(field, msg string) error { return &InputError{Details: map[string]string{field: msg}} }

// load reads every configuration record into memory.
func (e *Engine) load() error {
	if v, err := e.db.GetConfig(kindMeta, "next_dataset"); err == nil {
		n, _ := strconv.ParseUint(string(v), 10, 32)
		e.nextDS = uint32(n)
	} else if !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	if e.nextDS == 0 {
		e.nextDS = 1
	}
	err := e.db.ScanConfig(kindProject, func(_ string, v []byte) error {
		var r projectRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return err
		}
		ps := &projectState{}
		ps.setRecord(&r)
		defs := map[string]*event.Definition{}
		ps.definitions.Store(&defs)
		e.projects[r.ID] = ps
		return nil
	})
	if err != nil {
		return err
	}
	err = e.db.ScanConfig(kindDefinition, func(id string, v []byte) error {
		var d event.Definition
		if err := json.Unmarshal(v, &d); err != nil {
			return err
		}
		projectID, _, _ := strings.Cut(id, "/")
		if ps := e.projects[projectID]; ps != nil {
			(*ps.definitions.Load())[d.Name] = &d
		}
		return nil
	})
	if err != nil {
		return err
	}
	return e.db.ScanConfig(kindKey, func(_ string, v []byte) error {
		var r keyRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return err
		}
		e.keyRecords[r.ID] = &r
		if r.RevokedAt == nil && e.projects[r.ProjectID] != nil {
			e.addPrincipal(&r, actors.LoadLastUsed(e.db, r.ID))
		}
		return nil
	})
}

func (e *Engine) addPrincipal(r *keyRecord, lastUsed int64) {
	ps := e.projects[r.ProjectID]
	p := &Principal{rec: r, project: ps}
	if r.Environment == Test {
		p.dataset = ps.rec.Load().Datasets[1]
	} else {
		p.dataset = ps.rec.Load().Datasets[0]
	}
	p.lastUsed.Store(lastUsed)
	p.cfg = actors.KeyConfig{ID: r.ID, Limits: func() ratelimit.Limits { return *ps.limits.Load() }, LastUsed: &p.lastUsed}
	e.wireKeyAlerts(p) // usage alerts (alerts.go)
	h, _ := hex.DecodeString(r.Hash)
	var hash [32]byte
	copy(hash[:], h)
	e.keysByHash[hash] = p
	e.keysByID[r.ID] = p
}

// ProjectInput is the body of project create and update; nil fields are unchanged.
type ProjectInput struct {
	Name           *string           `json:"name"`
	Plan           *string           `json:"plan"`
	Limits         *ratelimit.Limits `json:"limits"`
	ClearLimits    bool              `json:"-"` // "limits": null in a PATCH
	AllowedOrigins *[]string         `json:"allowed_origins"`
	RetentionDays  *Retention        `json:"retention_days"`
	// SessionTimeoutMinutes: 1 to 1440.
	SessionTimeoutMinutes *int `json:"session_timeout_minutes"`
}

func checkProjectInput(in *ProjectInput, create bool) error {
	d := map[string]string{}
	if in.Name == nil {
		if create {
			d["name"] = "is required"
		}
	} else if n := utf8.RuneCountInString(*in.Name); n < 1 || n > 200 {
		d["name"] = "must be 1-200 characters"
	}
	if in.Plan != nil && !slices.Contains(Plans, *in.Plan) {
		d["plan"] = "must be one of free, professional, enterprise"
	}
	if l := in.Limits; l != nil && (l.Minute <= 0 || l.Hour <= 0 || l.Day <= 0) {
		d["limits"] = "minute, hour and day must be positive integers"
	}
	if r := in.RetentionDays; r != nil && (r.Live < 0 || r.Test < 0 || r.Live > 36500 || r.Test > 36500) {
		d["retention_days"] = "live and test must be whole days from 0 (keep everything) to 36500"
	}
	if m := in.SessionTimeoutMinutes; m != nil && (*m < 1 || *m > 1440) {
		d["session_timeout_minutes"] = "must be whole minutes from 1 to 1440"
	}
	if in.AllowedOrigins != nil {
		for _, o := range *in.AllowedOrigins {
			if !validOrigin(o) {
				d["allowed_origins"] = "each origin must look like https://example.com (scheme, host, optional port)"
			}
		}
	}
	if len(d) > 0 {
		return &InputError{Details: d}
	}
	return nil
}

func validOrigin(o string) bool {
	rest, ok := strings.CutPrefix(o, "https://")
	if !ok {
		rest, ok = strings.CutPrefix(o, "http://")
	}
	return ok && rest != "" && !strings.ContainsAny(rest, "/?# ")
}

// applyTo sets the fields the input carries; absent ones stay as they are.
func (in *ProjectInput) applyTo(r *projectRecord) {
	if in.Name != nil {
		r.Name = *in.Name
	}
	if in.Plan != nil {
		r.Plan = *in.Plan
	}
	if in.Limits != nil {
		r.CustomLimits = in.Limits
	} else if in.ClearLimits {
		r.CustomLimits = nil
	}
	if in.AllowedOrigins != nil {
		r.AllowedOrigins = *in.AllowedOrigins
	}
	if in.RetentionDays != nil {
		r.RetentionDays = *in.RetentionDays
	}
	if in.SessionTimeoutMinutes != nil {
		r.SessionTimeoutMinutes = *in.SessionTimeoutMinutes
	}
}

// CreateProject makes a project with its two datasets.
func (e *Engine) CreateProject(in ProjectInput) (Project, error) {
	if err := checkProjectInput(&in, true); err != nil {
		return Project{}, err
	}
	e.adminMu.Lock()
	defer e.adminMu.Unlock()
	r := &projectRecord{ID: ids.Random("proj_", 16), Plan: "free", CreatedAt: nowText(),
		Datasets: [2]uint32{e.nextDS, e.nextDS + 1}}
	in.applyTo(r)
	if err := e.db.PutConfig(kindMeta, "next_dataset", []byte(strconv.FormatUint(uint64(e.nextDS+2), 10))); err != nil {
		return Project{}, err
	}
	e.nextDS += 2
	if err := e.putJSON(kindProject, r.ID, r); err != nil {
		return Project{}, err
	}
	ps := &projectState{}
	ps.setRecord(r)
	defs := map[string]*event.Definition{}
	ps.definitions.Store(&defs)
	e.mu.Lock()
	e.projects[r.ID] = ps
	e.mu.Unlock()
	return ps.view(), nil
}

// Projects lists every project, oldest first.
func (e *Engine) Projects() []Project {
	e.mu.RLock()
	states := make([]*projectState, 0, len(e.projects))
	for _, ps := range e.projects {
		states = append(states, ps)
	}
	e.mu.RUnlock()
	// Dataset numbers are handed out in creation order, so they order
	// projects made within one millisecond too (created_at would tie).
	sort.Slice(states, func(i, j int) bool {
		return states[i].rec.Load().Datasets[0] < states[j].rec.Load().Datasets[0]
	})
	out := make([]Project, len(states))
	for i, ps := range states {
		out[i] = ps.view()
	}
	return out
}

func (e *Engine) project(id string) (*projectState, error) {
	e.mu.RLock()
	ps := e.projects[id]
	e.mu.RUnlock()
	if ps == nil {
		return nil, ErrNotFound
	}
	return ps, nil
}

// GetProject reads one project.
func (e *Engine) GetProject(id string) (Project, error) {
	ps, err := e.project(id)
	if err != nil {
		return Project{}, err
	}
	return ps.view(), nil
}

// UpdateProject changes name, plan, custom limits or allowed origins.
func (e *Engine) UpdateProject(id string, in ProjectInput) (Project, error) {
	if err := checkProjectInput(&in, false); err != nil {
		return Project{}, err
	}
	e.adminMu.Lock()
	defer e.adminMu.Unlock()
	ps, err := e.project(id)
	if err != nil {
		return Project{}, err
	}
	r := *ps.rec.Load()
	in.applyTo(&r)
	if err := e.putJSON(kindProject, r.ID, &r); err != nil {
		return Project{}, err
	}
	ps.setRecord(&r)
	return ps.view(), nil
}

// DeleteProject revokes the project's keys and deletes its data and configuration.
func (e *Engine) DeleteProject(id string) error {
	e.adminMu.Lock()
	defer e.adminMu.Unlock()
	ps, err := e.project(id)
	if err != nil {
		return err
	}
	// Keys stop working and open streams close before the (possibly long)
	// deletion of the data, so both happen at once, as for a revoked key.
	recs := e.keyRecordsOf(id)
	ps.deleted.Store(true)
	for _, r := range recs {
		e.dropPrincipal(r)
	}
	e.notifyRevoked(Revocation{ProjectID: id, Reason: ReasonProjectDeleted})
	for _, r := range recs {
		if err := e.db.DeleteConfig(kindKey, r.ID); err != nil {
			return err
		}
	}
	for name := range *ps.definitions.Load() {
		if err := e.db.DeleteConfig(kindDefinition, id+"/"+name); err != nil {
			return err
		}
	}
	rec := ps.rec.Load()
	// The streams closing with 4001 must not write their cursors back
	// into the datasets deleted below.
	e.forgetCursors(rec.Datasets[0], rec.Datasets[1])
	if err := e.db.DeleteDatasets(rec.Datasets[0], rec.Datasets[1]); err != nil {
		return err
	}
	if err := e.ForgetProjectAnalytics(id); err != nil {
		return err
	}
	if err := e.forgetProjectHooks(id); err != nil { // webhooks and usage alerts (webhooks.go)
		return err
	}
	if err := e.db.DeleteConfig(kindProject, id); err != nil {
		return err
	}
	e.mu.Lock()
	delete(e.projects, id)
	e.mu.Unlock()
	return nil
}

func (e *Engine) keyRecordsOf(projectID string) []*keyRecord {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return ofProject(e.keyRecords, projectID)
}

// dropPrincipal makes a key unusable at once and stops its actor.
func (e *Engine) dropPrincipal(r *keyRecord) {
	e.mu.Lock()
	p := e.keysByID[r.ID]
	if p != nil {
		h, _ := hex.DecodeString(r.Hash)
		var hash [32]byte
		copy(hash[:], h)
		delete(e.keysByHash, hash)
		delete(e.keysByID, r.ID)
	}
	delete(e.keyRecords, r.ID)
	e.mu.Unlock()
	if p != nil {
		p.revoked.Store(true)
		if e.keys != nil {
			e.keys.Forget(r.ID)
		}
	}
}

// KeyInput is the body of key creation.
type KeyInput struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Environment string `json:"environment"`
}

// CreatedKey is a new key with its text, shown only once.
type CreatedKey struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Type        string `json:"type"`
	Environment string `json:"environment"`
	Prefix      string `json:"prefix"`
	Key         string `json:"key"`
	CreatedAt   string `json:"created_at"`
}

// CreateKey makes an API key; only its SHA-256 is stored.
func (e *Engine) CreateKey(projectID string, in KeyInput) (CreatedKey, error) {
	d := map[string]string{}
	if n := utf8.RuneCountInString(in.Name); n < 1 || n > 200 {
		d["name"] = "must be 1-200 characters"
	}
	if in.Type != Public && in.Type != Secret {
		d["type"] = "must be public or secret"
	}
	if in.Environment != Live && in.Environment != Test {
		d["environment"] = "must be live or test"
	}
	if len(d) > 0 {
		return CreatedKey{}, &InputError{Details: d}
	}
	e.adminMu.Lock()
	defer e.adminMu.Unlock()
	if _, err := e.project(projectID); err != nil {
		return CreatedKey{}, err
	}
	prefix := "pk_"
	if in.Type == Secret {
		prefix = "sk_"
	}
	prefix += in.Environment + "_"
	text := ids.Random(prefix, 32)
	sum := sha256.Sum256([]byte(text))
	r := &keyRecord{ID: ids.Random("key_", 16), ProjectID: projectID, Name: in.Name, Type: in.Type,
		Environment: in.Environment, Prefix: text[:len(prefix)+4], Hash: hex.EncodeToString(sum[:]), CreatedAt: nowText()}
	if err := e.putJSON(kindKey, r.ID, r); err != nil {
		return CreatedKey{}, err
	}
	e.mu.Lock()
	e.keyRecords[r.ID] = r
	e.addPrincipal(r, 0)
	e.mu.Unlock()
	return CreatedKey{ID: r.ID, Name: r.Name, Type: r.Type, Environment: r.Environment, Prefix: r.Prefix, Key: text, CreatedAt: r.CreatedAt}, nil
}

// Keys lists a project's keys, revoked ones included, never their text.
func (e *Engine) Keys(projectID string) ([]Key, error) {
	if _, err := e.project(projectID); err != nil {
		return nil, err
	}
	recs := e.keyRecordsOf(projectID)
	out := make([]Key, 0, len(recs))
	for _, r := range recs {
		k := Key{ID: r.ID, ProjectID: r.ProjectID, Name: r.Name, Type: r.Type, Environment: r.Environment,
			Prefix: r.Prefix, CreatedAt: r.CreatedAt, RevokedAt: r.RevokedAt}
		e.mu.RLock()
		p := e.keysByID[r.ID]
		e.mu.RUnlock()
		last := int64(0)
		if p != nil {
			last = p.lastUsed.Load()
		} else {
			last = actors.LoadLastUsed(e.db, r.ID)
		}
		if last > 0 {
			s := msText(last)
			k.LastUsedAt = &s
		}
		out = append(out, k)
	}
	return out, nil
}

// RevokeKey revokes a key: it answers 401 from the next request on, and
// its open streams are told to close (OnRevoked).
func (e *Engine) RevokeKey(keyID string) error {
	e.adminMu.Lock()
	defer e.adminMu.Unlock()
	e.mu.RLock()
	r := e.keyRecords[keyID]
	e.mu.RUnlock()
	if r == nil || r.RevokedAt != nil {
		return ErrNotFound
	}
	rev := *r
	now := nowText()
	rev.RevokedAt = &now
	if err := e.putJSON(kindKey, rev.ID, &rev); err != nil {
		return err
	}
	e.dropPrincipal(r)
	e.mu.Lock()
	e.keyRecords[rev.ID] = &rev
	e.mu.Unlock()
	e.notifyRevoked(Revocation{ProjectID: r.ProjectID, KeyID: r.ID, Reason: ReasonKeyRevoked})
	return nil
}

// Definitions lists a project's event definitions by name.
func (e *Engine) Definitions(projectID string) ([]event.Definition, error) {
	ps, err := e.project(projectID)
	if err != nil {
		return nil, err
	}
	defs := *ps.definitions.Load()
	out := make([]event.Definition, 0, len(defs))
	for _, d := range defs {
		out = append(out, *d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Definition reads one event definition.
func (e *Engine) Definition(projectID, name string) (event.Definition, error) {
	ps, err := e.project(projectID)
	if err != nil {
		return event.Definition{}, err
	}
	d := (*ps.definitions.Load())[name]
	if d == nil {
		return event.Definition{}, ErrNotFound
	}
	return *d, nil
}

// PutDefinition creates (create=true: 409 if it exists) or replaces an event definition.
func (e *Engine) PutDefinition(projectID string, d event.Definition, create bool) (event.Definition, error) {
	if details := d.Check(); len(details) > 0 {
		return d, &InputError{Details: details}
	}
	if d.Properties == nil {
		d.Properties = []event.PropertyDef{}
	}
	e.adminMu.Lock()
	defer e.adminMu.Unlock()
	ps, err := e.project(projectID)
	if err != nil {
		return d, err
	}
	old := *ps.definitions.Load()
	_, exists := old[d.Name]
	if create && exists {
		return d, ErrConflict
	}
	if !create && !exists {
		return d, ErrNotFound
	}
	if err := e.putJSON(kindDefinition, projectID+"/"+d.Name, &d); err != nil {
		return d, err
	}
	next := make(map[string]*event.Definition, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[d.Name] = &d
	ps.definitions.Store(&next)
	return d, nil
}

// DeleteDefinition removes an event definition.
func (e *Engine) DeleteDefinition(projectID, name string) error {
	e.adminMu.Lock()
	defer e.adminMu.Unlock()
	ps, err := e.project(projectID)
	if err != nil {
		return err
	}
	old := *ps.definitions.Load()
	if old[name] == nil {
		return ErrNotFound
	}
	if err := e.db.DeleteConfig(kindDefinition, projectID+"/"+name); err != nil {
		return err
	}
	next := make(map[string]*event.Definition, len(old))
	for k, v := range old {
		if k != name {
			next[k] = v
		}
	}
	ps.definitions.Store(&next)
	return nil
}

// Bootstrap is what a first start creates: the default project and two test keys.
type Bootstrap struct {
	Project   Project
	SecretKey CreatedKey
	PublicKey CreatedKey
}

// EnsureDefault creates project "default" with a secret and a public test key
// when there is no project at all; it returns nil when there already was one.
func (e *Engine) EnsureDefault() (*Bootstrap, error) {
	if len(e.Projects()) > 0 {
		return nil, nil
	}
	name := "default"
	p, err := e.CreateProject(ProjectInput{Name: &name})
	if err != nil {
		return nil, err
	}
	sk, err := e.CreateKey(p.ID, KeyInput{Name: "default secret", Type: Secret, Environment: Test})
	if err != nil {
		return nil, err
	}
	pk, err := e.CreateKey(p.ID, KeyInput{Name: "default public", Type: Public, Environment: Test})
	if err != nil {
		return nil, err
	}
	return &Bootstrap{Project: p, SecretKey: sk, PublicKey: pk}, nil
}

func (e *Engine) putJSON(kind, id string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return e.db.PutConfig(kind, id, b)
}
