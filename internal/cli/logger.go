package cli

import (
	"context"
	"log/slog"
	"os"
)

// consumerLogger is the logger of a consumer the command runs itself
// (replay, a request executed in-process): warnings and errors on stderr,
// less the lines that repeat a result (they carry an outcome), which the
// command prints on stdout as JSON already.
func consumerLogger() *slog.Logger {
	return slog.New(resultsOmitted{slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})})
}

// resultsOmitted drops the records that carry an "outcome" attribute.
type resultsOmitted struct{ slog.Handler }

func (h resultsOmitted) Handle(ctx context.Context, r slog.Record) error {
	result := false
	r.Attrs(func(a slog.Attr) bool {
		result = a.Key == "outcome"
		return !result
	})
	if result {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h resultsOmitted) WithAttrs(as []slog.Attr) slog.Handler {
	return resultsOmitted{h.Handler.WithAttrs(as)}
}

func (h resultsOmitted) WithGroup(name string) slog.Handler {
	return resultsOmitted{h.Handler.WithGroup(name)}
}
