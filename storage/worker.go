package storage

import "time"

// worker runs one of the store's background tasks (the visitor memory's
// sealer, the late memory's writer) every interval and whenever kicked,
// and with first also once at its start, until closed.
type worker struct {
	stop, done chan struct{}
}

// startWorker starts run on its own goroutine.
func startWorker(every time.Duration, kick <-chan struct{}, first bool, run func()) *worker {
	w := &worker{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		t := time.NewTicker(every)
		defer t.Stop()
		if first {
			run()
		}
		for {
			select {
			case <-w.stop:
				return
			case <-t.C:
			case <-kick:
			}
			run()
		}
	}()
	return w
}

// close stops the worker and waits for its task to return.
func (w *worker) close() {
	close(w.stop)
	<-w.done
}
