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

// rules gives each unit of the module the project packages its non-test
// code may import. A unit is a top-level folder with every package under
// it, except under cmd/ and internal/, where each package is a unit of its
// own. An entry allows a package and every package under it; an entry
// starting with "!" takes a package and everything under it back out. The
// packages of one unit may always import each other.
//
// Dependencies point one way, down DESIGN.md's table; cell is the only
// package everyone shares. internal/writable holds the Hadoop
// variable-length integers the HFile reader and the snapshot manifest
// decoder share; internal/human the one way sizes and rates are printed;
// internal/pause the wait between a retried operation's attempts.
// source, what a run reads, sits above the readers its sources are made of
// (the snapshot first) and below the run, which plans and reads through it.
// cmd/rekey turns flags into a job and prints what pipeline
// and verify return: it reaches no sink internals.
var rules = map[string][]string{
	"cell":      {},
	"vfs":       {"internal/krb", "internal/hadooprpc", "internal/digestmd5"},
	"hfile":     {"cell", "internal/writable"},
	"snapshot":  {"cell", "hfile", "vfs", "internal/writable"},
	"hbase":     {"cell", "internal/krb", "internal/pause"},
	"transform": {"cell"},
	"entity":    {"cell"},
	"job":       {"cell", "transform"},
	"source":    {"cell", "snapshot"},
	"pipeline":  {"cell", "vfs", "hfile", "snapshot", "source", "hbase", "transform", "entity", "job", "internal/human", "internal/pause"},
	"verify":    {"cell", "vfs", "hfile", "snapshot", "hbase", "transform", "entity", "job", "internal/human"},

	"internal/writable": {},
	"internal/human":    {},
	"internal/pause":    {},
	"internal/krb":      {},
	// The NameNode calls the HDFS library lacks, over the SASL GSSAPI
	// mechanism HBase's RPC uses too.
	"internal/hadooprpc": {"hbase/rpc/sasl"},
	// DIGEST-MD5 for DataNode connections the HDFS library misreads.
	"internal/digestmd5": {},
	"internal/testenv":   {"cell"},
	"internal/s3test":    {"vfs", "internal/testenv"},
	// File systems that play a backend's behaviour in tests.
	"internal/vfstest": {"vfs"},
	// Its checks are tests; the package has no other code.
	"internal/lint": {},

	"cmd/rekey": {"cell", "vfs", "hfile", "snapshot", "hbase", "transform", "entity", "job", "internal/krb",
		"pipeline", "!pipeline/stage", "!pipeline/sink", "verify", "internal/human"},
	"cmd/benchtool": {"cell", "vfs", "hfile", "snapshot", "hbase", "transform", "job", "pipeline", "!pipeline/stage", "verify"},

	// Programs written as a user of the library would: no internal/.
	"examples": {"cell", "vfs", "hfile", "snapshot", "hbase", "transform", "entity", "job", "pipeline", "verify"},
}

// within reports whether package path p is pkg or under it.
func within(p, pkg string) bool {
	return p == pkg || strings.HasPrefix(p, pkg+"/")
}

// unitOf returns the unit that the package in folder dir (relative to the
// module root) belongs to: the longest rule that holds it.
func unitOf(dir string) (string, bool) {
	best := ""
	for unit := range rules {
		if within(dir, unit) && len(unit) > len(best) {
			best = unit
		}
	}
	return best, best != ""
}

// allows reports whether unit may import package p (both relative to the
// module root).
func allows(unit, p string) bool {
	if within(p, unit) {
		return true
	}
	ok := false
	for _, e := range rules[unit] {
		if deny, found := strings.CutPrefix(e, "!"); found {
			if within(p, deny) {
				return false
			}
		} else if within(p, e) {
			ok = true
		}
	}
	return ok
}

// use is one import of a project package by a non-test Go file.
type use struct {
	file string // relative to the module root
	pkg  string // relative to the module root
}

// describe spells out a unit's rule for an error message.
func describe(unit string) string {
	if len(rules[unit]) == 0 {
		return "nothing of the project"
	}
	return strings.Join(rules[unit], ", ")
}

// importsOf returns the imports of project packages by the non-test Go
// files in folder dir (relative to root), file by file.
func importsOf(t *testing.T, root, dir string) []use {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []use
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, path)
		for _, imp := range f.Imports {
			if p, found := strings.CutPrefix(strings.Trim(imp.Path.Value, `"`), module); found {
				out = append(out, use{file: filepath.ToSlash(rel), pkg: p})
			}
		}
	}
	return out
}

// goFolders maps every folder under root (relative to it) that holds Go
// files to whether it holds code other than tests; testdata and hidden
// folders hold no code of the module.
func goFolders(t *testing.T, root string) map[string]bool {
	t.Helper()
	folders := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		dir, _ := filepath.Rel(root, filepath.Dir(path))
		dir = filepath.ToSlash(dir)
		folders[dir] = folders[dir] || !strings.HasSuffix(path, "_test.go")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return folders
}

// TestLayering holds every package's imports to its unit's rule, and every
// package to having a unit.
func TestLayering(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for dir, code := range goFolders(t, root) {
		if code {
			dirs = append(dirs, dir)
		}
	}
	sort.Strings(dirs)
	for _, dir := range dirs {
		unit, ok := unitOf(dir)
		if !ok {
			t.Errorf("%s has no layering rule: give it (or its top-level folder) an entry in rules", dir)
			continue
		}
		for _, u := range importsOf(t, root, dir) {
			if !allows(unit, u.pkg) {
				t.Errorf("%s imports %s, which the rule of %s does not allow: %s", u.file, module+u.pkg, unit, describe(unit))
			}
		}
	}
}

// TestLayeringRulesNameFolders keeps rules current: a rule for a folder
// that moved or went would hold nothing while it looks like a guarantee.
func TestLayeringRulesNameFolders(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	folders := goFolders(t, root)
	for unit := range rules {
		found := false
		for dir := range folders {
			found = found || within(dir, unit)
		}
		if !found {
			t.Errorf("rules names %s, which holds no Go package", unit)
		}
	}
}
