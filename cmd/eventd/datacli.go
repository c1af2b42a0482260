package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/eventd/eventd/storage"
)

// importCmd streams a local NDJSON (or .gz) file to the admin import API with a progress line.
func importCmd(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	client := adminFlags(fs)
	project := fs.String("project", "", "project id")
	env := fs.String("env", "live", "environment: live or test")
	quiet := fs.Bool("quiet", false, "no progress line")
	if err := envFlags(fs); err != nil {
		return err
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 || *project == "" {
		return errors.New("usage: eventd import --project ID [--env live|test] FILE(.ndjson or .ndjson.gz)")
	}
	c, err := client()
	if err != nil {
		return err
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	pr := &progressReader{r: f}
	stop := make(chan struct{})
	if !*quiet {
		go pr.report(os.Stderr, st.Size(), stop)
	}
	req, err := http.NewRequest("POST", c.url+"/admin/v1/projects/"+url.PathEscape(*project)+"/import?environment="+url.QueryEscape(*env), pr)
	if err != nil {
		return err
	}
	req.ContentLength = st.Size()
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/x-ndjson")
	resp, err := (&http.Client{}).Do(req)
	close(stop)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var res struct {
		Lines, Accepted, Duplicates, Rejected int
		Errors                                []struct {
			Line    int
			Error   string
			Message string
			Details map[string]string
		}
		Truncated bool   `json:"errors_truncated"`
		Message   string `json:"message"`
	}
	body, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(body, &res)
	if resp.StatusCode != 200 {
		return fmt.Errorf("import: %d %s", resp.StatusCode, body)
	}
	if !*quiet {
		fmt.Fprintln(os.Stderr)
	}
	fmt.Fprintf(w, "%d lines: %d accepted, %d duplicates, %d rejected\n", res.Lines, res.Accepted, res.Duplicates, res.Rejected)
	for _, e := range res.Errors {
		fmt.Fprintf(w, "line %d: %s: %s %v\n", e.Line, e.Error, e.Message, e.Details)
	}
	if res.Truncated {
		fmt.Fprintln(w, "(only the first 1000 rejected lines are listed)")
	}
	return nil
}

// progressReader counts bytes for the progress line.
type progressReader struct {
	r io.Reader
	n atomic.Int64
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.n.Add(int64(n))
	return n, err
}

func (p *progressReader) report(w io.Writer, total int64, stop chan struct{}) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	start := time.Now()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			n := p.n.Load()
			pct := 100.0
			if total > 0 {
				pct = 100 * float64(n) / float64(total)
			}
			rate := float64(n) / time.Since(start).Seconds() / 1e6
			fmt.Fprintf(w, "\rimporting: %5.1f%% (%.1f of %.1f MB, %.1f MB/s)", pct, float64(n)/1e6, float64(total)/1e6, rate)
		}
	}
}

// exportCmd writes a project's events as NDJSON to a file or stdout.
func exportCmd(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	client := adminFlags(fs)
	project := fs.String("project", "", "project id")
	env := fs.String("env", "live", "environment: live or test")
	from := fs.String("from", "", "first timestamp or date (inclusive)")
	to := fs.String("to", "", "last timestamp or date (inclusive)")
	out := fs.String("o", "", "output file (default stdout)")
	if err := envFlags(fs); err != nil {
		return err
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *project == "" {
		return errors.New("usage: eventd export --project ID [--env live|test] [--from T] [--to T] [-o FILE]")
	}
	c, err := client()
	if err != nil {
		return err
	}
	q := url.Values{"environment": {*env}}
	if *from != "" {
		q.Set("from", *from)
	}
	if *to != "" {
		q.Set("to", *to)
	}
	req, err := http.NewRequest("GET", c.url+"/admin/v1/projects/"+url.PathEscape(*project)+"/export?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("export: %d %s", resp.StatusCode, b)
	}
	dst := w
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			return err
		}
		defer f.Close()
		dst = f
	}
	_, err = io.Copy(dst, resp.Body)
	return err
}

// backupCmd asks the running server for a consistent snapshot into DIR (on the server's machine).
func backupCmd(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("backup", flag.ContinueOnError)
	client := adminFlags(fs)
	if err := envFlags(fs); err != nil {
		return err
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: eventd backup DIR")
	}
	dir, err := filepath.Abs(fs.Arg(0))
	if err != nil {
		return err
	}
	c, err := client()
	if err != nil {
		return err
	}
	if err := c.do("POST", "/admin/v1/backup", map[string]string{"dir": dir}, nil); err != nil {
		return err
	}
	fmt.Fprintf(w, "backup written to %s\nrestore with: eventd restore %s --data DATA_DIR (server stopped)\n", dir, dir)
	return nil
}

// restoreCmd checks a backup and installs it as the data directory of a stopped server.
func restoreCmd(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	data := fs.String("data", "./data", "data directory of the (stopped) server to restore into")
	force := fs.Bool("force", false, "move an existing store aside (to pebble.before-restore-<time>) instead of refusing")
	if err := envFlags(fs); err != nil {
		return err
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: eventd restore [--data DIR] [--force] BACKUP_DIR")
	}
	src := filepath.Join(fs.Arg(0), "pebble")
	// The check: the backup must open as a store and hold its configuration.
	db, err := storage.Open(src, storage.Options{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("%s is not a usable backup: %w", fs.Arg(0), err)
	}
	projects := 0
	err = db.ScanConfig("project", func(string, []byte) error { projects++; return nil })
	_ = db.Close()
	if err != nil {
		return fmt.Errorf("%s is not a usable backup: %w", fs.Arg(0), err)
	}
	dst := filepath.Join(*data, "pebble")
	if _, err := os.Stat(dst); err == nil {
		// A running server holds Pebble's lock; opening proves it is stopped.
		live, err := pebble.Open(dst, &pebble.Options{ReadOnly: true})
		if err != nil {
			return fmt.Errorf("cannot open %s (is the server still running?): %w", dst, err)
		}
		_ = live.Close()
		if !*force {
			return fmt.Errorf("%s already holds a store; stop the server and pass --force to move it aside", dst)
		}
		aside := dst + ".before-restore-" + time.Now().UTC().Format("20060102T150405")
		if err := os.Rename(dst, aside); err != nil {
			return err
		}
		fmt.Fprintf(w, "moved the old store to %s\n", aside)
	}
	if err := os.MkdirAll(*data, 0o700); err != nil {
		return err
	}
	if err := copyDir(src, dst); err != nil {
		return err
	}
	fmt.Fprintf(w, "restored %d project(s) from %s into %s; start the server with --data %s\n", projects, fs.Arg(0), dst, *data)
	return nil
}

func copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o700)
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			_ = out.Close()
			return err
		}
		if err := out.Sync(); err != nil {
			_ = out.Close()
			return err
		}
		return out.Close()
	})
}
