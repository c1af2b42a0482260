package engine

import (
	"encoding/json"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/eventd/eventd/actors"
	"github.com/eventd/eventd/engine/analytics"
	"github.com/eventd/eventd/engine/event"
	"github.com/eventd/eventd/engine/ids"
	"github.com/eventd/eventd/storage"
)

// Config record kinds of goals and funnels; ids are "<project id>/<goal or funnel id>".
const (
	kindGoal   = "goal"
	kindFunnel = "funnel"
)

// Per-project bounds, so a dashboard loop cannot make every commit evaluate
// thousands of goals.
const (
	MaxGoalsPerProject   = 100
	MaxFunnelsPerProject = 200
)

// Goal is a goal as the admin API shows it.
type Goal struct {
	ID string `json:"id"`
	analytics.GoalSpec
	CreatedAt string  `json:"created_at"`
	UpdatedAt *string `json:"updated_at,omitempty"`
}

// goalRecord is the stored form of a goal.
type goalRecord struct {
	Goal
	ProjectID string `json:"project_id"`
	// Seq orders records created in the same millisecond (created_at has
	// no finer unit and ids are random); 0 in records from before it.
	Seq int64 `json:"seq,omitempty"`
}

// Funnel is a saved funnel as the admin API shows it.
type Funnel struct {
	ID string `json:"id"`
	analytics.FunnelSpec
	CreatedAt string  `json:"created_at"`
	UpdatedAt *string `json:"updated_at,omitempty"`
}

type funnelRecord struct {
	Funnel
	ProjectID string `json:"project_id"`
	Seq       int64  `json:"seq,omitempty"` // as goalRecord.Seq
}

// analyticsState holds goals and funnels in memory and the goals actor.
// Admin changes take Engine.adminMu; the goals actor reads byDataset, a
// snapshot replaced on every change, without locks.
type analyticsState struct {
	mu        sync.RWMutex
	goals     map[string]*goalRecord   // by goal id
	funnels   map[string]*funnelRecord // by funnel id
	byDataset atomic.Pointer[map[uint32][]*analytics.Goal]
	pid       *actor.PID
	lastSeq   int64 // the last creation sequence given out (under Engine.adminMu)
}

// nextSeq is a creation sequence: Unix nanoseconds, strictly increasing.
func (a *analyticsState) nextSeq() int64 {
	a.lastSeq = max(a.lastSeq+1, time.Now().UnixNano())
	return a.lastSeq
}

// creation is where a goal or funnel record sorts: its project, then
// created_at, the creation sequence and the id.
type creation struct {
	project, at string
	seq         int64
	id          string
}

// before orders records by creation.
func (c creation) before(o creation) bool {
	if c.at != o.at {
		return c.at < o.at
	}
	if c.seq != o.seq {
		return c.seq < o.seq
	}
	return c.id < o.id
}

// inCreationOrder lists the records of one project, oldest first.
func inCreationOrder[R, T any](records map[string]R, projectID string, of func(R) (T, creation)) []T {
	type entry struct {
		v T
		c creation
	}
	var es []entry
	for _, r := range records {
		if v, c := of(r); c.project == projectID {
			es = append(es, entry{v, c})
		}
	}
	sort.Slice(es, func(i, j int) bool { return es[i].c.before(es[j].c) })
	out := make([]T, len(es))
	for i, e := range es {
		out[i] = e.v
	}
	return out
}

// Goals implements actors.GoalSource.
func (a *analyticsState) Goals(ds uint32) []*analytics.Goal {
	if m := a.byDataset.Load(); m != nil {
		return (*m)[ds]
	}
	return nil
}

// GoalDatasets implements actors.GoalSource.
func (a *analyticsState) GoalDatasets() []uint32 {
	m := a.byDataset.Load()
	if m == nil {
		return nil
	}
	out := make([]uint32, 0, len(*m))
	for ds := range *m {
		out = append(out, ds)
	}
	return out
}

