package transform

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

// TestInverseCodecIsIndependent: the inverse path (inverse.go,
// inversecodec.go) calls no function of the forward codec and reads none
// of its tables (layout.go, timefmt.go, rekey.go), so a bug there cannot
// reach it. It may use the compiled description (types, kinds, the record)
// and a few helpers for messages.
func TestInverseCodecIsIndependent(t *testing.T) {
	// Names of the forward files the inverse may use: the description
	// (component types, field kinds), the error every bad key wraps, and
	// helpers for messages and record bookkeeping.
	allowed := map[string]bool{"ErrBadKey": true, "printable": true, "AppendPrintable": true, "sameName": true, "cellName": true,
		"KindNone": true, "KindBytes": true, "KindNumber": true}
	for ty := Uint; ty <= Offset; ty++ {
		allowed[typeConst(ty)] = true
	}
	allowedMethods := map[string]bool{"reset": true, "String": true}
	fset := token.NewFileSet()
	names, methods := map[string]bool{}, map[string]bool{}
	for _, file := range []string{"layout.go", "timefmt.go", "rekey.go"} {
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv != nil {
					methods[d.Name.Name] = !allowedMethods[d.Name.Name]
				} else {
					names[d.Name.Name] = !allowed[d.Name.Name]
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					if vs, ok := s.(*ast.ValueSpec); ok {
						for _, n := range vs.Names {
							names[n.Name] = !allowed[n.Name]
						}
					}
				}
			}
		}
	}
	if !names["appendUint"] || !methods["parse"] || !names["parseISO"] {
		t.Fatal("the forward codec's names were not found")
	}
	for _, file := range []string{"inverse.go", "inversecodec.go"} {
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		pkgs := map[string]bool{}
		for _, im := range f.Imports {
			path := strings.Trim(im.Path.Value, `"`)
			pkgs[path[strings.LastIndex(path, "/")+1:]] = true
		}
		var visit func(n ast.Node) bool
		visit = func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				if id, ok := n.X.(*ast.Ident); ok && pkgs[id.Name] {
					return false // another package's name
				}
				// After the dot: a method or a field, never a
				// package-level name of this package.
				if methods[n.Sel.Name] {
					t.Errorf("%s: the inverse path uses the forward code's .%s", fset.Position(n.Sel.Pos()), n.Sel.Name)
				}
				ast.Inspect(n.X, visit)
				return false
			case *ast.KeyValueExpr:
				// The key of a struct literal names a field.
				ast.Inspect(n.Value, visit)
				return false
			case *ast.Ident:
				if names[n.Name] {
					t.Errorf("%s: the inverse path uses the forward code's %s", fset.Position(n.Pos()), n.Name)
				}
			}
			return true
		}
		ast.Inspect(f, visit)
	}
}

// typeConst is the Go name of a component type's constant.
func typeConst(ty Type) string {
	return map[Type]string{Uint: "Uint", Int: "Int", SortableInt: "SortableInt", ReversedTS: "ReversedTS", Fixed: "Fixed",
		String: "String", Decimal: "Decimal", Literal: "Literal", Salt: "Salt", TimeBucket: "TimeBucket", Offset: "Offset"}[ty]
}
