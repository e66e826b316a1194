package storetest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqbox/seqbox/store"
)

// waitWatch is a store that tells when transactions reach the point where
// they must wait for another transaction that holds what they need, so a
// test can hold that one open exactly until then instead of sleeping. On
// a store with one writer (SQLite) that point is Begin, where a
// transaction waits for the writer's turn; on the others it is the
// statement that locks the row: the key's (KeyLock, KeyLockMany), or,
// with key "", an inbox identity's (InboxInsert, InboxInsertMany,
// InboxDelete). Only transactions begun while armed is set are watched;
// waiting is closed once want of them got there. Past that point a
// transaction can no longer overtake the one it waits for.
type waitWatch struct {
	store.Store
	key     string
	want    int
	armed   atomic.Bool
	waiting chan struct{}

	mu      sync.Mutex
	reached int
}

// newWaitWatch watches for want transactions, once armed.
func newWaitWatch(key string, want int) *waitWatch {
	return &waitWatch{key: key, want: want, waiting: make(chan struct{})}
}

// wrap is the factory of watched stores opened by open; one test opens
// one.
func (w *waitWatch) wrap(open Factory) Factory {
	return func(t *testing.T) store.Store {
		w.Store = open(t)
		return w
	}
}

// wait blocks until want transactions reached their wait, or fails after
// a minute rather than hang the suite. A handler may call it: it returns
// an error instead of failing the test.
func (w *waitWatch) wait() error {
	select {
	case <-w.waiting:
		return nil
	case <-time.After(time.Minute):
		return errors.New("storetest: the watched transactions never reached their wait")
	}
}

func (w *waitWatch) reach() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reached++
	if w.reached == w.want {
		close(w.waiting)
	}
}

// Begin passes the transactions begun while not armed through unwatched.
func (w *waitWatch) Begin(ctx context.Context) (store.ExecutorTx, error) {
	if !w.armed.Load() {
		return w.Store.Begin(ctx)
	}
	one, ok := w.Store.(interface{ OneWriter() bool })
	if ok && one.OneWriter() {
		w.reach()
	}
	tx, err := w.Store.Begin(ctx)
	if err != nil || ok && one.OneWriter() {
		return tx, err
	}
	return &waitWatchTx{ExecutorTx: tx, w: w}, nil
}

// waitWatchTx is a watched transaction on a store that runs several
// writers at once; it reaches its wait once.
type waitWatchTx struct {
	store.ExecutorTx
	w    *waitWatch
	once sync.Once
}

func (t *waitWatchTx) locks(key string) {
	if key == t.w.key {
		t.once.Do(t.w.reach)
	}
}

func (t *waitWatchTx) KeyLock(ctx context.Context, p store.KeyRef) (store.KeyState, error) {
	if p.Key != "" {
		t.locks(p.Key)
	}
	return t.ExecutorTx.KeyLock(ctx, p)
}

func (t *waitWatchTx) KeyLockMany(ctx context.Context, p store.KeyLockManyParams) (map[string]store.KeyState, error) {
	for _, k := range p.Keys {
		if k != "" {
			t.locks(k)
		}
	}
	return t.ExecutorTx.KeyLockMany(ctx, p)
}

func (t *waitWatchTx) InboxInsert(ctx context.Context, r store.InboxRow) (bool, error) {
	t.locks("")
	return t.ExecutorTx.InboxInsert(ctx, r)
}

func (t *waitWatchTx) InboxInsertMany(ctx context.Context, rows []store.InboxRow) ([]bool, error) {
	t.locks("")
	return t.ExecutorTx.InboxInsertMany(ctx, rows)
}

func (t *waitWatchTx) InboxDelete(ctx context.Context, p store.MessageRef) error {
	t.locks("")
	return t.ExecutorTx.InboxDelete(ctx, p)
}
