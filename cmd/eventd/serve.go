package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/eventd/eventd/engine"
	"github.com/eventd/eventd/engine/enrich"
	"github.com/eventd/eventd/engine/ids"
	eventdhttp "github.com/eventd/eventd/http"
	"github.com/eventd/eventd/storage"
	"github.com/eventd/eventd/storage/vfsdelay"
)

type serveConfig struct {
	data, listen, adminListen, adminToken, tlsCert, tlsKey, logFormat, logLevel string
	shards                                                                      int
	streamPing, streamPong, streamLinger                                        time.Duration
	streamQueue, visitorMemory, lateMemory, idemFilterKeys                      int
	sessionIdle                                                                 time.Duration
	fsyncDelay, derivedInterval, walMinSync, idemFilterSave                     time.Duration
	webhooksAllowPrivate                                                        bool
	adminHost                                                                   string
	disk                                                                        diskConfig // disk.go
	maxInflightBody                                                             int64
	adminHeaderTimeout, adminBodyTimeout                                        time.Duration
	access                                                                      accessLogConfig // accesslog.go
	geoipDB                                                                     string
}

func serve(args []string) error {
	var c serveConfig
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&c.data, "data", "./data", "Pebble data directory")
	fs.StringVar(&c.listen, "listen", "127.0.0.1:8080", "public API address (/events, /stream, /t.js, /healthz)")
	fs.StringVar(&c.adminListen, "admin-listen", "127.0.0.1:8081", "admin API, dashboard and /metrics address")
	fs.StringVar(&c.adminToken, "admin-token", "", "admin API bearer token (default: generated on first start, kept in <data>/admin_token)")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "TLS certificate file (PEM); serve HTTPS and wss://")
	fs.StringVar(&c.tlsKey, "tls-key", "", "TLS private key file (PEM)")
	fs.IntVar(&c.shards, "shards", engine.DefaultShards(runtime.GOMAXPROCS(0)), "storage shard actors (group-commit lanes): one per two CPUs unless set")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.DurationVar(&c.streamPing, "stream-ping", eventdhttp.DefaultStreamPing, "interval of /stream pings")
	fs.DurationVar(&c.streamLinger, "stream-linger", eventdhttp.DefaultStreamLinger, "how long a /stream subscriber's writer waits for more events before a write (0: write at once)")
	fs.IntVar(&c.streamQueue, "stream-queue", eventdhttp.DefaultStreamQueue, "events a /stream subscriber may have queued before it is closed as a slow consumer")
	fs.DurationVar(&c.streamPong, "stream-pong", eventdhttp.DefaultStreamPong, "close a /stream connection after this long without a pong")
	fs.DurationVar(&c.sessionIdle, "session-idle", eventdhttp.DefaultSessionIdle, "end a dashboard session after this long without a request")
	fs.DurationVar(&c.fsyncDelay, "fsync-delay", 0, "benchmarks only: add this delay to every fsync, to emulate a slower disk")
	fs.DurationVar(&c.walMinSync, "wal-min-sync-interval", storage.DefaultWALMinSyncInterval, "space WAL fsyncs at least this far apart so that more commits share one (0: sync as soon as asked)")
	fs.IntVar(&c.lateMemory, "late-memory", storage.DefaultLateMemory, "events with their clients' recent times whose time index keys are held in memory until written in time order (40 bytes and the visitor id each, at most 64 bytes per entry in all); past it the oldest seconds are written early")
	fs.IntVar(&c.visitorMemory, "visitor-memory", storage.DefaultVisitorMemory, "visitor index entries of recent days held in memory (40-165 bytes each); past it the fullest day is split: what it holds is written to the store, and its later entries are held again")
	fs.IntVar(&c.idemFilterKeys, "idempotency-filter-keys", storage.DefaultIdempotencyFilterKeys, "idempotency keys (Idempotency-Key, messageId, import keys) of the last day whose place the filter in memory holds (8-16 bytes each, in tables of up to 16,777,216 keys that grow as keys come); past it new keys are kept by day, which costs each keyed write a look-up in the store (-1: no filter, every key kept by day)")
	fs.DurationVar(&c.idemFilterSave, "idempotency-filter-save", storage.DefaultIdempotencyFilterSave, "how often the idempotency filter is saved in the store's directory, besides at a clean stop, so that a start reads it and the keys since instead of every key of the last day (-1s: only at a stop)")
	fs.DurationVar(&c.derivedInterval, "derived-interval", storage.DefaultDerivedInterval, "how often counters and rollups held in memory are checkpointed to the store (a crash replays what came after)")
	fs.StringVar(&c.adminHost, "admin-host", "", "comma-separated host names the admin listener answers for (DNS-rebinding defence): another Host header gets 421; IP addresses always pass; empty = any")
	fs.Int64Var(&c.maxInflightBody, "max-inflight-body", eventdhttp.DefaultMaxInflightBody, "request-body bytes each listener holds at once; more answers 503 (0: no bound)")
	fs.DurationVar(&c.adminHeaderTimeout, "admin-header-timeout", eventdhttp.DefaultAdminHeaderTimeout, "admin listener: time to receive a request's headers")
	fs.DurationVar(&c.adminBodyTimeout, "admin-body-timeout", eventdhttp.DefaultAdminBodyTimeout, "admin listener: time to receive a request body (import excepted)")
	fs.StringVar(&c.geoipDB, "geoip-db", "", "MaxMind-format .mmdb file (GeoLite2 or DB-IP Lite, City or Country) giving events $country and $region from the client IP; none: no country")
	fs.BoolVar(&c.webhooksAllowPrivate, "webhooks-allow-private", false, "let live-environment webhooks reach private, loopback and link-local addresses (SSRF guard off)")
	var conns connConfig
	conns.register(fs)
	c.disk.register(fs)
	c.access.register(fs)
	if err := envFlags(fs); err != nil {
		return err
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	log, err := newLogger(os.Stderr, c.logFormat, c.logLevel)
	if err != nil {
		return usageError{err}
	}
	conns.setup(log)
	spareProc(log)
	accessOut, closeAccess, err := c.access.open()
	if err != nil {
		return err
	}
	defer func() {
		if err := closeAccess(); err != nil {
			log.Error("close access log", "err", err)
		}
	}()
	// Catch SIGTERM/SIGINT from the start: one that arrives while the store
	// opens or just after "eventd listening" must still stop cleanly (exit 0)
	// instead of killing the process with the default action.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sig)
	if (c.tlsCert == "") != (c.tlsKey == "") {
		return usageError{errors.New("--tls-cert and --tls-key go together")}
	}
	if err := os.MkdirAll(c.data, 0o700); err != nil {
		return err
	}
	token, fresh, err := adminToken(c.data, c.adminToken)
	if err != nil {
		return err
	}
	if err := checkAdminToken(token, c.adminToken != ""); err != nil {
		return err
	}
	enricher, err := newEnricher(c.geoipDB, log)
	if err != nil {
		return usageError{err}
	}
	defer enricher.Close()
	ecfg := engine.Config{DataDir: filepath.Join(c.data, "pebble"), Shards: c.shards, Logger: log,
		WebhooksAllowPrivate: c.webhooksAllowPrivate, DerivedInterval: c.derivedInterval, VisitorMemory: c.visitorMemory, LateMemory: c.lateMemory, IdempotencyFilterKeys: c.idemFilterKeys, IdempotencyFilterSave: c.idemFilterSave,
		WALMinSyncInterval: c.walMinSync}
	ecfg.DataRoot = c.data
	if c.fsyncDelay > 0 {
		ecfg.FS = vfsdelay.New(vfs.Default, c.fsyncDelay)
	}
	ecfg.Disk, ecfg.OnStorageFatal = c.disk.setup(c.data, log), storageFatal(log)
	ecfg.ReadOnly = readOnlyStart(ecfg.Disk, ecfg.DataDir, log)
	eng, err := engine.Open(ecfg)
	if err != nil {
		return err
	}
	boot, err := eng.EnsureDefault()
	if err != nil {
		_ = eng.Close()
		return err
	}
	srv := eventdhttp.New(eventdhttp.Config{Engine: eng, Logger: log, AdminToken: token,
		StreamPing: c.streamPing, StreamPong: c.streamPong, StreamQueue: c.streamQueue, StreamLinger: c.streamLinger, SessionIdle: c.sessionIdle,
		AdminHosts:      strings.Split(c.adminHost, ","),
		MaxInflightBody: inflightBody(c.maxInflightBody), AdminHeaderTimeout: c.adminHeaderTimeout, AdminBodyTimeout: c.adminBodyTimeout,
		AccessLog: accessOut, AccessLogSample: c.access.sample, Enricher: enricher})
	pub, err := listen(c.listen, c.tlsCert, c.tlsKey, conns.guard("public", log, eng.Metrics()))
	if err != nil {
		_ = eng.Close()
		return err
	}
	adm, err := listen(c.adminListen, c.tlsCert, c.tlsKey, conns.guard("admin", log, eng.Metrics()))
	if err != nil {
		_ = pub.Close()
		_ = eng.Close()
		return err
	}
	scheme := "http"
	if c.tlsCert != "" {
		scheme = "https"
	}
	if boot != nil {
		printBootstrap(os.Stdout, boot, token, fresh, scheme+"://"+pub.Addr().String(), scheme+"://"+adm.Addr().String())
	}
	log.Info("eventd listening", "public", pub.Addr().String(), "admin", adm.Addr().String(), "data", c.data, "shards", c.shards)

	errc := make(chan error, 2)
	go func() { errc <- srv.ServePublic(pub) }()
	go func() { errc <- srv.ServeAdmin(adm) }()
	var serveErr error
	reopen := reopenWhenRoom(ecfg, sig) // disk.go: nil unless read-only
	select {
	case s := <-sig:
		log.Info("shutting down", "signal", s.String())
	case serveErr = <-errc:
		log.Error("listener failed", "err", serveErr)
	case <-reopen:
		log.Info("room on the data volume again: restarting to accept writes", "component", "disk")
	}
	// Stop accepting and finish in-flight requests, then let the actors
	// commit what they hold and close Pebble.
	if err := srv.Shutdown(); err != nil {
		log.Error("http shutdown", "err", err)
	}
	if err := eng.Close(); err != nil {
		return fmt.Errorf("close store: %w", err)
	}
	log.Info("stopped")
	if reopen != nil && serveErr == nil && len(sig) == 0 {
		select {
		case <-reopen:
			return reexec() // disk.go
		default:
		}
	}
	return serveErr
}

