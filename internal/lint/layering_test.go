// Package lint holds repository-wide checks that run as ordinary tests.
package lint

import (
	"fmt"
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
// starting with "!" takes a package and everything under it back out, also
// out of the unit's own folder. The packages of one unit may otherwise
// always import each other.
//
// Dependencies point one way, down docs/architecture.md's package table;
// cell is the only package everyone shares. internal/writable holds the Hadoop
// variable-length integers the HFile reader and the snapshot manifest
// decoder share; internal/human the one way sizes and rates are printed;
// internal/pause the wait between a retried operation's attempts.
// source, what a run reads, sits above the readers its sources are made of
// (the snapshot first) and below the run, which plans and reads through it.
// cmd/rekey turns flags into a job and prints what pipeline
// and verify return: it imports no sink, so it reaches no sink internals
// and makes no choice between sinks. The sinks sit below the run and
// above the clients; the job's durable state sits below both.
//
// vfs is a core (interfaces, local and in-memory file systems, Open and
// its scheme registry) with one package per storage backend on top of it:
// each backend imports the core and the core imports none; a backend registers its schemes when a program imports it, so a program
// links the SDKs of the backends it imports and no others. The libraries
// that read and write through vfs (snapshot, pipeline, verify) import no
// backend (noBackends): the program chooses, the rekey command all of
// them (vfs/all).
//
// The Kerberos login is passed down (krb.Identity in options), never read
// from a package variable: pipeline and verify build it from the job's
// security section, so they import internal/krb. SASL GSSAPI is
// internal/sasl, below both protocols that speak it (HBase RPC, and the
// NameNode RPC of internal/hadooprpc), so neither reaches into the other.
var rules = map[string][]string{
	"cell": {},
	// The core: no backend, no SDK.
	"vfs": append([]string{"internal/krb"}, noBackends...),
	// What the object stores share: ranged reads, whole-object writes.
	"vfs/objstore": {"vfs"},
	// Each backend: the core, and what its protocol needs.
	"vfs/hdfs":  {"vfs", "!vfs/s3", "!vfs/gcs", "!vfs/azure", "!vfs/objstore", "!vfs/all", "internal/krb", "internal/hadooprpc", "internal/hadooptoken", "internal/digestmd5"},
	"vfs/s3":    {"vfs", "!vfs/hdfs", "!vfs/gcs", "!vfs/azure", "!vfs/all", "vfs/objstore"},
	"vfs/gcs":   {"vfs", "!vfs/hdfs", "!vfs/s3", "!vfs/azure", "!vfs/all", "vfs/objstore"},
	"vfs/azure": {"vfs", "!vfs/hdfs", "!vfs/s3", "!vfs/gcs", "!vfs/all", "vfs/objstore"},
	// Imports every backend for programs that want them all.
	"vfs/all":   {"vfs/hdfs", "vfs/s3", "vfs/gcs", "vfs/azure"},
	"hfile":     {"cell", "internal/writable"},
	"snapshot":  append([]string{"cell", "hfile", "vfs", "internal/writable"}, noBackends...),
	"hbase":     {"cell", "internal/krb", "internal/pause", "internal/sasl", "internal/digestmd5", "internal/hadooptoken"},
	"transform": {"cell"},
	"entity":    {"cell"},
	"job":       {"cell", "transform"},
	// What a run reads: a set of splits that yield cells (the snapshot
	// is the first); above snapshot, since a catch-up source combines two.
	"source": {"cell", "snapshot"},
	// A job's durable state and its protocols (the checkpoint and its
	// journal, the leases that fence every write, the job record): below
	// the run and the sinks, which both write it, so it knows neither;
	// only vfs's core, never a backend.
	"state": append([]string{"vfs", "!sink", "!pipeline"}, noBackends...),
	// The sinks are peers of the run, not parts of it: the contract and
	// dry-run at sink/, each sink in its own package under it, built from
	// its job section through sink.Register. They read no snapshot and
	// know no run; what a builder needs of the run comes in sink.Env.
	"sink": append([]string{"cell", "vfs", "hfile", "hbase", "job", "state", "internal/human", "internal/pause", "internal/krb"}, noBackends...),
	// The run: it imports every sink the build offers (pipeline/sinks.go).
	"pipeline": append([]string{"cell", "vfs", "hfile", "snapshot", "source", "hbase", "transform", "entity", "job", "state", "sink", "internal/human", "internal/pause", "internal/krb"}, noBackends...),
	"verify":   append([]string{"cell", "vfs", "hfile", "snapshot", "hbase", "transform", "entity", "job", "internal/human", "internal/krb"}, noBackends...),

	"internal/writable": {},
	"internal/human":    {},
	"internal/pause":    {},
	"internal/krb":      {},
	// SASL GSSAPI over Kerberos: HBase's RPC and the NameNode's use it.
	"internal/sasl": {},
	// The NameNode calls the HDFS library lacks, over the SASL GSSAPI
	// mechanism HBase's RPC uses too, or DIGEST-MD5 with a token.
	"internal/hadooprpc": {"internal/sasl", "internal/digestmd5", "internal/hadooptoken"},
	// Hadoop's tokens and the token storage file YARN hands containers.
	"internal/hadooptoken": {"internal/writable"},
	// DIGEST-MD5 for DataNode connections the HDFS library misreads.
	"internal/digestmd5": {},
	"internal/testenv":   {"cell"},
	// Dials the object stores' test servers: every object-store backend.
	"internal/s3test": {"vfs", "internal/testenv"},
	// File systems that play a backend's behaviour in tests.
	"internal/vfstest": append([]string{"vfs"}, noBackends...),
	// Its checks are tests; the package has no other code.
	"internal/lint": {},
	// A kubelet's stand-in for the Kubernetes tests: client-go only.
	"internal/kubeletshim": {},

	"cmd/rekey": {"cell", "vfs", "hfile", "snapshot", "hbase", "transform", "entity", "job", "internal/krb",
		"pipeline", "verify", "internal/human"},
	// It builds runs through a given dry-run sink (sink.DryRun), and
	// reaches no sink's internals.
	"cmd/benchtool": {"cell", "vfs", "hfile", "snapshot", "hbase", "transform", "job", "pipeline", "sink", "!sink/hfiles", "!sink/puts", "!sink/bigtable", "verify"},

	// Programs written as a user of the library would: no internal/.
	"examples": {"cell", "vfs", "hfile", "snapshot", "hbase", "transform", "entity", "job", "pipeline", "verify"},
}

// noBackends takes vfs's backends (and what only they share) out of a
// rule that allows vfs: the core and the libraries above it import none.
var noBackends = []string{"!vfs/hdfs", "!vfs/s3", "!vfs/gcs", "!vfs/azure", "!vfs/objstore", "!vfs/all"}

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
	// A denial wins over everything, also over the unit's own packages:
	// vfs's core is a unit whose backends under it are units of their own
	// it must not import.
	ok := within(p, unit)
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

// sdks names the packages outside the module that only some of the
// module's packages may import, with the folders that may: a program
// links a cloud SDK only through the package that needs it, and nothing
// below that package reaches the SDK around it. The object stores' SDKs
// (AWS, Google Cloud Storage, Azure Blob) are their vfs backend's alone
// (internal/s3test's Azure emulator client serves tests): never
// vfs's core, snapshot, source, the sinks, the run or verify, which a
// program links without any backend. The Bigtable client is the
// bigtable sink's, which writes, and verify's, which reads the new side;
// not the run's, the job's or the sink contract's. Google's API options
// come with those two SDKs and go where they go.
var sdks = map[string][]string{
	"github.com/aws":                    {"vfs/s3"},
	"cloud.google.com/go/storage":       {"vfs/gcs"},
	"github.com/Azure/azure-sdk-for-go": {"vfs/azure", "internal/s3test"},
	"cloud.google.com/go/bigtable":      {"sink/bigtable", "verify"},
	"google.golang.org/api":             {"vfs/gcs", "sink/bigtable", "verify"},
}

// TestSDKImports holds the imports of the packages sdks names to the
// folders it lists.
func TestSDKImports(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range sdkViolations(t, root) {
		t.Error(v)
	}
}

// TestSDKImportsCatch: the SDK rule finds an SDK imported where it may
// not be (the snapshot reader, the sink contract, the run, vfs's core,
// another backend) and leaves it where it may (its backend, the bigtable
// sink, a test file), in a tree written for the test.
func TestSDKImportsCatch(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"snapshot/a.go":      "github.com/aws/aws-sdk-go-v2/service/s3",
		"sink/a.go":          "cloud.google.com/go/storage",
		"pipeline/a.go":      "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob",
		"vfs/a.go":           "cloud.google.com/go/bigtable",
		"vfs/hdfs/a.go":      "google.golang.org/api/option",
		"source/a.go":        "github.com/aws/smithy-go",
		"vfs/s3/a.go":        "github.com/aws/aws-sdk-go-v2/service/s3",
		"vfs/gcs/a.go":       "cloud.google.com/go/storage",
		"vfs/azure/a.go":     "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob",
		"sink/bigtable/a.go": "cloud.google.com/go/bigtable",
		"pipeline/a_test.go": "github.com/aws/aws-sdk-go-v2/service/s3",
	}
	for name, imp := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		src := "package " + filepath.Base(filepath.Dir(p)) + "\n\nimport _ \"" + imp + "\"\n"
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := sdkViolations(t, root)
	want := []string{"pipeline/a.go", "sink/a.go", "snapshot/a.go", "source/a.go", "vfs/a.go", "vfs/hdfs/a.go"}
	var found []string
	for _, v := range got {
		found = append(found, strings.Fields(v)[0])
	}
	sort.Strings(found)
	if strings.Join(found, " ") != strings.Join(want, " ") {
		t.Errorf("violations in %v, want %v:\n%s", found, want, strings.Join(got, "\n"))
	}
}

// sdkViolations lists, one message each, the non-test Go files under
// root that import an SDK of sdks from a folder it does not list.
func sdkViolations(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	for dir, code := range goFolders(t, root) {
		if !code {
			continue
		}
		files, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range f.Imports {
				p := strings.Trim(imp.Path.Value, `"`)
				for sdk, may := range sdks {
					if !within(p, sdk) {
						continue
					}
					ok := false
					for _, m := range may {
						ok = ok || within(dir, m)
					}
					if !ok {
						rel, _ := filepath.Rel(root, path)
						out = append(out, fmt.Sprintf("%s imports %s, which only %s may import", filepath.ToSlash(rel), p, strings.Join(may, ", ")))
					}
				}
			}
		}
	}
	sort.Strings(out)
	return out
}