// openAnalytics loads goals and funnels, starts the goals actor and feeds it
// from the broadcaster. Open calls it once the actor system exists.
func (e *Engine) openAnalytics() error {
	a := &analyticsState{goals: map[string]*goalRecord{}, funnels: map[string]*funnelRecord{}}
	e.an = a
	err := e.db.ScanConfig(kindGoal, func(_ string, v []byte) error {
		var r goalRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return err
		}
		a.goals[r.ID] = &r
		return nil
	})
	if err != nil {
		return err
	}
	err = e.db.ScanConfig(kindFunnel, func(_ string, v []byte) error {
		var r funnelRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return err
		}
		a.funnels[r.ID] = &r
		return nil
	})
	if err != nil {
		return err
	}
	e.rebuildGoals()
	a.pid = actors.NewGoals(e.system, e.db, goalHooks{a, e.hooks, e}, e.metrics, e.log) // goalHooks: webhooks.go
	e.system.Root.Send(e.bcast, &actors.AddConsumer{PID: a.pid})
	return nil
}

// closeAnalytics stops the goals actor once it has evaluated what the
// broadcaster handed it; Close calls it after the broadcaster stopped.
func (e *Engine) closeAnalytics() {
	if e.an != nil && e.an.pid != nil {
		_ = e.system.Root.PoisonFuture(e.an.pid).Wait()
	}
}

// rebuildGoals publishes the per-dataset snapshot of compiled goals;
// goals of deleted projects are left out.
func (e *Engine) rebuildGoals() {
	a := e.an
	m := map[uint32][]*analytics.Goal{}
	a.mu.RLock()
	for _, r := range a.goals {
		ds, ok := e.datasetOf(r.ProjectID, r.Environment)
		if !ok {
			continue
		}
		g := analytics.Compile(r.ID, r.GoalSpec)
		if ms, _, err := event.ParseTime(r.CreatedAt); err == nil {
			g.Since = ms
		}
		m[ds] = append(m[ds], g)
	}
	a.mu.RUnlock()
	for _, gs := range m {
		sort.Slice(gs, func(i, j int) bool { return gs[i].ID < gs[j].ID })
	}
	a.byDataset.Store(&m)
}

// datasetOf is the dataset of a project's environment.
func (e *Engine) datasetOf(projectID, env string) (uint32, bool) {
	e.mu.RLock()
	ps := e.projects[projectID]
	e.mu.RUnlock()
	if ps == nil {
		return 0, false
	}
	r := ps.rec.Load()
	if env == Test {
		return r.Datasets[1], true
	}
	return r.Datasets[0], true
}

// CreateGoal adds a goal to a project; it is evaluated on events committed from now on.
func (e *Engine) CreateGoal(projectID string, spec analytics.GoalSpec) (Goal, error) {
	if d := spec.Check(); d != nil {
		return Goal{}, &InputError{Details: d}
	}
	e.adminMu.Lock()
	defer e.adminMu.Unlock()
	ds, ok := e.datasetOf(projectID, spec.Environment)
	if !ok {
		return Goal{}, ErrNotFound
	}
	if n := len(e.goalsOf(projectID)); n >= MaxGoalsPerProject {
		return Goal{}, invalid("name", "a project has at most 100 goals")
	}
	r := &goalRecord{Goal: Goal{ID: ids.Random("goal_", 16), GoalSpec: spec, CreatedAt: nowText()}, ProjectID: projectID, Seq: e.an.nextSeq()}
	// A dataset's first goal starts its evaluation cursor, so a crash right
	// after this call does not skip the events committed meanwhile.
	if err := e.db.InitGoalCursor(ds, storage.IDAt(time.Now().UnixMilli())); err != nil {
		return Goal{}, err
	}
	if err := e.putJSON(kindGoal, projectID+"/"+r.ID, r); err != nil {
		return Goal{}, err
	}
	e.an.mu.Lock()
	e.an.goals[r.ID] = r
	e.an.mu.Unlock()
	e.rebuildGoals()
	return r.Goal, nil
}

func (e *Engine) goalsOf(projectID string) []Goal {
	e.an.mu.RLock()
	defer e.an.mu.RUnlock()
	return inCreationOrder(e.an.goals, projectID, func(r *goalRecord) (Goal, creation) {
		return r.Goal, creation{r.ProjectID, r.CreatedAt, r.Seq, r.ID}
	})
}