// inflightBody maps the flag's 0 (no bound) to the server's negative.
func inflightBody(n int64) int64 {
	if n <= 0 {
		return -1
	}
	return n
}

// listen opens addr; guard wraps the TCP listener, under TLS if any, so that
// connections over a cap are closed before a handshake.
func listen(addr, cert, key string, guard func(net.Listener) net.Listener) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	ln = guard(ln)
	if cert == "" {
		return ln, nil
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	return tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}), nil
}

// adminToken returns the configured token, or the one kept in the data dir,
// or makes and keeps a new one (fresh=true).
func adminToken(dataDir, configured string) (token string, fresh bool, err error) {
	if configured != "" {
		return configured, false, nil
	}
	path := filepath.Join(dataDir, "admin_token")
	if b, err := os.ReadFile(path); err == nil {
		return strings.TrimSpace(string(b)), false, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", false, err
	}
	token = ids.Random("adm_", 40)
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return "", false, err
	}
	return token, true, nil
}

// minAdminTokenLen is the shortest admin token serve accepts: with the
// failed-attempt throttle, 24 characters of even a small alphabet are far out
// of reach of guessing. Generated tokens have 40 random characters.
const minAdminTokenLen = 24

// checkAdminToken refuses a short admin token (exit status 2); the message
// says where the token came from, never the token.
func checkAdminToken(token string, configured bool) error {
	if len(token) >= minAdminTokenLen {
		return nil
	}
	from := "the admin token in <data>/admin_token"
	if configured {
		from = "--admin-token (or EVENTD_ADMIN_TOKEN)"
	}
	return usageError{fmt.Errorf("%s is %d characters long; the admin token must be at least %d characters (leave it unset to have one generated)",
		from, len(token), minAdminTokenLen)}
}

