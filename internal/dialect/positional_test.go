package dialect

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func TestPositional(t *testing.T) {
	for _, c := range []struct {
		name     string
		q        string
		args     []any
		wantQ    string
		wantArgs []any
	}{
		{"in order", "INSERT INTO t VALUES ($1, $2, $3)", []any{1, 2, 3}, "INSERT INTO t VALUES (?, ?, ?)", []any{1, 2, 3}},
		{"repeated and out of order", "INSERT INTO k VALUES ($1, $3, $2), ($1, $4, $2)", []any{"c", "at", "k1", "k2"},
			"INSERT INTO k VALUES (?, ?, ?), (?, ?, ?)", []any{"c", "k1", "at", "c", "k2", "at"}},
		{"two digits", "SELECT $10, $1", []any{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, "SELECT ?, ?", []any{10, 1}},
		{"literal and identifier", `SELECT '$1 it''s', "$2", [$3], ` + "`$4`" + `, $1`, []any{"x"},
			`SELECT '$1 it''s', "$2", [$3], ` + "`$4`" + `, ?`, []any{"x"}},
		{"comments", "SELECT $1 -- $2\n, /* $3 */ $2", []any{1, 2}, "SELECT ? -- $2\n, /* $3 */ ?", []any{1, 2}},
		{"json path literal", `SELECT json_extract($1, '$.a')`, []any{"{}"}, `SELECT json_extract(?, '$.a')`, []any{"{}"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			q, args := Positional(c.q, c.args)
			if q != c.wantQ || !reflect.DeepEqual(args, c.wantArgs) {
				t.Errorf("Positional(%q, %v) = %q, %v; want %q, %v", c.q, c.args, q, args, c.wantQ, c.wantArgs)
			}
		})
	}
}

// Texts it cannot rewrite faithfully are returned as they were, so the
// driver sees (and reports) exactly what the caller wrote.
func TestPositionalLeavesOtherTextsAlone(t *testing.T) {
	for _, q := range []string{
		"SELECT 1",
		"SELECT ?, $1",
		"SELECT $1, ?2",
		"SELECT :name, $1",
		"SELECT @name, $1",
		"SELECT $name",
		"SELECT $1a",
		"SELECT $01",
		"SELECT $0",
		"SELECT $",
		"SELECT $1, $3", // $3 has no argument
		"SELECT 'unterminated $1",
	} {
		args := []any{1, 2}
		got, gotArgs := Positional(q, args)
		if got != q || !reflect.DeepEqual(gotArgs, args) {
			t.Errorf("Positional(%q) = %q, %v; want it unchanged", q, got, gotArgs)
		}
	}
}

// FuzzPositional: a rewrite puts each $n back where it was when its ? are
// replaced in order, and the arguments follow the same order.
func FuzzPositional(f *testing.F) {
	for _, s := range []string{"SELECT $1", "INSERT INTO t VALUES ($1, $2), ($1, $3)", "SELECT '$1', $2 -- $3", "/* $1", "[$1] $2", `"a""$1" $1`, "$1$2", "$1?"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		args := make([]any, 40)
		for i := range args {
			args[i] = i
		}
		got, gotArgs := Positional(q, args)
		p := positionalOf(q)
		if p.order == nil || p.need > len(args) {
			if got != q || len(gotArgs) != len(args) {
				t.Fatalf("not rewritten, yet changed: %q → %q", q, got)
			}
			return
		}
		if len(gotArgs) != len(p.order) {
			t.Fatalf("%d arguments for %d placeholders", len(gotArgs), len(p.order))
		}
		// Put the $n back: the i-th ? outside quotes becomes $(order[i]+1).
		back := rewriteBack(t, got, p.order)
		if back != q {
			t.Fatalf("round trip: %q → %q → %q", q, got, back)
		}
		for i, n := range p.order {
			if gotArgs[i] != args[n] {
				t.Fatalf("argument %d is %v, want %v", i, gotArgs[i], args[n])
			}
		}
	})
}

// rewriteBack replaces the ? placeholders of q (outside quotes and
// comments, skipped as rewritePositional skips them) with $n, in order.
func rewriteBack(t *testing.T, q string, order []int) string {
	t.Helper()
	var b strings.Builder
	k := 0
	for i := 0; i < len(q); {
		j := max(skippedEnd(q, i), i+1)
		if j == i+1 && q[i] == '?' && k < len(order) {
			b.WriteString("$" + strconv.Itoa(order[k]+1))
			k++
		} else {
			b.WriteString(q[i:j])
		}
		i = j
	}
	return b.String()
}
