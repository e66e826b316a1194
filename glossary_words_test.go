package seqbox_test

import (
	"go/ast"
	"go/token"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// The code's words are docs/design.md §2's (issue 38): a delivery's record
// is a result, never a decision (only the agent's answer is); settle is ack
// or nack, done in the files that ack and nack; isFinal named a test that
// is not "final"; hold is a parked gap, not group commit's wait; and
// "verdict" was a third word for a result or a decision.
func TestGlossaryWords(t *testing.T) {
	eachGoFile(t, true, func(fset *token.FileSet, path string, f *ast.File) {
		checkGlossaryWords(t, fset, path, f)
	})
}

// acksOrNacks reports the files that ack and nack: the only places a function may be named for
// settling.
func acksOrNacks(path string) bool {
	return path == "settle.go" || path == "batch.go" || path == "tracing.go" || strings.HasPrefix(path, "transport/")
}

func checkGlossaryWords(t *testing.T, fset *token.FileSet, path string, f *ast.File) {
	report := func(pos token.Pos, format string, args ...any) {
		t.Errorf("%s: "+format, append([]any{fset.Position(pos)}, args...)...)
	}
	// named reports a declared name whose type is a Result (or a slice of
	// them) and that calls it a decision.
	named := func(names []*ast.Ident, typ ast.Expr, tag *ast.BasicLit) {
		if typ == nil || !isResult(typ, filepath.Dir(path) == "seqboxtype") {
			return
		}
		for _, n := range names {
			if strings.Contains(strings.ToLower(n.Name), "decision") && !oldJSONName(tag) {
				report(n.Pos(), "%s is a seqboxtype.Result: a delivery's record is a result, a decision only the agent's answer (docs/design.md §2)", n.Name)
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Ident:
			switch low := strings.ToLower(n.Name); {
			case n.Name == "isFinal":
				report(n.Pos(), "isFinal: final is every outcome but retry, held and blocked (docs/design.md §2); name what the function tests")
			case strings.Contains(low, "verdict"):
				report(n.Pos(), "%s: a verdict is a result (of a delivery) or a decision (the agent's answer), docs/design.md §2", n.Name)
			}
		case *ast.Field:
			named(n.Names, n.Type, n.Tag)
		case *ast.ValueSpec:
			named(n.Names, n.Type, nil)
		case *ast.FuncDecl:
			if strings.Contains(strings.ToLower(n.Name.Name), "settle") && !acksOrNacks(path) {
				report(n.Name.Pos(), "%s: settle is ack or nack only (docs/design.md §2), done in settle.go, batch.go, tracing.go and the transports", n.Name.Name)
			}
			if n.Name.Name == "hold" && receiverIs(n, "scheduler") {
				report(n.Name.Pos(), "scheduler.hold: hold is parked for a gap (docs/design.md §2); group commit's wait is groupWait")
			}
		case *ast.TypeSpec:
			if st, ok := n.Type.(*ast.StructType); ok && n.Name.Name == "scheduler" {
				for _, fld := range st.Fields.List {
					for _, name := range fld.Names {
						if name.Name == "hold" {
							report(name.Pos(), "scheduler.hold: hold is parked for a gap (docs/design.md §2); group commit's wait is groupWait")
						}
					}
				}
			}
		}
		return true
	})
}

// isResult reports whether typ is seqboxtype.Result (Result inside
// seqboxtype), or a slice of them at any depth.
func isResult(typ ast.Expr, inSeqboxtype bool) bool {
	for {
		arr, ok := typ.(*ast.ArrayType)
		if !ok {
			break
		}
		typ = arr.Elt
	}
	switch e := typ.(type) {
	case *ast.SelectorExpr:
		x, ok := e.X.(*ast.Ident)
		return ok && x.Name == "seqboxtype" && e.Sel.Name == "Result"
	case *ast.Ident:
		return inSeqboxtype && e.Name == "Result"
	}
	return false
}

// oldJSONName reports a field that only carries the admin API's old name
// for results ("decisions"), which docs/gateway.md keeps for one release.
func oldJSONName(tag *ast.BasicLit) bool {
	if tag == nil {
		return false
	}
	s, err := strconv.Unquote(tag.Value)
	return err == nil && reflect.StructTag(s).Get("json") == "decisions"
}

func receiverIs(fn *ast.FuncDecl, name string) bool {
	if fn.Recv == nil || len(fn.Recv.List) != 1 {
		return false
	}
	typ := fn.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	id, ok := typ.(*ast.Ident)
	return ok && id.Name == name
}
