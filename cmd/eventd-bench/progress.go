package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/eventd/eventd/bench"
)

// progress keeps one line on stderr up to date with \r while a subject runs.
// When stderr is not a terminal (CI logs, make bench | tee) it prints one
// line per finished subject instead of hundreds of redraws.
type progress struct {
	w      io.Writer
	tty    bool
	mu     sync.Mutex
	label  string
	unit   string
	per    int
	d      time.Duration
	start  time.Time
	src    func() (done, ok uint64)
	extra  func() string
	width  int
	logged time.Time // last periodic line when not on a terminal
	quit   chan struct{}
	closed sync.Once
	wg     sync.WaitGroup
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w, quit: make(chan struct{})}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.quit:
				return
			case <-t.C:
				if p.tty {
					p.draw()
				} else {
					p.logLong()
				}
			}
		}
	}()
	return p
}

func (p *progress) begin(label string, d time.Duration, unit string, per int) {
	p.mu.Lock()
	p.label, p.d, p.unit, p.per, p.start, p.src, p.extra = label, d, unit, per, time.Now(), nil, nil
	p.mu.Unlock()
	if p.tty {
		p.draw()
	}
}

func (p *progress) source(f func() (uint64, uint64)) {
	p.mu.Lock()
	p.src = f
	p.mu.Unlock()
}

// also adds a free-form part to the line (e.g. stream deliveries).
func (p *progress) also(f func() string) {
	p.mu.Lock()
	p.extra = f
	p.mu.Unlock()
}

func (p *progress) line() string {
	el := time.Since(p.start)
	line := fmt.Sprintf("%s %5.1fs/%v", p.label, el.Seconds(), p.d)
	if p.src != nil {
		done, ok := p.src()
		rate := float64(ok) / el.Seconds()
		if p.unit == bench.UnitEvents {
			rate *= float64(p.per)
		}
		line += "  " + bench.FormatRate(rate, p.unit)
		if done > ok {
			line += fmt.Sprintf("  failed %d", done-ok)
		}
	}
	if p.extra != nil {
		line += "  " + p.extra()
	}
	return line
}

// logLong prints a line every 30 s of a long run (the soak) when there is
// no terminal to redraw.
func (p *progress) logLong() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.label == "" || p.d < time.Minute || time.Since(p.logged) < 30*time.Second || time.Since(p.start) < 30*time.Second {
		return
	}
	p.logged = time.Now()
	fmt.Fprintln(p.w, p.line())
}

func (p *progress) draw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.label == "" {
		return
	}
	p.write(p.line())
}

// write redraws the line, padding over a longer previous one.
func (p *progress) write(line string) {
	pad := ""
	if n := p.width - len(line); n > 0 {
		pad = strings.Repeat(" ", n)
	}
	fmt.Fprint(p.w, "\r"+line+pad)
	p.width = len(line)
}

// end clears the line; res, when given, is the figure a log line reports.
func (p *progress) end(summary string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.tty {
		if p.label != "" {
			fmt.Fprintf(p.w, "%s %5.1fs  %s\n", p.label, time.Since(p.start).Seconds(), summary)
		}
		p.label, p.src, p.extra = "", nil, nil
		return
	}
	p.label, p.src, p.extra = "", nil, nil
	p.write("")
	fmt.Fprint(p.w, "\r")
}

// note prints a line without disturbing the progress line.
func (p *progress) note(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.width > 0 {
		p.write("")
		fmt.Fprint(p.w, "\r")
	}
	fmt.Fprintf(p.w, format+"\n", args...)
}

func (p *progress) stop() {
	p.closed.Do(func() {
		close(p.quit)
		p.wg.Wait()
	})
}
