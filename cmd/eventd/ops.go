package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/eventd/eventd/buildinfo"
)

// versionCmd prints the build's identity, the same three values as the
// eventd_build_info metric, so an operator can match a binary to a scrape.
func versionCmd(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("version takes no arguments")}
	}
	i := buildinfo.Get()
	fmt.Fprintf(out, "version: %s\ncommit: %s\ngo: %s\n", i.Version, i.Revision, i.GoVersion)
	return nil
}

// healthcheckCmd asks the local server's GET /healthz and fails unless it
// answers 200. It exists for the container image's HEALTHCHECK: an image
// built FROM scratch has no curl or wget, only this binary. It reads the
// same --listen and --tls-cert (and EVENTD_LISTEN, EVENTD_TLS_CERT) as
// serve, so the check follows the server's configuration without repeating it.
func healthcheckCmd(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:8080", "public API address of the server to check, as given to serve")
	tlsCert := fs.String("tls-cert", "", "set when the server serves HTTPS (only its presence matters here)")
	timeout := fs.Duration("timeout", 5*time.Second, "how long to wait for the answer")
	if err := envFlags(fs); err != nil {
		return err
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	url, err := healthURL(*listen, *tlsCert != "")
	if err != nil {
		return usageError{err}
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	return probe(ctx, url, out)
}

// healthURL turns a listen address into the URL of its /healthz as seen from
// the same host: a wildcard address (":8080", "0.0.0.0:8080", "[::]:8080")
// is reached on loopback.
func healthURL(listen string, https bool) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("--listen %q: %w", listen, err)
	}
	switch ip := net.ParseIP(host); {
	case host == "" || ip != nil && ip.IsUnspecified() && ip.To4() != nil:
		host = "127.0.0.1"
	case ip != nil && ip.IsUnspecified():
		host = "::1"
	}
	scheme := "http"
	if https {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port) + "/healthz", nil
}

// probe GETs url and reports an error unless the answer is 200. A degraded
// server (disk under --min-free-disk) answers 200 too and passes: it still
// serves reads, and restarting it would not free any disk.
func probe(ctx context.Context, url string, out io.Writer) error {
	hc := &http.Client{Transport: &http.Transport{
		Proxy: nil, // the check is of this host, never through a proxy
		// The certificate names the public host name, not loopback; the
		// check is about liveness on this host, not about the peer's identity.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback liveness probe
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: %s answered %d: %s", url, resp.StatusCode, body)
	}
	fmt.Fprintf(out, "%s\n", body)
	return nil
}