func printBootstrap(w io.Writer, b *engine.Bootstrap, token string, freshToken bool, publicURL, adminURL string) {
	fmt.Fprintf(w, "\neventd: first start, created project %q (%s)\n\n", b.Project.Name, b.Project.ID)
	fmt.Fprintf(w, "  secret test key: %s\n", b.SecretKey.Key)
	fmt.Fprintf(w, "  public test key: %s\n", b.PublicKey.Key)
	if freshToken {
		fmt.Fprintf(w, "  admin token:     %s\n", token)
	}
	fmt.Fprintf(w, "\nThese keys are shown once. Send an event:\n\n")
	fmt.Fprintf(w, "  curl -s -X POST %s/events -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' -d '{\"event\":\"signup\",\"visitor_id\":\"v_1\",\"properties\":{\"plan\":\"pro\"}}'\n\n",
		publicURL, b.SecretKey.Key)
	fmt.Fprintf(w, "Admin API: %s/admin/v1/projects (Authorization: Bearer <admin token>)\n\n", adminURL)
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format must be text or json, not %q", format)
}

// newEnricher loads the user-agent rules and the --geoip-db file, and says
// once whether events get a country.
func newEnricher(path string, log *slog.Logger) (*enrich.Enricher, error) {
	e, err := enrich.New(enrich.Options{GeoIPDB: path})
	if err != nil {
		return nil, fmt.Errorf("--geoip-db: %w", err)
	}
	if e.HasGeo() {
		log.Info("geoip database loaded: events get $country and $region", "component", "enrich", "path", path, "database", e.GeoInfo())
	} else {
		log.Info("no --geoip-db: events get no $country or $region", "component", "enrich")
	}
	return e, nil
}
