package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/internal/otelenv"
	"github.com/seqbox/seqbox/internal/serve"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// serveCmd is `seqbox serve`: the HTTP gateway of docs/design.md §16.
func serveCmd() *cobra.Command {
	var o serve.Options
	var logLevel, logFormat string
	var firstVersion int64
	c := &cobra.Command{
		Use:   "serve",
		Short: "Run the HTTP gateway: CloudEvents ingest, dispatch to an agent, admin API, metrics, dashboard",
		Long: `Run seqbox as an HTTP gateway in front of an agent written in any language.

POST /v1/events takes CloudEvents (structured, binary and batch modes) and
answers 202 once they are durably in the embedded queue (in --db). A consumer
applies them through the whole pipeline: with --agent-url each event is POSTed
to the agent in order per key, with every gate applied, an Idempotency-Key
and the Seqbox-Partition-Key and Seqbox-Object-Version headers; without it,
the built-in record handler applies.

/v1/admin/... (OpenAPI at /v1/openapi.json) and the dashboard at /ui/ need
--admin-token; /metrics, /healthz and /readyz are open.

Traces: with OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_TRACES_EXPORTER=otlp) set,
spans (receive, process, decide, settle) go out over OTLP/HTTP, continuing
each event's traceparent, and the agent's request carries the trace; the
other standard OTEL_* variables apply. Without them nothing is exported.

Every flag may also be set by the environment variable SEQBOX_<FLAG>
(dashes as underscores, e.g. SEQBOX_ADMIN_TOKEN); a flag on the command line
wins.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			if err := envDefaults(cmd.Flags()); err != nil {
				return err
			}
			if err := emptyPolicyFlag(o.Policy.Policies); err != nil {
				return fmt.Errorf("serve: %w", err)
			}
			// The options' defaults are the flags' own: a zero given on the
			// command line is a mistake, not a request for the default.
			if fl := cmd.Flags(); fl.Changed("max-body") && o.MaxBody <= 0 {
				return fmt.Errorf("serve: --max-body %d: at least 1024 bytes", o.MaxBody)
			} else if fl.Changed("max-batch") && o.MaxBatch <= 0 {
				return fmt.Errorf("serve: --max-batch %d: at least 1 event", o.MaxBatch)
			}
			if err := givenZero(cmd.Flags(), "consumer", "queue", "max-attempts", "hold-timeout", "retention",
				"redelivery-window", "dlq-retention", "lease", "retry-backoff", "max-retry-backoff"); err != nil {
				return fmt.Errorf("serve: %w", err)
			}
			switch {
			case firstVersion < -1:
				return fmt.Errorf("serve: --first-version %d: must be a version (0 or more), or -1 for the first version seen", firstVersion)
			case firstVersion >= 0:
				o.Policy.FirstVersion = &firstVersion
			}
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("serve: --log-level %q: want debug, info, warn or error", logLevel)
			}
			hopts := &slog.HandlerOptions{Level: level}
			switch logFormat {
			case "text":
				o.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), hopts))
			case "json":
				o.Logger = slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), hopts))
			default:
				return fmt.Errorf("serve: --log-format %q: want text or json", logFormat)
			}
			if err := o.Validate(); err != nil {
				return fmt.Errorf("serve: %w", err)
			}
			// The chaos harness's serve target arms its processes with
			// SEQBOX_FAULT; nobody else sets it.
			if o.Hook, err = fault.FromEnv(); err != nil {
				return fmt.Errorf("serve: %w", err)
			}
			ctx := cmd.Context()
			tracing, err := otelenv.FromEnv(ctx, os.Getenv, version())
			if err != nil {
				return fmt.Errorf("serve: %w", err)
			}
			defer func() {
				// Flush the spans still buffered, bounded: a collector that is
				// down must not hold the exit.
				sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				defer cancel()
				if err := tracing.Shutdown(sctx); err != nil {
					o.Logger.Warn("seqbox serve: flushing traces failed", "err", err)
				}
			}()
			if tracing.Provider != nil {
				o.Policy.TracerProvider = tracing.Provider
				o.Logger.Info("seqbox serve: exporting traces over OTLP/HTTP", "endpoint", tracing.Endpoint)
			}
			// Listen first: an address that cannot be had leaves no
			// database behind.
			ln, err := net.Listen("tcp", o.ListenAddr())
			if err != nil {
				return fmt.Errorf("serve: %w", err)
			}
			srv, err := serve.New(ctx, o)
			if err != nil {
				ln.Close()
				return fmt.Errorf("serve: %w", err)
			}
			handler := "record"
			if o.AgentURL != "" {
				handler = "agent " + serve.RedactURL(o.AgentURL) // its password is never logged
			}
			// The address is in the message, so that a script finds it with
			// grep whatever the log format.
			o.Logger.Info("seqbox serve: listening on http://"+ln.Addr().String(), "consumer", srv.Consumer().Name(), "handler", handler)
			if err := srv.Serve(ctx, ln); err != nil {
				return fmt.Errorf("serve: %w", err)
			}
			o.Logger.Info("seqbox serve: stopped cleanly")
			return nil
		},
	}
	fl := c.Flags()
	fl.StringVar(&o.DB, "db", serve.DefaultDB, "database: a SQLite file path or a postgres:// URL (inbox and embedded queue)")
	fl.StringVar(&o.Addr, "addr", serve.DefaultAddr, "listen address; a non-loopback one requires --admin-token")
	fl.StringVar(&o.AgentURL, "agent-url", "", "POST each event to this agent (default: the built-in record handler)")
	fl.StringVar(&o.AdminToken, "admin-token", "", "Bearer token of the admin API and the dashboard (without it both answer 401)")
	fl.StringVar(&o.IngestToken, "ingest-token", "", "Bearer token POST /v1/events requires, at least 16 characters (default: none)")
	fl.StringVar(&o.Consumer, "consumer", serve.DefaultConsumer, "the consumer's name")
	fl.StringVar(&o.Queue, "queue", serve.DefaultQueue, "the embedded queue's name in --db")
	fl.IntVar(&o.Workers, "workers", 0, "consumer workers (default 4)")
	fl.IntVar(&o.BatchSize, "batch-size", 0, "most deliveries per transaction (default 512)")
	fl.Int64Var(&o.MaxBody, "max-body", serve.DefaultMaxBody, "largest request body in bytes (413 above)")
	fl.IntVar(&o.MaxBatch, "max-batch", serve.DefaultMaxBatch, "most events in one batch request (413 above)")
	fl.DurationVar(&o.AgentTimeout, "agent-timeout", 30*time.Second, "bound of one agent call; past it the call is uncertain and retried with the same Idempotency-Key")
	fl.IntVar(&o.AgentConcurrency, "agent-concurrency", seqbox.DefaultDecideConcurrency, "most agent calls in flight at once")
	fl.DurationVar(&o.RequestWait, "request-wait", 30*time.Second, "how long an admin action waits for the consumer to execute it")
	fl.DurationVar(&o.Lease, "lease", 15*time.Second, "the embedded queue's visibility timeout (extended while an event is being applied)")
	fl.DurationVar(&o.PurgeEvery, "purge-every", time.Hour, "how often retention purges expired identities (negative: never)")
	fl.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "bound of the drain on SIGTERM")
	// The consumer's policies, defaults from seqbox.DefaultPolicies.
	pol, def := &o.Policy.Policies, seqbox.DefaultPolicies()
	fl.StringVar((*string)(&pol.GapPolicy), "gap-policy", string(def.GapPolicy), "hold|advance: what a version gap does")
	fl.DurationVar(&pol.HoldTimeout, "hold-timeout", def.HoldTimeout, "bound of a hold")
	fl.Int64Var(&firstVersion, "first-version", -1, "version every new key starts at: a later one that arrives first is held until it comes (-1: the first version seen is the baseline, and an older one after it is stale)")
	fl.StringVar((*string)(&pol.HoldExpiry), "hold-expiry", string(def.HoldExpiry), "block|advance: what a hold that timed out does")
	fl.StringVar((*string)(&pol.OnDeadLetter), "on-dead-letter", string(def.OnDeadLetter), "block|release: what a dead letter does to its key")
	fl.DurationVar(&pol.MaxBlock, "max-block", def.MaxBlock, "release a key blocked longer than this, with an alert (0: never)")
	fl.DurationVar(&pol.MaxAge, "max-age", def.MaxAge, "business deadline: older events are expired (0: none)")
	fl.IntVar(&pol.Retry.MaxAttempts, "max-attempts", def.Retry.MaxAttempts, "deliveries of a failing event before it is dead-lettered")
	fl.DurationVar(&pol.Retry.InitialBackoff, "retry-backoff", def.Retry.InitialBackoff, "delay after the first failure; doubles per attempt")
	fl.DurationVar(&pol.Retry.MaxBackoff, "max-retry-backoff", def.Retry.MaxBackoff, "cap of the retry delay")
	fl.DurationVar(&pol.Retention, "retention", def.Retention, "how long inbox identities are kept")
	fl.DurationVar(&pol.RedeliveryWindow, "redelivery-window", def.RedeliveryWindow, "longest the queue may redeliver; retention must cover it")
	fl.DurationVar(&pol.DLQRetention, "dlq-retention", def.DLQRetention, "how long dead letters are kept; retention must cover it plus --redrive-window")
	fl.DurationVar(&pol.RedriveWindow, "redrive-window", def.RedriveWindow, "how long after its DLQ retention a message may be redriven")
	fl.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	fl.StringVar(&logFormat, "log-format", "text", "text (key=value) or json, one record a line on stderr")
	return c
}

// givenZero refuses a zero or empty value given (on the command line or
// in the environment) to any of names, whose defaults are not zero: the
// options would take it as "unset" and quietly run with the default,
// where replay refuses the same values.
func givenZero(fl *pflag.FlagSet, names ...string) error {
	for _, name := range names {
		f := fl.Lookup(name)
		if f == nil || !f.Changed {
			continue
		}
		// A name may be "0"; only a number or a duration is zero.
		switch v, typ := f.Value.String(), f.Value.Type(); {
		case typ == "string" && v == "":
			return fmt.Errorf("--%s '': give one, or leave the flag out for %q", name, f.DefValue)
		case typ != "string" && (v == "0" || v == "0s"):
			return fmt.Errorf("--%s %s: must be more than 0 (leave the flag out for the default, %s)", name, v, f.DefValue)
		}
	}
	return nil
}

// envDefaults sets every flag not given on the command line from
// SEQBOX_<FLAG> when that variable is set.
func envDefaults(fl *pflag.FlagSet) error {
	var err error
	fl.VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed || f.Name == "help" {
			return
		}
		name := "SEQBOX_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok {
			if e := fl.Set(f.Name, v); e != nil {
				err = fmt.Errorf("serve: %s=%q: %w", name, v, e)
			}
		}
	})
	return err
}
