package engine

import (
	"encoding/json"
	"sort"
	"sync"
	"time"

	"github.com/eventd/eventd/engine/event"
	"github.com/eventd/eventd/engine/ids"
)

// Config record kinds of this file.
const (
	kindJob      = "job"
	kindSuppress = "suppress"
)

// Job states.
const (
	JobRunning   = "running"
	JobSucceeded = "succeeded"
	JobFailed    = "failed"
)

// Job is a background task and its progress, as GET /admin/v1/jobs/{id} shows it.
type Job struct {
	ID           string `json:"id"`
	Type         string `json:"type"` // "erase_visitor"
	ProjectID    string `json:"project_id"`
	Environment  string `json:"environment"`
	VisitorID    string `json:"visitor_id"`
	Suppress     bool   `json:"suppress"`
	Status       string `json:"status"`
	EventsErased int    `json:"events_erased"`
	Error        string `json:"error,omitempty"`
	CreatedAt    string `json:"created_at"`
	FinishedAt   string `json:"finished_at,omitempty"`
}

// jobs tracks background jobs; records are persisted so a restart resumes
// unfinished ones (erasing is idempotent).
type jobs struct {
	mu   sync.Mutex
	byID map[string]*Job
	wg   sync.WaitGroup
}

// EraseVisitor starts a background job that deletes every event of a
// visitor in one environment of a project, from every index and rollup.
// With suppress, later events of that visitor are refused with 422.
func (e *Engine) EraseVisitor(projectID, env, visitor string, suppress bool) (Job, error) {
	if !event.ValidVisitorID(visitor) {
		return Job{}, invalid("visitor_id", event.MsgVisitorID)
	}
	if env == "" {
		env = Live
	}
	ps, ds, err := e.dataset(projectID, env)
	if err != nil {
		return Job{}, err
	}
	if suppress {
		// Suppress first, so nothing new of the visitor lands while the job runs.
		if err := e.db.PutConfig(kindSuppress, suppressKey(ds, visitor), []byte(projectID)); err != nil {
			return Job{}, err
		}
		e.addSuppressed(ps, ds, visitor)
	}
	j := &Job{ID: ids.Random("job_", 16), Type: "erase_visitor", ProjectID: projectID, Environment: env,
		VisitorID: visitor, Suppress: suppress, Status: JobRunning, CreatedAt: nowText()}
	if err := e.putJSON(kindJob, j.ID, j); err != nil {
		return Job{}, err
	}
	e.startJob(j, ds)
	return *j, nil
}

func (e *Engine) addSuppressed(ps *projectState, ds uint32, visitor string) {
	e.adminMu.Lock()
	defer e.adminMu.Unlock()
	next := map[string]bool{suppressKey(ds, visitor): true}
	if old := ps.suppressed.Load(); old != nil {
		for k := range *old {
			next[k] = true
		}
	}
	ps.suppressed.Store(&next)
}

func (e *Engine) startJob(j *Job, ds uint32) {
	e.jobs.mu.Lock()
	e.jobs.byID[j.ID] = j
	e.jobs.mu.Unlock()
	e.jobs.wg.Add(1)
	go func() {
		defer e.jobs.wg.Done()
		n, err := e.db.EraseVisitor(ds, j.VisitorID, func(done int) {
			e.jobs.mu.Lock()
			j.EventsErased = done
			e.jobs.mu.Unlock()
		})
		e.jobs.mu.Lock()
		j.EventsErased = n
		j.FinishedAt = nowText()
		if err != nil {
			j.Status, j.Error = JobFailed, "erasing failed; see the server log"
			e.log.Error("erase visitor", "job", j.ID, "err", err)
		} else {
			j.Status = JobSucceeded
		}
		rec := *j
		e.jobs.mu.Unlock()
		if err := e.putJSON(kindJob, rec.ID, &rec); err != nil {
			e.log.Error("save job", "job", rec.ID, "err", err)
		}
	}()
}

// GetJob reports a job's progress.
func (e *Engine) GetJob(id string) (Job, error) {
	e.jobs.mu.Lock()
	defer e.jobs.mu.Unlock()
	j := e.jobs.byID[id]
	if j == nil {
		return Job{}, ErrNotFound
	}
	return *j, nil
}

// loadJobs reads job records and suppressions, and resumes unfinished jobs.
// It runs in Open after the projects are loaded and the actors started.
func (e *Engine) loadJobs() error {
	e.jobs.byID = make(map[string]*Job)
	err := e.db.ScanConfig(kindSuppress, func(key string, v []byte) error {
		ps := e.projects[string(v)]
		if ps == nil {
			return nil
		}
		next := map[string]bool{key: true}
		if old := ps.suppressed.Load(); old != nil {
			for k := range *old {
				next[k] = true
			}
		}
		ps.suppressed.Store(&next)
		return nil
	})
	if err != nil {
		return err
	}
	var resume []*Job
	err = e.db.ScanConfig(kindJob, func(_ string, v []byte) error {
		var j Job
		if err := json.Unmarshal(v, &j); err != nil {
			return err
		}
		e.jobs.byID[j.ID] = &j
		if j.Status == JobRunning {
			resume = append(resume, &j)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Slice(resume, func(a, b int) bool { return resume[a].CreatedAt < resume[b].CreatedAt })
	for _, j := range resume {
		if _, ds, err := e.dataset(j.ProjectID, j.Environment); err == nil {
			e.log.Info("resuming job", "job", j.ID, "type", j.Type)
			e.startJob(j, ds)
		}
	}
	return nil
}

// retentionCutoff is where a dataset's retention starts: the UTC midnight
// that many days ago, so whole days expire and day rollups stay exact for
// the days kept; 0 when everything is kept.
func retentionCutoff(days int, now time.Time) int64 {
	if days <= 0 {
		return 0
	}
	const day = 24 * time.Hour
	return now.UTC().Truncate(day).Add(-time.Duration(days) * day).UnixMilli()
}

// cutoff is the retention cutoff of p's dataset.
func (p *Principal) cutoff(now time.Time) int64 {
	r := p.project.rec.Load().RetentionDays
	if p.rec.Environment == Test {
		return retentionCutoff(r.Test, now)
	}
	return retentionCutoff(r.Live, now)
}

// expire applies every project's retention once.
func (e *Engine) expire(now time.Time) {
	e.mu.RLock()
	type target struct {
		ds     uint32
		cutoff int64
	}
	var ts []target
	for _, ps := range e.projects {
		r := ps.rec.Load()
		for i, days := range []int{r.RetentionDays.Live, r.RetentionDays.Test} {
			if c := retentionCutoff(days, now); c > 0 {
				ts = append(ts, target{r.Datasets[i], c})
			}
		}
	}
	e.mu.RUnlock()
	for _, t := range ts {
		if err := e.expireCursors(t.ds, t.cutoff); err != nil {
			e.log.Error("retention: cursors", "dataset", t.ds, "err", err)
			continue // deleting now could make a cursor skip events
		}
		n, err := e.db.ExpireBefore(t.ds, t.cutoff)
		if err != nil {
			e.log.Error("retention", "dataset", t.ds, "err", err)
			continue
		}
		if n > 0 {
			e.log.Info("retention deleted expired events", "dataset", t.ds, "events", n)
		}
	}
}
