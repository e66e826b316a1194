package serve

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/fault"
)

// Options configure a Server. Zero values take the defaults listed on each
// field; the CLI's flags map one to one onto them.
type Options struct {
	// DB is the database: a SQLite file path (default "seqbox.db") or a
	// postgres:// URL. The inbox and the embedded queue both live there.
	DB string
	// Addr is the listen address. Default "127.0.0.1:8080".
	Addr string
	// AgentURL, when set, is where each event is POSTed; otherwise the
	// built-in record handler applies.
	AgentURL string
	// AdminToken protects the admin API and the dashboard. Empty: both
	// answer 401 (disabled), and only a loopback Addr is allowed.
	AdminToken string
	// IngestToken, when set, is required (as a Bearer token) by
	// POST /v1/events. Like AdminToken, at least MinTokenLength
	// characters.
	IngestToken string
	// Consumer is the consumer's name. Default "gateway".
	Consumer string
	// Queue names the embedded queue in the database. Default "gateway".
	Queue string
	// Workers and BatchSize are the consumer's (0: seqbox's defaults).
	Workers, BatchSize int
	// MaxBody bounds a request body in bytes. Default 4 MiB.
	MaxBody int64
	// MaxBatch bounds the events of one batch. Default 1000.
	MaxBatch int
	// AgentTimeout bounds one agent call; a call that exceeds it is
	// uncertain. Default 30s.
	AgentTimeout time.Duration
	// AgentConcurrency bounds the agent calls in flight at once. Default
	// seqbox.DefaultDecideConcurrency (64).
	AgentConcurrency int
	// RequestWait is how long an admin action waits for the consumer to
	// execute its operator request. Default 30s.
	RequestWait time.Duration
	// Lease is the embedded queue's visibility timeout: how soon a message
	// held by a process that died is delivered again. Default 15s.
	Lease time.Duration
	// PurgeEvery is how often retention runs. Default 1h; negative: never.
	PurgeEvery time.Duration
	// ShutdownTimeout bounds the drain on SIGTERM. Default 30s.
	ShutdownTimeout time.Duration
	// Policy holds the consumer's ordering, retry and retention policies;
	// Name, Store, Transport, Handler, Decide, Metrics, Observer and
	// Logger are set by the server.
	Policy seqbox.Config
	// Logger receives operational messages. Default slog.Default().
	Logger *slog.Logger
	// Hook, set only by the chaos harness's serve target (fault.FromEnv),
	// kills the process at the pipeline's and the agent path's fault
	// points.
	Hook fault.Hook
}

// Defaults of Options.
const (
	DefaultDB       = "seqbox.db"
	DefaultAddr     = "127.0.0.1:8080"
	DefaultConsumer = "gateway"
	DefaultQueue    = "gateway"
	DefaultMaxBody  = 4 << 20
	DefaultMaxBatch = 1000
)

// MinTokenLength is the shortest AdminToken or IngestToken Validate
// accepts: a token guessable in a few tries protects nothing.
const MinTokenLength = 16

// ErrNonLoopbackWithoutToken refuses to expose the gateway beyond this
// machine with an unprotected admin API.
var ErrNonLoopbackWithoutToken = errors.New("refusing to listen on a non-loopback address without --admin-token (or SEQBOX_ADMIN_TOKEN)")

func (o Options) withDefaults() Options {
	if o.DB == "" {
		o.DB = DefaultDB
	}
	if o.Addr == "" {
		o.Addr = DefaultAddr
	}
	if o.Consumer == "" {
		o.Consumer = DefaultConsumer
	}
	if o.Queue == "" {
		o.Queue = DefaultQueue
	}
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.AgentTimeout <= 0 {
		o.AgentTimeout = 30 * time.Second
	}
	if o.AgentConcurrency <= 0 {
		o.AgentConcurrency = seqbox.DefaultDecideConcurrency
	}
	if o.RequestWait <= 0 {
		o.RequestWait = 30 * time.Second
	}
	if o.Lease <= 0 {
		o.Lease = 15 * time.Second
	}
	if o.PurgeEvery == 0 {
		o.PurgeEvery = time.Hour
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Validate reports the first problem with the options, naming the flag.
func (o Options) Validate() error {
	for _, n := range []struct {
		flag string
		v    int64
	}{{"--max-body", o.MaxBody}, {"--max-batch", int64(o.MaxBatch)}} {
		if n.v < 0 {
			return fmt.Errorf("%s %d: must not be negative (0: the default)", n.flag, n.v)
		}
	}
	if o.AgentConcurrency < 0 {
		return fmt.Errorf("--agent-concurrency %d: at least 1 (0: the default, %d)", o.AgentConcurrency, seqbox.DefaultDecideConcurrency)
	}
	if o.AgentTimeout < 0 || o.Lease < 0 || o.RequestWait < 0 || o.ShutdownTimeout < 0 {
		return errors.New("--agent-timeout, --lease, --request-wait and --shutdown-timeout must not be negative")
	}
	o = o.withDefaults()
	if err := CheckAddr(o.Addr, o.AdminToken != ""); err != nil {
		return err
	}
	if o.AgentURL != "" {
		u, err := url.Parse(o.AgentURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--agent-url %q: want an http:// or https:// URL", o.AgentURL)
		}
	}
	if o.AdminToken != "" && len(o.AdminToken) < MinTokenLength {
		return fmt.Errorf("--admin-token: at least %d characters, please (it guards redrive and skip)", MinTokenLength)
	}
	if o.IngestToken != "" && len(o.IngestToken) < MinTokenLength {
		return fmt.Errorf("--ingest-token: at least %d characters, please (it guards what is queued)", MinTokenLength)
	}
	if o.MaxBody < 1024 {
		return fmt.Errorf("--max-body %d: at least 1024 bytes", o.MaxBody)
	}
	if o.Lease < time.Second {
		return fmt.Errorf("--lease %s: at least 1s", o.Lease)
	}
	// The consumer's settings, checked before New opens the database.
	cfg := o.Policy
	cfg.Name, cfg.Workers, cfg.BatchSize = o.Consumer, o.Workers, o.BatchSize
	return cfg.ValidateSettings()
}

// ListenAddr is the address to listen on: Addr, or DefaultAddr when
// Addr is empty, the address Validate checked. A caller that listens
// itself listens here, never on Addr as given: an empty --addr was
// checked as the loopback default and then listened on every interface,
// with no admin token.
func (o Options) ListenAddr() string { return o.withDefaults().Addr }

// CheckAddr refuses an address that is not host:port, and a non-loopback
// one when no admin token protects it. A host name other than
// "localhost" counts as non-loopback: it may resolve anywhere.
func CheckAddr(addr string, haveToken bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--addr %q: %w", addr, err)
	}
	if haveToken || isLoopback(host) {
		return nil
	}
	return fmt.Errorf("--addr %s: %w", addr, ErrNonLoopbackWithoutToken)
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && ip.IsLoopback()
}
