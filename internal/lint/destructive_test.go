package lint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/internal/testenv"
)

// destructiveCommands are the control channel's commands that stop a
// server of the shared test cluster (testenv/README.md): a test that sends
// one breaks the seeds and snapshots of every package running beside it.
var destructiveCommands = []string{"stop-regionserver", "stop-master"}

// TestServerStopsRunApart: every test function that sends a
// destructive control command is named TestDestructive* and asks for the
// cluster through testenv.RequireDestructive, so that it runs only in the
// destructive pass, alone, after every other package (scripts/test.sh),
// and never beside other packages' seeds and snapshots.
func TestServerStopsRunApart(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			// The root itself may be a worktree named wt-*.
			if n := d.Name(); p != root && (n == ".git" || n == "bin" || n == "testenv" || strings.HasPrefix(n, "wt-")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, "_test.go") || filepath.Base(filepath.Dir(p)) == "lint" {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			cmd := sendsDestructive(fn.Body)
			if cmd == "" {
				continue
			}
			found++
			switch {
			case !strings.HasPrefix(fn.Name.Name, "TestDestructive"):
				t.Errorf("%s: %s sends %q to the shared cluster: only a test named TestDestructive* may (it runs in the destructive pass)", rel, fn.Name.Name, cmd)
			case !calls(fn.Body, "RequireDestructive"):
				t.Errorf("%s: %s sends %q but does not ask for the cluster with testenv.RequireDestructive", rel, fn.Name.Name, cmd)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found == 0 {
		t.Fatal("no test sends a destructive command: the check looks in the wrong place")
	}
}

// sendsDestructive returns the destructive command a string literal in
// body starts with, or "".
func sendsDestructive(body *ast.BlockStmt) string {
	var cmd string
	ast.Inspect(body, func(n ast.Node) bool {
		lit, ok := n.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING || cmd != "" {
			return cmd == ""
		}
		s, err := strconv.Unquote(lit.Value)
		if err != nil {
			return true
		}
		for _, c := range destructiveCommands {
			if s == c || strings.HasPrefix(s, c+" ") {
				cmd = c
			}
		}
		return true
	})
	return cmd
}

// calls says whether body calls a function or method named name.
func calls(body *ast.BlockStmt, name string) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return !found
		}
		switch f := call.Fun.(type) {
		case *ast.Ident:
			found = found || f.Name == name
		case *ast.SelectorExpr:
			found = found || f.Sel.Name == name
		}
		return !found
	})
	return found
}
