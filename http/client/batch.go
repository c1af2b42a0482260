package client

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrQueueFull is returned by Enqueue when the background queue is full:
// the event is not queued, and the caller decides whether to drop or Track it.
var ErrQueueFull = errors.New("eventd: background queue is full")

// ErrClosed is returned by Enqueue and Flush after Close.
var ErrClosed = errors.New("eventd: client is closed")

// batcher is the background sender behind Enqueue: one goroutine, started
// on first use, so clients that never enqueue cost nothing.
type batcher struct {
	c      *Client
	queue  chan Event
	flushc chan flushReq
	done   chan struct{} // closed when the goroutine ends
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.RWMutex // guards closed against sends on queue
	closed bool
}

type flushReq struct {
	ctx   context.Context
	final bool
	res   chan error
}

// batcher returns the running batcher, starting it if create is set.
func (c *Client) batcher(create bool) *batcher {
	c.bmu.Lock()
	defer c.bmu.Unlock()
	if c.b == nil && create {
		b := &batcher{c: c, queue: make(chan Event, c.queueSize), flushc: make(chan flushReq), done: make(chan struct{})}
		b.ctx, b.cancel = context.WithCancel(context.Background())
		c.b = b
		go b.run()
	}
	return c.b
}

// Enqueue queues e for the background batcher and returns at once. The event
// gets its timestamp and idempotency key now, so neither queueing nor retries
// change what is stored. Call Close before the program exits.
func (c *Client) Enqueue(e Event) error {
	if e.Timestamp.IsZero() {
		e.Timestamp = time.Now()
	}
	if e.IdempotencyKey == "" {
		e.IdempotencyKey = newKey()
	}
	b := c.batcher(true)
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return ErrClosed
	}
	select {
	case b.queue <- e:
		return nil
	default:
		return ErrQueueFull
	}
}

// Flush sends everything queued so far and waits for it; it returns the
// failures of that send (also reported to the error handler).
func (c *Client) Flush(ctx context.Context) error {
	b := c.batcher(false)
	if b == nil {
		return nil
	}
	b.mu.RLock()
	closed := b.closed
	b.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	return b.flush(ctx, false)
}

// Close flushes the queue and stops the batcher. When ctx ends first, the
// events not yet stored go to the error handler and Close returns the error.
func (c *Client) Close(ctx context.Context) error {
	c.bmu.Lock()
	b := c.b
	if b == nil {
		// Never used: a closed, idle batcher makes later Enqueue calls fail as documented.
		c.b = &batcher{closed: true, done: make(chan struct{})}
		close(c.b.done)
		c.bmu.Unlock()
		return nil
	}
	c.bmu.Unlock()
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	// A send that the ticker started must not outlive Close's deadline.
	stop := context.AfterFunc(ctx, b.cancel)
	defer stop()
	err := b.flush(ctx, true)
	b.cancel()
	<-b.done
	return err
}

func (b *batcher) flush(ctx context.Context, final bool) error {
	r := flushReq{ctx: ctx, final: final, res: make(chan error, 1)}
	select {
	case b.flushc <- r:
	case <-b.done:
		return ErrClosed
	case <-ctx.Done():
		if !final {
			return ctx.Err()
		}
		// The final flush must still run so queued events reach the error handler.
		b.flushc <- r
	}
	select {
	case err := <-r.res:
		return err
	case <-ctx.Done():
		if final {
			return <-r.res
		}
		return ctx.Err()
	}
}

func (b *batcher) run() {
	defer close(b.done)
	size := b.c.batchSize
	tick := time.NewTicker(b.c.flushEvery)
	defer tick.Stop()
	buf := make([]Event, 0, size)
	send := func(ctx context.Context) error {
		if len(buf) == 0 {
			return nil
		}
		err := b.c.sendQueued(ctx, buf)
		buf = make([]Event, 0, size) // the handler may keep the old slice
		return err
	}
	// aborted keeps the failures of background sends cut short by Close's
	// deadline, so that Close reports them; once b.ctx is cancelled nothing
	// more is sent in the background and the final flush handles the rest.
	var aborted []error
	background := func() {
		if b.ctx.Err() != nil {
			return
		}
		if err := send(b.ctx); err != nil && b.ctx.Err() != nil {
			aborted = append(aborted, err)
		}
	}
	for {
		select {
		case e := <-b.queue:
			buf = append(buf, e)
			if len(buf) >= size {
				background()
			}
		case <-tick.C:
			background()
		case r := <-b.flushc:
			errs := aborted
			aborted = nil
			for drained := false; !drained; {
				select {
				case e := <-b.queue:
					buf = append(buf, e)
					if len(buf) >= size {
						errs = append(errs, send(r.ctx))
					}
				default:
					drained = true
				}
			}
			errs = append(errs, send(r.ctx))
			r.res <- errors.Join(errs...)
			if r.final {
				return
			}
		}
	}
}

// sendQueued stores one batch, reporting what could not be stored to the error handler.
func (c *Client) sendQueued(ctx context.Context, events []Event) error {
	res, err := c.TrackBatch(ctx, events)
	if err != nil {
		c.onError(err, events)
		return err
	}
	var errs []error
	for i, it := range res.Results {
		if e := it.Err(); e != nil && i < len(events) {
			c.onError(e, events[i:i+1])
			errs = append(errs, e)
		}
	}
	return errors.Join(errs...)
}
