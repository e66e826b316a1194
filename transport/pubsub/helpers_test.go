package pubsub_test

import (
	"context"
	"testing"

	"github.com/seqbox/seqbox/store"
)

type seqboxDeadLetter = store.DeadLetter

// deadLetters lists the consumer's open DLQ rows.
func deadLetters(t *testing.T, st store.Store, consumer string) []store.DeadLetter {
	t.Helper()
	rows, err := st.Executor().DeadLetterList(context.Background(), store.DeadLetterListParams{Consumer: consumer, All: false})
	if err != nil {
		t.Fatalf("list DLQ: %v", err)
	}
	return rows
}