// ListGoals lists a project's goals, oldest first.
func (e *Engine) ListGoals(projectID string) ([]Goal, error) {
	if _, err := e.project(projectID); err != nil {
		return nil, err
	}
	out := e.goalsOf(projectID)
	if out == nil {
		out = []Goal{}
	}
	return out, nil
}

func (e *Engine) goalRecord(projectID, id string) (*goalRecord, error) {
	if _, err := e.project(projectID); err != nil {
		return nil, err
	}
	e.an.mu.RLock()
	r := e.an.goals[id]
	e.an.mu.RUnlock()
	if r == nil || r.ProjectID != projectID {
		return nil, ErrNotFound
	}
	return r, nil
}

// GetGoal reads one goal.
func (e *Engine) GetGoal(projectID, id string) (Goal, error) {
	r, err := e.goalRecord(projectID, id)
	if err != nil {
		return Goal{}, err
	}
	return r.Goal, nil
}

// UpdateGoal replaces a goal's definition; completions recorded so far are
// kept (a visitor who completed it does not complete it again).
func (e *Engine) UpdateGoal(projectID, id string, spec analytics.GoalSpec) (Goal, error) {
	if d := spec.Check(); d != nil {
		return Goal{}, &InputError{Details: d}
	}
	e.adminMu.Lock()
	defer e.adminMu.Unlock()
	old, err := e.goalRecord(projectID, id)
	if err != nil {
		return Goal{}, err
	}
	if ds, ok := e.datasetOf(projectID, spec.Environment); ok {
		if err := e.db.InitGoalCursor(ds, storage.IDAt(time.Now().UnixMilli())); err != nil {
			return Goal{}, err
		}
	}
	now := nowText()
	r := &goalRecord{Goal: Goal{ID: id, GoalSpec: spec, CreatedAt: old.CreatedAt, UpdatedAt: &now}, ProjectID: projectID, Seq: old.Seq}
	if err := e.putJSON(kindGoal, projectID+"/"+id, r); err != nil {
		return Goal{}, err
	}
	e.an.mu.Lock()
	e.an.goals[id] = r
	e.an.mu.Unlock()
	e.rebuildGoals()
	return r.Goal, nil
}

// DeleteGoal removes a goal and its completions.
func (e *Engine) DeleteGoal(projectID, id string) error {
	e.adminMu.Lock()
	defer e.adminMu.Unlock()
	if _, err := e.goalRecord(projectID, id); err != nil {
		return err
	}
	if err := e.db.DeleteConfig(kindGoal, projectID+"/"+id); err != nil {
		return err
	}
	e.an.mu.Lock()
	delete(e.an.goals, id)
	e.an.mu.Unlock()
	e.rebuildGoals()
	live, _ := e.datasetOf(projectID, Live)
	test, _ := e.datasetOf(projectID, Test)
	return e.db.DeleteGoalData(id, live, test)
}

// CreateFunnel saves a funnel (window defaults to 86400 s).
func (e *Engine) CreateFunnel(projectID string, spec analytics.FunnelSpec) (Funnel, error) {
	if d := spec.Check(); d != nil {
		return Funnel{}, &InputError{Details: d}
	}
	e.adminMu.Lock()
	defer e.adminMu.Unlock()
	if _, err := e.project(projectID); err != nil {
		return Funnel{}, err
	}
	if len(e.funnelsOf(projectID)) >= MaxFunnelsPerProject {
		return Funnel{}, invalid("name", "a project has at most 200 funnels")
	}
	r := &funnelRecord{Funnel: Funnel{ID: ids.Random("fnl_", 16), FunnelSpec: spec, CreatedAt: nowText()}, ProjectID: projectID, Seq: e.an.nextSeq()}
	if err := e.putJSON(kindFunnel, projectID+"/"+r.ID, r); err != nil {
		return Funnel{}, err
	}
	e.an.mu.Lock()
	e.an.funnels[r.ID] = r
	e.an.mu.Unlock()
	return r.Funnel, nil
}

