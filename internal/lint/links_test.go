package lint

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/internal/testenv"
)

// mdLink finds a Markdown link's target: ](TARGET) or ](TARGET#anchor).
var mdLink = regexp.MustCompile(`\]\(([^)#\s]+)(#[^)\s]*)?\)`)

// TestDocLinksResolve: every relative link in the repository's Markdown
// names a file or folder that exists, relative to the page that holds it
// (a page in docs/ that links docs/x.md points at docs/docs/x.md).
func TestDocLinksResolve(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	pages := 0
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "bin", "target", "node_modules", "run", "run-secure", "run-s3root":
				return filepath.SkipDir
			}
			if strings.HasSuffix(d.Name(), ".rekey") || strings.HasPrefix(d.Name(), "target-") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".md") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		pages++
		for _, m := range mdLink.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(p), target)); err != nil {
				rel, _ := filepath.Rel(root, p)
				t.Errorf("%s links %s, which does not exist from there", rel, target)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if pages < 10 {
		t.Fatalf("found %d Markdown pages; the walk missed the repository", pages)
	}
}
