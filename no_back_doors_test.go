package seqbox_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// seqbox's own commands, gateway, labs and suites reach the engine through
// its public API, the driver, or internal/own (see NewConsumer): no init
// fills another package's variables, the packages that existed for that
// are gone, and no public API names a fault point (issue 38).
func TestNoBackDoors(t *testing.T) {
	for _, gone := range []string{"internal/reach", "internal/handlerkind", "internal/policy", "internal/handoff"} {
		if _, err := os.Stat(gone); err == nil {
			t.Errorf("%s exists: the engine's internals are reached through internal/own, not a package of function variables", gone)
		}
	}
	eachGoFile(t, false, func(fset *token.FileSet, path string, f *ast.File) {
		imports := map[string]string{} // local name → path
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			name := p[strings.LastIndexByte(p, '/')+1:]
			if im.Name != nil {
				name = im.Name.Name
			}
			imports[name] = p
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil && fn.Name.Name == "init" {
				checkInit(t, fset, fn, imports)
			}
		}
		public := !strings.HasPrefix(path, "internal/") && !strings.HasPrefix(path, "cmd/") && !strings.HasPrefix(path, "examples/")
		for name, p := range imports {
			if public && p == "github.com/seqbox/seqbox/internal/fault" {
				checkNoFaultInAPI(t, fset, f, name)
			}
		}
	})
}

// checkInit fails for an init that assigns a variable of another package.
func checkInit(t *testing.T, fset *token.FileSet, fn *ast.FuncDecl, imports map[string]string) {
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		as, ok := n.(*ast.AssignStmt)
		if !ok {
			return true
		}
		for _, lhs := range as.Lhs {
			if sel, ok := lhs.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && imports[x.Name] != "" {
					t.Errorf("%s: init assigns %s.%s: call the engine through its API, not through a variable filled at init",
						fset.Position(as.Pos()), x.Name, sel.Sel.Name)
				}
			}
		}
		return true
	})
}

// checkNoFaultInAPI fails for an exported declaration of a public package
// that mentions internal/fault (imported as name).
func checkNoFaultInAPI(t *testing.T, fset *token.FileSet, f *ast.File, name string) {
	mentions := func(n ast.Node) bool {
		found := false
		ast.Inspect(n, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == name {
					found = true
				}
			}
			return !found
		})
		return found
	}
	report := func(pos token.Pos, what string) {
		t.Errorf("%s: exported %s names a fault point or hook (internal/fault) in the public API", fset.Position(pos), what)
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Name.IsExported() && mentions(d.Type) {
				report(d.Pos(), d.Name.Name)
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() && (s.Type != nil && mentions(s.Type) || len(s.Values) > 0 && mentions(&ast.CompositeLit{Elts: s.Values})) {
							report(n.Pos(), n.Name)
						}
					}
				case *ast.TypeSpec:
					if !s.Name.IsExported() {
						continue
					}
					switch ty := s.Type.(type) {
					case *ast.StructType:
						for _, fld := range ty.Fields.List {
							for _, n := range fld.Names {
								if n.IsExported() && mentions(fld.Type) {
									report(n.Pos(), s.Name.Name+"."+n.Name)
								}
							}
							if len(fld.Names) == 0 && mentions(fld.Type) {
								report(fld.Pos(), s.Name.Name+" (embedded)")
							}
						}
					default:
						if mentions(ty) {
							report(s.Pos(), s.Name.Name)
						}
					}
				}
			}
		}
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// eachGoFile parses every Go file of this module (tests too, when tests),
// leaving out hidden directories, testdata and nested modules, and hands
// each to fn.
func eachGoFile(t *testing.T, tests bool, fn func(fset *token.FileSet, path string, f *ast.File)) {
	t.Helper()
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || exists(filepath.Join(path, "go.mod"))) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || (!tests && strings.HasSuffix(path, "_test.go")) {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		fn(fset, path, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