func (e *Engine) funnelsOf(projectID string) []Funnel {
	e.an.mu.RLock()
	defer e.an.mu.RUnlock()
	return inCreationOrder(e.an.funnels, projectID, func(r *funnelRecord) (Funnel, creation) {
		return r.Funnel, creation{r.ProjectID, r.CreatedAt, r.Seq, r.ID}
	})
}

// ListFunnels lists a project's funnels, oldest first.
func (e *Engine) ListFunnels(projectID string) ([]Funnel, error) {
	if _, err := e.project(projectID); err != nil {
		return nil, err
	}
	out := e.funnelsOf(projectID)
	if out == nil {
		out = []Funnel{}
	}
	return out, nil
}

func (e *Engine) funnelRecord(projectID, id string) (*funnelRecord, error) {
	if _, err := e.project(projectID); err != nil {
		return nil, err
	}
	e.an.mu.RLock()
	r := e.an.funnels[id]
	e.an.mu.RUnlock()
	if r == nil || r.ProjectID != projectID {
		return nil, ErrNotFound
	}
	return r, nil
}

// GetFunnel reads one funnel.
func (e *Engine) GetFunnel(projectID, id string) (Funnel, error) {
	r, err := e.funnelRecord(projectID, id)
	if err != nil {
		return Funnel{}, err
	}
	return r.Funnel, nil
}

// UpdateFunnel replaces a funnel.
func (e *Engine) UpdateFunnel(projectID, id string, spec analytics.FunnelSpec) (Funnel, error) {
	if d := spec.Check(); d != nil {
		return Funnel{}, &InputError{Details: d}
	}
	e.adminMu.Lock()
	defer e.adminMu.Unlock()
	old, err := e.funnelRecord(projectID, id)
	if err != nil {
		return Funnel{}, err
	}
	now := nowText()
	r := &funnelRecord{Funnel: Funnel{ID: id, FunnelSpec: spec, CreatedAt: old.CreatedAt, UpdatedAt: &now}, ProjectID: projectID, Seq: old.Seq}
	if err := e.putJSON(kindFunnel, projectID+"/"+id, r); err != nil {
		return Funnel{}, err
	}
	e.an.mu.Lock()
	e.an.funnels[id] = r
	e.an.mu.Unlock()
	return r.Funnel, nil
}

// DeleteFunnel removes a funnel.
func (e *Engine) DeleteFunnel(projectID, id string) error {
	e.adminMu.Lock()
	defer e.adminMu.Unlock()
	if _, err := e.funnelRecord(projectID, id); err != nil {
		return err
	}
	if err := e.db.DeleteConfig(kindFunnel, projectID+"/"+id); err != nil {
		return err
	}
	e.an.mu.Lock()
	delete(e.an.funnels, id)
	e.an.mu.Unlock()
	return nil
}

// ForgetProjectAnalytics drops a deleted project's goals and funnels (their
// completions went with its datasets). DeleteProject should call it; until
// then the records stay on disk, unreachable: every goal and funnel call
// checks the project first, and rebuildGoals skips missing projects.
func (e *Engine) ForgetProjectAnalytics(projectID string) error {
	for _, g := range e.goalsOf(projectID) {
		if err := e.db.DeleteConfig(kindGoal, projectID+"/"+g.ID); err != nil {
			return err
		}
		e.an.mu.Lock()
		delete(e.an.goals, g.ID)
		e.an.mu.Unlock()
	}
	for _, f := range e.funnelsOf(projectID) {
		if err := e.db.DeleteConfig(kindFunnel, projectID+"/"+f.ID); err != nil {
			return err
		}
		e.an.mu.Lock()
		delete(e.an.funnels, f.ID)
		e.an.mu.Unlock()
	}
	e.rebuildGoals()
	return nil
}

// principalGoals are the goals of p's project and environment, oldest first.
func (e *Engine) principalGoals(p *Principal) []Goal {
	var out []Goal
	for _, g := range e.goalsOf(p.project.rec.Load().ID) {
		if strings.EqualFold(g.Environment, p.Environment()) {
			out = append(out, g)
		}
	}
	return out
}
