// Package lint holds repository-wide checks that run as ordinary tests.
package lint

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/internal/testenv"
)

const module = "github.com/rekeyhq/rekey/"

// allowed lists, for each top-level package, the project packages its
// non-test code may import. Dependencies point one way, down DESIGN.md's
// table; cell is the only package everyone shares. Subpackages inherit their
// top-level package's rule and may import their own siblings.
var allowed = map[string][]string{
	"cell":      {},
	"vfs":       {},
	"hfile":     {"cell"},
	"snapshot":  {"cell", "hfile", "vfs"},
	"hbase":     {"cell"},
	"transform": {"cell"},
	"entity":    {"cell"},
	"job":       {"cell", "transform"},
	"pipeline":  {"cell", "vfs", "hfile", "snapshot", "hbase", "transform", "entity", "job"},
	"verify":    {"cell", "vfs", "hfile", "snapshot", "hbase", "transform", "entity", "job"},
}

func TestLayering(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for top, deps := range allowed {
		ok := map[string]bool{top: true}
		for _, d := range deps {
			ok[d] = true
		}
		dir := filepath.Join(root, top)
		if _, err := os.Stat(dir); err != nil {
			continue
		}
		err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			for _, imp := range f.Imports {
				p := strings.Trim(imp.Path.Value, `"`)
				if !strings.HasPrefix(p, module) {
					continue
				}
				first := strings.SplitN(strings.TrimPrefix(p, module), "/", 2)[0]
				if first == "internal" {
					continue
				}
				if !ok[first] {
					rel, _ := filepath.Rel(root, path)
					want := append([]string(nil), deps...)
					sort.Strings(want)
					t.Errorf("%s imports %s, but %s may import only %v", rel, p, top, want)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
