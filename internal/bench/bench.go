// Package bench is the machinery behind `seqbox bench`: it measures the
// pipeline side by side with the raw limit of the same database (plain
// INSERTs with the same durability settings), and retention purge while a
// consumer keeps applying live traffic. It prints numbers; it asserts only
// correctness (every message applied once, the purge removed exactly the
// expired identities), never speed.
package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/seqbox/seqbox/internal/dbopen"
	"github.com/seqbox/seqbox/internal/pgdb"
	"github.com/seqbox/seqbox/internal/replay"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/transport/embedded"
)

// Consumer is the consumer name every bench run uses. Identities carry a
// run token, so runs on one database never see each other's messages.
const Consumer = "bench"

// env is one database under measurement: the store, the embedded queue in
// the same database, and whether it is PostgreSQL.
type env struct {
	st    store.Store
	q     *embedded.Queue
	pg    bool
	where string
	// bulk runs the consumers this env starts with the record handler
	// as a BatchHandler (replay.RecordBatchHandler): the effects of a
	// batch in one multi-row statement per table, as the raw limit writes
	// them.
	bulk bool
}

// open opens the store and an embedded queue named queue in the database
// db names (a SQLite path or a postgres:// URL), and creates the record
// handler's tables.
func open(ctx context.Context, db, queue string) (*env, error) {
	st, err := dbopen.Store(ctx, db)
	if err != nil {
		return nil, err
	}
	if err := replay.EnsureRecordTables(ctx, st.DB()); err != nil {
		st.Close()
		return nil, fmt.Errorf("record tables: %w", err)
	}
	q, err := embedded.Open(ctx, db, embedded.Config{
		Name: queue, Wait: 100 * time.Millisecond, PollInterval: 5 * time.Millisecond,
	})
	if err != nil {
		st.Close()
		return nil, err
	}
	e := &env{st: st, q: q, pg: pgdb.IsURL(db), where: "sqlite " + db}
	if e.pg {
		e.where = "postgres " + pgdb.Redact(db)
	}
	return e, nil
}

func (e *env) close() {
	e.q.Close()
	e.st.Close()
}

// newRun returns a short random token that keeps one run's identities,
// keys and queue apart from every other run's.
func newRun() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Body is the envelope of message i of a stream: identity (source, id
// prefix+i), partition key i mod keys of the run, and object version
// i/keys+1, so a stream published in order arrives in version order on
// every key. The id comes first so the bench can read it cheaply.
func Body(source, prefix, run string, i, keys int) []byte {
	return keyedBody(source, prefix, fmt.Sprintf("%s-k%d", run, i%keys), i, i/keys+1)
}

// keyedBody is message i of a stream, with identity (source, prefix+i), on
// partition key key at object version version.
func keyedBody(source, prefix, key string, i, version int) []byte {
	return fmt.Appendf(nil, `{"id":"%s%d","specversion":"1.0","source":%q,"type":"bench.step","partitionkey":%q,"objectversion":%d,"data":{"n":%d}}`,
		prefix, i, source, key, version, i)
}

// Bodies returns Body for i in [0, n).
func Bodies(source, prefix, run string, n, keys int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = Body(source, prefix, run, i, keys)
	}
	return out
}

// idOf reads the id of an envelope built by Body without parsing it all.
func idOf(body []byte) string {
	const p = `{"id":"`
	s := string(body)
	if !strings.HasPrefix(s, p) {
		return ""
	}
	s = s[len(p):]
	if i := strings.IndexByte(s, '"'); i >= 0 {
		return s[:i]
	}
	return ""
}

// publish puts bodies on the queue in chunks, each chunk one transaction.
func publish(ctx context.Context, q *embedded.Queue, bodies [][]byte) error {
	const chunk = 1000
	for len(bodies) > 0 {
		n := min(chunk, len(bodies))
		if err := q.PublishBatch(ctx, bodies[:n]); err != nil {
			return err
		}
		bodies = bodies[n:]
	}
	return nil
}
