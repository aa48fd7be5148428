// Package kubernetes_test runs deploy/kubernetes on a real Kubernetes
// control plane: the kustomization applied with kubectl to a real
// kube-apiserver (testenv/k8s up: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler on 127.0.0.1), the real Job
// controller driving rekey's phases, and internal/kubeletshim standing in
// for the kubelet of one node, running the real rekey binary as each pod's
// process. The target is judged by HBase's own dump of it.
//
// Without a control plane every test here skips, saying so; under
// REKEY_REQUIRE_K8S=1 (make test-k8s) it fails instead.
package kubernetes_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hbase"
	"github.com/rekeyhq/rekey/internal/kubeletshim"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/pipeline"
	"github.com/rekeyhq/rekey/snapshot"
)

// plane is testenv/run-k8s/state.json, which testenv/k8s up writes.
type plane struct {
	Kubeconfig string `json:"kubeconfig"`
	Kubectl    string `json:"kubectl"`
	Server     string `json:"server"`
	Version    string `json:"kubernetes_version"`
	root       string
	client     kubernetes.Interface
}

// requirePlane returns the running control plane, or skips the test
// saying why (fails under REKEY_REQUIRE_K8S=1).
func requirePlane(t *testing.T) *plane {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	p := &plane{root: root}
	path := filepath.Join(root, "testenv", "run-k8s", "state.json")
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, p)
	}
	if err == nil {
		var cfg *clientcmdConfig
		cfg, err = loadConfig(p.Kubeconfig)
		if err == nil {
			p.client = cfg.client
			_, err = p.client.Discovery().ServerVersion()
		}
	}
	if err != nil {
		msg := fmt.Sprintf("KUBERNETES SUITE NOT RUN: no Kubernetes control plane answers (%v); `make test-k8s` builds and starts one (testenv/k8s up)", err)
		if os.Getenv("REKEY_REQUIRE_K8S") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return p
}

type clientcmdConfig struct{ client kubernetes.Interface }

func loadConfig(path string) (*clientcmdConfig, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, err
	}
	rc.QPS, rc.Burst = 50, 100
	c, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	return &clientcmdConfig{client: c}, nil
}

// kubectl runs kubectl against the control plane and returns its output.
func (p *plane) kubectl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(p.Kubectl, append([]string{"--kubeconfig", p.Kubeconfig}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errOut.String())
	}
	return out.String(), err
}

// namespace creates a namespace for the test, deleted after it. With a
// node, every pod of the namespace is pinned to that node (the
// PodNodeSelector admission plugin testenv/k8s enables), so tests running
// side by side, each with its own stand-in node, never run each other's
// pods, and the manifests stay as they are.
func (p *plane) namespace(t *testing.T, prefix, node string) string {
	t.Helper()
	ns := fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1_000_000_000)
	obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if node != "" {
		obj.Annotations = map[string]string{"scheduler.alpha.kubernetes.io/node-selector": "kubernetes.io/hostname=" + node}
	}
	if _, err := p.client.CoreV1().Namespaces().Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	// Admission wants the namespace's default ServiceAccount before a pod.
	for i := 0; ; i++ {
		if _, err := p.client.CoreV1().ServiceAccounts(ns).Get(context.Background(), "default", metav1.GetOptions{}); err == nil {
			return ns
		}
		if i == 300 {
			t.Fatalf("namespace %s: no default ServiceAccount after 30 s", ns)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// kustomizations lists every kustomization in deploy/kubernetes: the base
// and each overlay.
func kustomizations(t *testing.T, root string) []string {
	dirs := []string{filepath.Join(root, "deploy", "kubernetes", "base")}
	overlays, err := filepath.Glob(filepath.Join(root, "deploy", "kubernetes", "overlays", "*", "kustomization.yaml"))
	if err != nil || len(overlays) == 0 {
		t.Fatalf("no overlays found: %v", err)
	}
	for _, o := range overlays {
		dirs = append(dirs, filepath.Dir(o))
	}
	return dirs
}

// TestK8sDryRunEveryManifest applies the base and every overlay with
// kubectl's server-side dry run: every object goes through the real API
// server's defaulting, validation and admission (which refuses, e.g.,
// backoffLimitPerIndex without Indexed completion, or
// podReplacementPolicy TerminatingOrFailed beside a podFailurePolicy, both
// of which the Go types allow), and nothing is stored.
func TestK8sDryRunEveryManifest(t *testing.T) {
	p := requirePlane(t)
	ns := p.namespace(t, "rekey-dryrun", "")
	for _, dir := range kustomizations(t, p.root) {
		rel, _ := filepath.Rel(p.root, dir)
		rendered, err := p.kubectl(t, "kustomize", dir)
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		want := strings.Count("\n"+rendered, "\nkind: ")
		out, err := p.kubectl(t, "apply", "-k", dir, "-n", ns, "--dry-run=server", "-o", "name")
		if err != nil {
			t.Errorf("%s refused by the API server: %v", rel, err)
			continue
		}
		names := strings.Fields(out)
		if len(names) != want || want == 0 {
			t.Errorf("%s: the API server accepted %d objects, the kustomization renders %d: %v", rel, len(names), want, names)
		}
		t.Logf("%s: %d objects accepted by %s (dry run): %s", rel, len(names), p.Version, strings.Join(names, " "))
	}
	// Nothing was stored.
	jobs, err := p.client.BatchV1().Jobs(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(jobs.Items) != 0 {
		t.Errorf("after a dry run: %d jobs stored (%v)", len(jobs.Items), err)
	}
}

// TestK8sDryRunRefuses checks that the dry run judges: the API server
// refuses the spill Job with its Indexed completion mode taken out
// (backoffLimitPerIndex needs it), which strict decoding into the Go
// types accepts.
func TestK8sDryRunRefuses(t *testing.T) {
	p := requirePlane(t)
	ns := p.namespace(t, "rekey-refuse", "")
	b, err := os.ReadFile(filepath.Join(p.root, "deploy", "kubernetes", "base", "spill-job.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(b), "completionMode: Indexed", "completionMode: NonIndexed", 1)
	if bad == string(b) {
		t.Fatal("spill-job.yaml has no completionMode: Indexed to change")
	}
	f := filepath.Join(t.TempDir(), "spill.yaml")
	if err := os.WriteFile(f, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = p.kubectl(t, "apply", "-f", f, "-n", ns, "--dry-run=server")
	if err == nil || !strings.Contains(err.Error(), "backoffLimitPerIndex") {
		t.Fatalf("a NonIndexed spill Job with backoffLimitPerIndex: want the API server to refuse it naming backoffLimitPerIndex, got %v", err)
	}
}

const tsBase = 1767225600000 // 2026-01-01T00:00:00Z

func be64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// rule is configs/rekey.yaml's re-key written out here, apart from package
// transform: old row = 13-digit time "#" decimal user; new row = 8-byte
// user "E" reversed time; family cf -> a. The expected target is the
// oracle's dump of the source through it.
func rule(c cell.Cell) cell.Cell {
	ts, user, _ := strings.Cut(string(c.Row), "#")
	tm, _ := strconv.ParseInt(ts, 10, 64)
	u, _ := strconv.ParseUint(user, 10, 64)
	c.Row = append(append(be64(u), 'E'), be64(uint64(math.MaxInt64-tm))...)
	c.Family = []byte("a")
	return c
}

// source makes n cells of events by 2000 users over about 3.5 days.
func source(n int) []cell.Cell {
	r := rand.New(rand.NewSource(56))
	out := make([]cell.Cell, 0, n)
	for i := 0; i < n; i++ {
		ts := tsBase + r.Int63n(300_000_000)
		row := []byte(fmt.Sprintf("%013d#%d", ts, r.Intn(2000)))
		v := make([]byte, 8+r.Intn(16))
		r.Read(v)
		out = append(out, cell.Cell{Row: row, Family: []byte("cf"), Qualifier: []byte("e"), Timestamp: ts, Type: cell.Put, Value: v})
	}
	return out
}

// jobYAML is the overlay's config/job.yaml for the mini cluster: the
// example overlay's job without Kerberos; the ZooKeeper quorum comes from
// the mounted hbase-site.xml ($HBASE_CONF_DIR), not from here. Small
// splits and a rate cap make each shard take several seconds.
const jobYAML = `source:
  root: %s
  name: %s
target:
  table: %s
  timeout: %s
source_layout:
  row:
    - {field: ts, type: decimal, width: 13}
    - {type: literal, bytes: "#"}
    - {field: user, type: decimal}
target_layout:
  row:
    - {field: user, type: uint, width: 8}
    - {type: literal, bytes: "E"}
    - {field: ts, type: reversed_ts}
entity: [user]
families: {cf: a}
bad_keys: {action: fail}
sink: {type: hfiles, staging: "%s/staging"}
run: {checkpoint: "%s/checkpoint.json", memory: 256MiB, workers: 1, split_bytes: 16KiB, max_cells_per_sec: %d}
`

const hbaseSite = `<?xml version="1.0"?>
<configuration>
  <property><name>hbase.zookeeper.quorum</name><value>%s</value></property>
  <property><name>hbase.zookeeper.property.clientPort</name><value>%s</value></property>
  <property><name>zookeeper.znode.parent</name><value>%s</value></property>
</configuration>
`

// image is the image the test overlay names; the stand-in kubelet runs
// the rekey binary the test built for it.
const image = "rekey-test:k8s"

// overlay is a test overlay on deploy/kubernetes/base, shaped like
// overlays/example: name prefix, image, params, the job file and client
// configuration. Beyond those values it changes two things, both because
// every pod's process shares the host's loopback: the spill's metrics
// address (:9090 for every pod would collide) becomes 127.0.0.1:0, and
// the backfill CronJob is left out (its schedule is the wall clock's)
// unless cron keeps it.
type overlay struct {
	shards, parallelism, parts int
	jobFile, hbaseSite         string
	// cron, when set, keeps the backfill CronJob (catchupOverlay).
	cron *cronPatch
}

// cronPatch keeps the backfill CronJob in the overlay, with params'
// backfill_snapshot and backfill_state, a schedule of every minute, created
// suspended, and args in place of the manifest's.
type cronPatch struct {
	snapshot, state string
	args            []string
}

func (o overlay) write(t *testing.T, root, ns string) string {
	t.Helper()
	dir := t.TempDir()
	base, err := filepath.Rel(dir, filepath.Join(root, "deploy", "kubernetes", "base"))
	if err != nil {
		t.Fatal(err)
	}
	snapshot, state := "unused", "unused"
	cron := `  - patch: |-
      $patch: delete
      apiVersion: batch/v1
      kind: CronJob
      metadata: {name: backfill}`
	if o.cron != nil {
		snapshot, state = o.cron.snapshot, o.cron.state
		args, err := json.Marshal(o.cron.args)
		if err != nil {
			t.Fatal(err)
		}
		cron = fmt.Sprintf(`  - target: {kind: CronJob, name: backfill}
    patch: |-
      - {op: replace, path: /spec/schedule, value: "* * * * *"}
      - {op: add, path: /spec/suspend, value: true}
      - {op: test, path: /spec/jobTemplate/spec/template/spec/containers/0/name, value: rekey}
      - {op: replace, path: /spec/jobTemplate/spec/template/spec/containers/0/args, value: %s}`, args)
	}
	files := map[string]string{
		"config/job.yaml":         o.jobFile,
		"config/hbase-site.xml":   o.hbaseSite,
		"secrets/objectstore.env": "# none: everything is on the mini cluster's HDFS\n",
		"kustomization.yaml": fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: %s
namePrefix: rekey-t-
labels:
  - pairs: {app.kubernetes.io/instance: t}
    includeTemplates: true
resources:
  - %s
images:
  - name: rekey
    newName: rekey-test
    newTag: k8s
configMapGenerator:
  - name: params
    literals:
      - shards=%d
      - spill_parallelism=%d
      - parts=%d
      - backfill_snapshot=%s
      - backfill_state=%s
  - name: config
    files:
      - config/job.yaml
      - config/hbase-site.xml
secretGenerator:
  - name: objectstore
    envs:
      - secrets/objectstore.env
patches:
  - target: {kind: Job, name: spill}
    patch: |-
      - {op: test, path: /spec/template/spec/containers/0/args/8, value: "--metrics-addr"}
      - {op: test, path: /spec/template/spec/containers/0/args/9, value: ":9090"}
      - {op: replace, path: /spec/template/spec/containers/0/args/9, value: "127.0.0.1:0"}
%s
replacements:
  - source: {kind: ConfigMap, name: params, fieldPath: data.shards}
    targets:
      - select: {kind: Job, name: spill}
        fieldPaths: [spec.completions]
  - source: {kind: ConfigMap, name: params, fieldPath: data.spill_parallelism}
    targets:
      - select: {kind: Job, name: spill}
        fieldPaths: [spec.parallelism]
  - source: {kind: ConfigMap, name: params, fieldPath: data.parts}
    targets:
      - select: {kind: Job, name: merge}
        fieldPaths: [spec.completions, spec.parallelism]
`, ns, base, o.shards, o.parallelism, o.parts, snapshot, state, cron),
	}
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// buildRekey builds the static binary the pods run.
func buildRekey(t *testing.T, root, dir string) string {
	bin := filepath.Join(dir, "rekey")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/rekey")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// node starts a stand-in kubelet for the test's node, stopped after it,
// and returns it with the node's name.
func (p *plane) node(t *testing.T, bin string) (*kubeletshim.Shim, string) {
	t.Helper()
	name := fmt.Sprintf("shim-%d", time.Now().UnixNano()%1_000_000_000)
	s, err := kubeletshim.Start(context.Background(), kubeletshim.Config{
		Client: p.client, Node: name, Images: map[string]string{image: bin}, Root: t.TempDir(),
		Logf: func(f string, a ...any) { t.Logf(f, a...) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s, name
}

// waitJob waits for a Job to end (Complete or Failed) and returns it.
func (p *plane) waitJob(t *testing.T, ns, name string, limit time.Duration) *batchv1.Job {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		j, err := p.client.BatchV1().Jobs(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range j.Status.Conditions {
			if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
				return j
			}
		}
		if time.Now().After(deadline) {
			var waiting []string
			for _, pod := range p.pods(t, ns, name) {
				for _, c := range pod.Status.ContainerStatuses {
					if c.State.Waiting != nil {
						waiting = append(waiting, pod.Name+": "+c.State.Waiting.Reason+": "+c.State.Waiting.Message)
					}
				}
			}
			t.Fatalf("job %s did not end in %s: active %d, succeeded %d, failed %d; pods waiting: %v", name, limit, j.Status.Active, j.Status.Succeeded, j.Status.Failed, waiting)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func condition(j *batchv1.Job, ct batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range j.Status.Conditions {
		if j.Status.Conditions[i].Type == ct && j.Status.Conditions[i].Status == corev1.ConditionTrue {
			return &j.Status.Conditions[i]
		}
	}
	return nil
}

// pods lists a Job's pods, oldest first.
func (p *plane) pods(t *testing.T, ns, job string) []corev1.Pod {
	t.Helper()
	l, err := p.client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// exitCodes maps each pod of a Job to its container's exit code (-1 while
// it has none).
func exitCodes(pods []corev1.Pod) map[string]int {
	out := map[string]int{}
	for _, p := range pods {
		code := -1
		for _, c := range p.Status.ContainerStatuses {
			if c.State.Terminated != nil {
				code = int(c.State.Terminated.ExitCode)
			}
		}
		out[p.Name] = code
	}
	return out
}

// mustComplete fails the test with the Job's pods' logs unless it
// completed.
func mustComplete(t *testing.T, s *kubeletshim.Shim, p *plane, ns string, j *batchv1.Job) {
	t.Helper()
	if condition(j, batchv1.JobComplete) != nil {
		return
	}
	for _, pod := range p.pods(t, ns, j.Name) {
		b, _ := os.ReadFile(s.LogPath(ns, pod.Name, "stderr"))
		t.Logf("pod %s (%s): stderr:\n%s", pod.Name, pod.Status.Phase, tail(b, 3000))
	}
	t.Fatalf("job %s did not complete: %+v", j.Name, j.Status)
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// summaries reads the JSON summaries a pod printed on stdout.
func summaries(t *testing.T, path string) []pipeline.Summary {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []pipeline.Summary
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var s pipeline.Summary
		if line := sc.Bytes(); bytes.HasPrefix(line, []byte("{")) && json.Unmarshal(line, &s) == nil {
			out = append(out, s)
		}
	}
	return out
}

// backfill is one test's source, target, job file and overlay.
type backfill struct {
	st    *testenv.State
	table string
	state string // the job's folder on HDFS
	want  []cell.Cell
	dir   string // the overlay
}

// newBackfill seeds n source cells, creates the target split at three
// users, and writes the overlay.
func newBackfill(t *testing.T, p *plane, ns string, n, shards, parallelism, parts, rate int) *backfill {
	st := testenv.Require(t)
	id := time.Now().UnixNano() % 1_000_000_000
	src, snap := fmt.Sprintf("k8s_src_%d", id), fmt.Sprintf("k8s_snap_%d", id)
	b := &backfill{st: st, table: fmt.Sprintf("k8s_dst_%d", id), state: fmt.Sprintf("hdfs://%s/tmp/rekey-k8s-%d", st.NameNode, id)}
	testenv.DropAfter(t, src, snap)
	t.Cleanup(func() { testenv.Drop(nil, []string{b.table}) })
	got := testenv.SeedCells(t, st, testenv.SourceTable{Table: src, Snapshot: snap, Families: []string{"cf"},
		SplitKeys: []string{"1767300000000", "1767400000000"}}, source(n))
	for _, c := range got {
		b.want = append(b.want, rule(c))
	}
	testenv.SortCells(b.want)
	jobText := fmt.Sprintf(jobYAML, st.RootDir, snap, b.table, "2m", b.state, b.state, rate)
	zkHost, zkPort, _ := strings.Cut(st.ZKQuorum, ":")
	site := fmt.Sprintf(hbaseSite, zkHost, zkPort, st.ZNodeParent)
	createTarget(t, jobText, st)
	b.dir = overlay{shards: shards, parallelism: parallelism, parts: parts, jobFile: jobText, hbaseSite: site}.write(t, p.root, ns)
	return b
}

// createTarget creates the target table, split at three users, before the
// pods start, so no two shards race to create it.
func createTarget(t *testing.T, jobText string, st *testenv.State) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(path, []byte(jobText), 0o644); err != nil {
		t.Fatal(err)
	}
	j, err := job.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	client, err := hbase.NewClient(hbase.Config{ZKQuorum: st.ZKQuorum, ZNodeParent: st.ZNodeParent})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	snap, err := snapshot.Open(ctx, j.Source.Root, j.Source.Name, snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	j.Target.Create.Enabled = true
	if _, err := pipeline.PrepareTarget(ctx, client, j, snap, [][]byte{be64(500), be64(1000), be64(1500)}); err != nil {
		t.Fatal(err)
	}
}

var progressRE = regexp.MustCompile(`progress: splits (\d+)/(\d+)`)

// midTask reports whether a pod's log shows some but not all of its
// splits done.
func midTask(path string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	for _, m := range progressRE.FindAllSubmatch(b, -1) {
		done, _ := strconv.Atoi(string(m[1]))
		all, _ := strconv.Atoi(string(m[2]))
		if done > 0 && done < all {
			return true
		}
	}
	return false
}

// index is a pod's completion index.
func index(p *corev1.Pod) string { return p.Annotations["batch.kubernetes.io/job-completion-index"] }

// TestK8sBackfill runs a whole job through the example overlay's Jobs on
// the real Job controller: the Indexed spill Job (4 shards, 2 pods at a
// time) and the merge Job (2 parts, applied at the same time, waiting
// with --wait-ready), then the load Job, then the verify Job, resumed
// once the load is done. Mid-run, spill shard 1's pod is deleted (the
// stand-in kubelet sends SIGTERM: rekey saves its checkpoint and exits 3)
// and shard 2's process is killed with SIGKILL (exit 137): the Job
// controller replaces each (backoffLimitPerIndex), the replacements resume
// (they skip the splits done before), and HBase's raw dump of the target
// equals the rule applied to the oracle's dump of the source: nothing
// doubled, nothing missing. verify's report finds no mismatch.
func TestK8sBackfill(t *testing.T) {
	p := requirePlane(t)
	root := p.root
	bin := buildRekey(t, root, t.TempDir())
	s, node := p.node(t, bin)
	ns := p.namespace(t, "rekey-backfill", node)
	b := newBackfill(t, p, ns, 48000, 4, 2, 2, 1500)
	if out, err := p.kubectl(t, "apply", "-k", b.dir); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("applied:\n%s", out)
	}

	// The kills: shard 1's pod deleted, shard 2's process SIGKILLed, each
	// once its log shows some splits done and some left.
	victims := map[string]types.UID{}
	deadline := time.Now().Add(10 * time.Minute)
	for len(victims) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("spill shards 1 and 2 were not both seen mid-task in 10 minutes (victims so far %v)", victims)
		}
		j, err := p.client.BatchV1().Jobs(ns).Get(context.Background(), "rekey-t-spill", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if condition(j, batchv1.JobComplete) != nil || condition(j, batchv1.JobFailed) != nil {
			t.Fatalf("the spill Job ended before both kills (victims %v): %+v", victims, j.Status)
		}
		for _, pod := range p.pods(t, ns, "rekey-t-spill") {
			idx := index(&pod)
			if _, done := victims[idx]; done || (idx != "1" && idx != "2") || pod.Status.Phase != corev1.PodRunning || !midTask(s.LogPath(ns, pod.Name, "stderr")) {
				continue
			}
			if idx == "1" {
				if _, err := p.kubectl(t, "delete", "pod", "-n", ns, pod.Name, "--wait=false"); err != nil {
					t.Fatal(err)
				}
				t.Logf("deleted spill pod %s (shard 1) mid-task", pod.Name)
			} else {
				pid := s.PID(pod.UID)
				if pid == 0 {
					continue
				}
				if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				t.Logf("killed spill pod %s (shard 2, pid %d) with SIGKILL mid-task", pod.Name, pid)
			}
			victims[idx] = pod.UID
		}
		time.Sleep(200 * time.Millisecond)
	}

	spill := p.waitJob(t, ns, "rekey-t-spill", 15*time.Minute)
	mustComplete(t, s, p, ns, spill)
	merge := p.waitJob(t, ns, "rekey-t-merge", 10*time.Minute)
	mustComplete(t, s, p, ns, merge)
	load := p.waitJob(t, ns, "rekey-t-load", 10*time.Minute)
	mustComplete(t, s, p, ns, load)

	// The spill: each killed shard ran twice; its first pod failed (3 on
	// SIGTERM, 137 on SIGKILL), its replacement resumed and finished.
	pods := p.pods(t, ns, "rekey-t-spill")
	codes := exitCodes(pods)
	byIndex := map[string][]corev1.Pod{}
	for _, pod := range pods {
		byIndex[index(&pod)] = append(byIndex[index(&pod)], pod)
	}
	for idx, wantCode := range map[string]int{"1": 3, "2": 137} {
		// The stopped pod may be gone (a deleted pod is removed once it
		// ended); the stand-in kubelet remembers its exit code.
		if code, ok := s.ExitCode(victims[idx]); !ok || code != wantCode {
			t.Errorf("shard %s: the stopped pod exited %d (ended: %v), want %d", idx, code, ok, wantCode)
		}
		var again []corev1.Pod
		for _, pod := range byIndex[idx] {
			if pod.UID != victims[idx] {
				again = append(again, pod)
			}
		}
		if len(again) != 1 {
			t.Errorf("shard %s: %d pods beside the stopped one, want 1 (its replacement): %v", idx, len(again), codes)
			continue
		}
		if codes[again[0].Name] != 0 {
			t.Errorf("shard %s's replacement %s exited %d, want 0", idx, again[0].Name, codes[again[0].Name])
		}
		sums := summaries(t, s.LogPath(ns, again[0].Name, "stdout"))
		if len(sums) != 1 || !sums[0].Finished || sums[0].Skipped == 0 || sums[0].Skipped >= sums[0].Splits {
			t.Errorf("shard %s's replacement %s: summaries %+v; want one, finished, some splits skipped (done before the kill), not all", idx, again[0].Name, sums)
		} else {
			t.Logf("shard %s's replacement skipped %d of %d splits", idx, sums[0].Skipped, sums[0].Splits)
		}
	}
	if spill.Status.Failed != 2 || spill.Status.Succeeded != 4 {
		t.Errorf("spill Job: %d failed, %d succeeded; want 2 failed (the two stopped), 4 succeeded", spill.Status.Failed, spill.Status.Succeeded)
	}
	if merge.Status.Succeeded != 2 {
		t.Errorf("merge Job: %d parts succeeded, want 2", merge.Status.Succeeded)
	}

	testenv.SameCells(t, "target (raw dump) vs the rule over the source", testenv.DumpTable(t, b.table, true), b.want)
	testenv.OneStoreFileEach(t, b.table, 4)

	// verify, created suspended, resumed now that the load is done.
	if _, err := p.kubectl(t, "patch", "job", "-n", ns, "rekey-t-verify", "--type=merge", "-p", `{"spec":{"suspend":false}}`); err != nil {
		t.Fatal(err)
	}
	verify := p.waitJob(t, ns, "rekey-t-verify", 10*time.Minute)
	mustComplete(t, s, p, ns, verify)
	vp := p.pods(t, ns, "rekey-t-verify")
	if len(vp) != 1 {
		t.Fatalf("verify Job: %d pods, want 1", len(vp))
	}
	report, _ := os.ReadFile(s.LogPath(ns, vp[0].Name, "stdout"))
	if !bytes.Contains(report, []byte("{")) {
		t.Errorf("verify printed no JSON report: %s", report)
	}
	t.Logf("verify's report: %s", tail(report, 2000))
}

// TestK8sExitCodes runs the spill Job where every task fails, twice, and
// checks what the Job controller makes of rekey's exit codes under the
// manifest's podFailurePolicy: exit 2 (here: the job file names a
// snapshot that does not exist) fails each index at once, one pod per
// index, and the Job fails naming those indexes; exit 4 (here: the
// NameNode does not answer within target.timeout) is retried per index,
// backoffLimitPerIndex (3) times, before the index fails.
func TestK8sExitCodes(t *testing.T) {
	p := requirePlane(t)
	root := p.root
	bin := buildRekey(t, root, t.TempDir())
	st := testenv.Require(t)
	zkHost, zkPort, _ := strings.Cut(st.ZKQuorum, ":")
	site := fmt.Sprintf(hbaseSite, zkHost, zkPort, st.ZNodeParent)
	state := fmt.Sprintf("hdfs://%s/tmp/rekey-k8s-codes-%d", st.NameNode, time.Now().UnixNano()%1_000_000_000)
	_, node := p.node(t, bin)

	t.Run("exit 2 fails the index", func(t *testing.T) {
		ns := p.namespace(t, "rekey-exit2", node)
		jobText := fmt.Sprintf(jobYAML, st.RootDir, "no_such_snapshot_k8s", "k8s_never", "10s", state+"-2", state+"-2", 1000)
		dir := overlay{shards: 2, parallelism: 2, parts: 1, jobFile: jobText, hbaseSite: site}.write(t, root, ns)
		if _, err := p.kubectl(t, "apply", "-k", dir, "-l", "app.kubernetes.io/component notin (merge,load)"); err != nil {
			t.Fatal(err)
		}
		j := p.waitJob(t, ns, "rekey-t-spill", 5*time.Minute)
		c := condition(j, batchv1.JobFailed)
		if c == nil || c.Reason != "FailedIndexes" {
			t.Fatalf("spill Job: %+v; want Failed, reason FailedIndexes", j.Status)
		}
		if j.Status.FailedIndexes == nil || *j.Status.FailedIndexes != "0,1" {
			t.Errorf("spill Job's failedIndexes %v, want 0,1", j.Status.FailedIndexes)
		}
		codes := exitCodes(p.pods(t, ns, "rekey-t-spill"))
		if len(codes) != 2 {
			t.Errorf("pods %v: want one per index (exit 2 is not retried)", codes)
		}
		for name, code := range codes {
			if code != 2 {
				t.Errorf("pod %s exited %d, want 2", name, code)
			}
		}
		t.Logf("spill Job failed: %s: %s; pods %v", c.Reason, c.Message, codes)
	})

	t.Run("exit 4 is retried per index", func(t *testing.T) {
		ns := p.namespace(t, "rekey-exit4", node)
		// A NameNode nobody serves: every pod gives up after target.timeout.
		jobText := fmt.Sprintf(jobYAML, "hdfs://127.0.0.1:1/hbase", "any", "k8s_never", "3s", state+"-4", state+"-4", 1000)
		dir := overlay{shards: 1, parallelism: 1, parts: 1, jobFile: jobText, hbaseSite: site}.write(t, root, ns)
		if _, err := p.kubectl(t, "apply", "-k", dir, "-l", "app.kubernetes.io/component notin (merge,load)"); err != nil {
			t.Fatal(err)
		}
		j := p.waitJob(t, ns, "rekey-t-spill", 8*time.Minute)
		if c := condition(j, batchv1.JobFailed); c == nil {
			t.Fatalf("spill Job: %+v; want Failed", j.Status)
		}
		codes := exitCodes(p.pods(t, ns, "rekey-t-spill"))
		if len(codes) != 4 {
			t.Errorf("pods %v: want 4 (the first and backoffLimitPerIndex 3 retries)", codes)
		}
		for name, code := range codes {
			if code != 4 {
				t.Errorf("pod %s exited %d, want 4", name, code)
			}
		}
		if j.Status.FailedIndexes == nil || *j.Status.FailedIndexes != "0" {
			t.Errorf("failedIndexes %v, want 0", j.Status.FailedIndexes)
		}
		t.Logf("spill Job: %d failed pods %v, failedIndexes %s", j.Status.Failed, codes, *j.Status.FailedIndexes)
	})
}

// TestK8sDuplicatePod runs a second pod of one spill index beside the
// Job's own: a copy of its pod outside the Job, what a node cut off from
// the API server leaves running while the Job goes on. Both pass
// --force-takeover, as the shipped manifests do, so the lease on HDFS
// decides. The copy takes the lease from the Job's pod, which finds it
// lost at its next write and exits 4; the Job controller counts that as a
// failure of the index (not FailIndex) and starts a replacement after its
// backoff (10 s). That replacement takes the lease in turn: from the copy
// if it is still running (the copy then exits 4), else after the copy
// finished the shard and gave the lease back (the replacement then finds
// every split done and commits the shard again under its own lease, which
// the merge requires). Either way one attempt at a time writes, the
// merge and the load complete, and HBase's raw dump of the target equals
// the rule applied to the oracle's dump of the source: nothing doubled,
// nothing lost.
func TestK8sDuplicatePod(t *testing.T) {
	p := requirePlane(t)
	bin := buildRekey(t, p.root, t.TempDir())
	s, node := p.node(t, bin)
	ns := p.namespace(t, "rekey-dup", node)
	b := newBackfill(t, p, ns, 24000, 2, 2, 1, 1000)
	if _, err := p.kubectl(t, "apply", "-k", b.dir); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var orig *corev1.Pod
	for deadline := time.Now().Add(5 * time.Minute); orig == nil; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("spill shard 0 was not seen mid-task in 5 minutes")
		}
		for _, pod := range p.pods(t, ns, "rekey-t-spill") {
			if index(&pod) == "0" && pod.Status.Phase == corev1.PodRunning && midTask(s.LogPath(ns, pod.Name, "stderr")) {
				orig = pod.DeepCopy()
			}
		}
	}
	origPID := s.PID(orig.UID)
	// The copy: the same spec, env and index annotation, none of the Job's
	// labels or ownership (the Job controller would adopt it otherwise).
	dup := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "spill-0-duplicate", Namespace: ns,
		Annotations: map[string]string{"batch.kubernetes.io/job-completion-index": "0"}}, Spec: *orig.Spec.DeepCopy()}
	dup.Spec.NodeName = ""
	dup, err := p.client.CoreV1().Pods(ns).Create(ctx, dup, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("started %s beside %s (shard 0, mid-task, pid %d)", dup.Name, orig.Name, origPID)

	spill := p.waitJob(t, ns, "rekey-t-spill", 10*time.Minute)
	mustComplete(t, s, p, ns, spill)
	dupCode := -1
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
		if code, ok := s.ExitCode(dup.UID); ok {
			dupCode = code
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the copy has not ended 3 minutes after the spill Job completed")
		}
	}
	logOf := func(name string) string {
		b, _ := os.ReadFile(s.LogPath(ns, name, "stderr"))
		return string(b)
	}
	origCode, _ := s.ExitCode(orig.UID)
	origLog, dupLog := logOf(orig.Name), logOf(dup.Name)
	const lost = "lost its lease"

	// The copy took the lease from the Job's pod, which stopped with exit 4.
	if !strings.Contains(dupLog, "took over the lease on checkpoint") || !strings.Contains(dupLog, fmt.Sprintf("from rekey pid %d ", origPID)) {
		t.Errorf("the copy's log does not say it took the checkpoint's lease from the Job's pod (pid %d):\n%s", origPID, tail([]byte(dupLog), 2000))
	}
	if origCode != 4 || !strings.Contains(origLog, lost) {
		t.Errorf("the Job's pod %s exited %d, want 4 with %q in its log:\n%s", orig.Name, origCode, lost, tail([]byte(origLog), 2000))
	}
	// Index 0 ran twice in the Job: the pod that lost the lease and its
	// replacement, which succeeded.
	var again []corev1.Pod
	for _, pod := range p.pods(t, ns, "rekey-t-spill") {
		if index(&pod) == "0" && pod.UID != orig.UID {
			again = append(again, pod)
		}
	}
	if len(again) != 1 {
		t.Fatalf("shard 0: %d Job pods beside the one that lost the lease, want 1 (its replacement)", len(again))
	}
	repl := again[0]
	replCode, _ := s.ExitCode(repl.UID)
	replLog := logOf(repl.Name)
	if replCode != 0 || !strings.Contains(replLog, "spill shard 0/2 committed") {
		t.Errorf("the replacement %s exited %d, want 0 having committed shard 0:\n%s", repl.Name, replCode, tail([]byte(replLog), 2000))
	}
	if spill.Status.Failed != 1 || spill.Status.Succeeded != 2 {
		t.Errorf("spill Job: %d failed, %d succeeded; want 1 failed (the pod that lost the lease, retried), 2 succeeded", spill.Status.Failed, spill.Status.Succeeded)
	}
	sums := summaries(t, s.LogPath(ns, repl.Name, "stdout"))
	if len(sums) != 1 || !sums[0].Finished {
		t.Fatalf("the replacement's summaries: %+v; want one, finished", sums)
	}
	// Who gave the replacement the lease: the copy still running (forced
	// from it) or the copy done (given back).
	if strings.Contains(replLog, "took over the lease on checkpoint") {
		if dupCode != 4 || !strings.Contains(dupLog, lost) {
			t.Errorf("the replacement took the lease from the running copy, which exited %d; want 4 with %q:\n%s", dupCode, lost, tail([]byte(dupLog), 2000))
		}
		t.Logf("the replacement took the lease from the running copy (exit 4) and finished the shard: %d of %d splits skipped", sums[0].Skipped, sums[0].Splits)
	} else {
		if dupCode != 0 || !strings.Contains(dupLog, "spill shard 0/2 committed") {
			t.Errorf("the copy gave the lease back before the replacement started but exited %d; want 0 having committed shard 0:\n%s", dupCode, tail([]byte(dupLog), 2000))
		}
		if sums[0].Skipped != sums[0].Splits {
			t.Errorf("the replacement after the copy finished the shard skipped %d of %d splits, want all", sums[0].Skipped, sums[0].Splits)
		}
		t.Logf("the copy finished the shard (exit 0) before the replacement started; the replacement found all %d splits done and committed again", sums[0].Splits)
	}
	t.Logf("exit codes: the Job's pod %d, the copy %d, the replacement %d", origCode, dupCode, replCode)

	// The merge and the load: a commit left superseded would keep the
	// merge waiting (--wait-ready 30m), so a few minutes is plenty.
	merge := p.waitJob(t, ns, "rekey-t-merge", 3*time.Minute)
	mustComplete(t, s, p, ns, merge)
	load := p.waitJob(t, ns, "rekey-t-load", 3*time.Minute)
	mustComplete(t, s, p, ns, load)
	testenv.SameCells(t, "target (raw dump) vs the rule over the source", testenv.DumpTable(t, b.table, true), b.want)
}

// catchupArgs are the args the backfill CronJob's file shows in a comment
// for a nightly catch-up (cmd/rekey's TestCatchupCronJobExample parses
// them with rekey's flags), with --metrics-addr on a free loopback port:
// every pod's process shares the host's.
func catchupArgs(t *testing.T, root string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "deploy", "kubernetes", "base", "backfill-cronjob.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, line := range strings.Split(string(b), "\n") {
		if _, rest, ok := strings.Cut(line, "# catch-up args: "); ok {
			if err := json.Unmarshal([]byte(rest), &args); err != nil {
				t.Fatalf("the catch-up args %q: %v", rest, err)
			}
		}
	}
	metrics := slices.Index(args, "--metrics-addr")
	if metrics < 0 || metrics+1 == len(args) || !slices.Contains(args, "--since") {
		t.Fatalf("the backfill CronJob's catch-up args %q: want --since and --metrics-addr", args)
	}
	args[metrics+1] = "127.0.0.1:0"
	return args
}

// changeSource writes puts and deletes into the source table through
// HBase's client, then flushes it: new rows, version deletes, column
// deletes and row deletes of the seeded cells.
func changeSource(t *testing.T, st *testenv.State, table string, seeded []cell.Cell) {
	t.Helper()
	ctx := context.Background()
	client, err := hbase.NewClient(hbase.Config{ZKQuorum: st.ZKQuorum, ZNodeParent: st.ZNodeParent})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	r := rand.New(rand.NewSource(57))
	for i := 0; i < 300; i++ {
		ts := tsBase + 300_000_000 + r.Int63n(86_400_000)
		c := cell.Cell{Row: []byte(fmt.Sprintf("%013d#%d", ts, r.Intn(2000))), Family: []byte("cf"), Qualifier: []byte("e"), Timestamp: ts, Type: cell.Put, Value: []byte(fmt.Sprintf("new %d", i))}
		if err := client.Put(ctx, []byte(table), c.Row, []cell.Cell{c}); err != nil {
			t.Fatal(err)
		}
	}
	kinds := []cell.Type{cell.Delete, cell.DeleteColumn, cell.DeleteFamily}
	for i, k := 0, 0; i < len(seeded); i, k = i+len(seeded)/150, k+1 {
		c := seeded[i]
		m := cell.Cell{Row: c.Row, Family: c.Family, Timestamp: c.Timestamp, Type: kinds[k%len(kinds)]}
		if m.Type != cell.DeleteFamily {
			m.Qualifier = c.Qualifier
		}
		if err := client.Delete(ctx, []byte(table), c.Row, []cell.Cell{m}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Oracle(t, "flush", table)
}

// TestK8sCatchupCronJob runs the nightly catch-up the backfill CronJob's
// file shows (`--since last` through the puts sink) under the real
// CronJob controller. A whole run of the job (the same args without
// --since, run here as a process) brings the target to snapshot A and
// writes its reached record beside the catch-up's checkpoint; the source
// then takes puts and deletes, and snapshot B is params'
// backfill_snapshot. The CronJob, created suspended with a schedule of
// every minute, is resumed: the controller starts the run of the last
// minute boundary (a missed run within startingDeadlineSeconds) or of the
// next, and is suspended again so that it does not fire twice. Its Job
// must succeed in one pod, and HBase's dumps of the target must equal the
// rule over the oracle's dump of B: what a read shows, and in the raw dump
// exactly A's cells, B's new ones and a version delete for each cell gone
// (the catch-up writes only the difference).
func TestK8sCatchupCronJob(t *testing.T) {
	p := requirePlane(t)
	bin := buildRekey(t, p.root, t.TempDir())
	s, node := p.node(t, bin)
	ns := p.namespace(t, "rekey-catchup", node)
	st := testenv.Require(t)
	ctx := context.Background()
	id := time.Now().UnixNano() % 1_000_000_000
	src, snapA, snapB := fmt.Sprintf("k8s_cu_src_%d", id), fmt.Sprintf("k8s_cu_a_%d", id), fmt.Sprintf("k8s_cu_b_%d", id)
	table := fmt.Sprintf("k8s_cu_dst_%d", id)
	stateDir := fmt.Sprintf("hdfs://%s/tmp/rekey-k8s-cu-%d", st.NameNode, id)
	t.Cleanup(func() { testenv.Drop([]string{snapA, snapB}, []string{src, table}) })
	dumpA := testenv.SeedCells(t, st, testenv.SourceTable{Table: src, Snapshot: snapA, Families: []string{"cf"},
		SplitKeys: []string{"1767300000000", "1767400000000"}}, source(6000))
	jobText := fmt.Sprintf(jobYAML, st.RootDir, snapA, table, "2m", stateDir, stateDir, 1_000_000)
	createTarget(t, jobText, st)
	zkHost, zkPort, _ := strings.Cut(st.ZKQuorum, ":")
	site := fmt.Sprintf(hbaseSite, zkHost, zkPort, st.ZNodeParent)

	// The CronJob (and the ConfigMaps it reads), suspended until B exists.
	args := catchupArgs(t, p.root)
	dir := overlay{shards: 1, parallelism: 1, parts: 1, jobFile: jobText, hbaseSite: site,
		cron: &cronPatch{snapshot: snapB, state: stateDir, args: args}}.write(t, p.root, ns)
	if out, err := p.kubectl(t, "apply", "-k", dir, "-l", "app.kubernetes.io/component notin (spill,merge,load,verify,status)"); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("applied:\n%s", out)
	}

	// The whole run to A: the CronJob's args without --since, from A.
	conf := t.TempDir()
	for name, text := range map[string]string{"job.yaml": jobText, "hbase-site.xml": site} {
		if err := os.WriteFile(filepath.Join(conf, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var whole []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--since":
			i++
			continue
		case strings.HasPrefix(a, "/etc/rekey/"):
			a = filepath.Join(conf, strings.TrimPrefix(a, "/etc/rekey/"))
		}
		whole = append(whole, strings.NewReplacer("$(REKEY_SNAPSHOT)", snapA, "$(REKEY_STATE)", stateDir).Replace(a))
	}
	cmd := exec.Command(bin, whole...)
	cmd.Env = append(os.Environ(), "HBASE_CONF_DIR="+conf, "HADOOP_CONF_DIR="+conf)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the whole run to A (%v): %v\n%s", whole, err, tail(out, 3000))
	}
	t.Logf("the whole run to A: rekey %s", strings.Join(whole, " "))
	testenv.SameCells(t, "target at A (raw dump) vs the rule over A", testenv.DumpTable(t, table, true), ruleAll(dumpA))

	// B: puts and deletes on the source, then its snapshot.
	changeSource(t, st, src, dumpA)
	testenv.Oracle(t, "snapshot", src, snapB)
	dumpB, err := testenv.ParseDump(testenv.Oracle(t, "dump-snapshot", st.RootDir, snapB))
	if err != nil {
		t.Fatal(err)
	}
	added, removed := difference(dumpB, dumpA), difference(dumpA, dumpB)
	if len(added) == 0 || len(removed) == 0 {
		t.Fatalf("the changes added %d cells and removed %d; want some of each", len(added), len(removed))
	}

	// The CronJob controller's run.
	resumed := time.Now()
	if _, err := p.kubectl(t, "patch", "cronjob", "-n", ns, "rekey-t-backfill", "--type=merge", "-p", `{"spec":{"suspend":false}}`); err != nil {
		t.Fatal(err)
	}
	var run *batchv1.Job
	for deadline := time.Now().Add(3 * time.Minute); run == nil; time.Sleep(250 * time.Millisecond) {
		l, err := p.client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range l.Items {
			for _, o := range l.Items[i].OwnerReferences {
				if o.Kind == "CronJob" && o.Name == "rekey-t-backfill" {
					run = &l.Items[i]
				}
			}
		}
		if run == nil && time.Now().After(deadline) {
			t.Fatal("the CronJob controller started no Job within 3 minutes of the CronJob's resume")
		}
	}
	if _, err := p.kubectl(t, "patch", "cronjob", "-n", ns, "rekey-t-backfill", "--type=merge", "-p", `{"spec":{"suspend":true}}`); err != nil {
		t.Fatal(err)
	}
	t.Logf("the CronJob controller started Job %s (scheduled for %s) %s after the CronJob's resume",
		run.Name, run.Annotations["batch.kubernetes.io/cronjob-scheduled-timestamp"], time.Since(resumed).Round(100*time.Millisecond))
	run = p.waitJob(t, ns, run.Name, 5*time.Minute)
	mustComplete(t, s, p, ns, run)
	pods := p.pods(t, ns, run.Name)
	if len(pods) != 1 {
		t.Errorf("the catch-up's Job ran %d pods, want 1: %v", len(pods), exitCodes(pods))
	}
	for _, pod := range pods {
		sums := summaries(t, s.LogPath(ns, pod.Name, "stdout"))
		if len(sums) != 1 || !sums[0].Finished || sums[0].Catchup == nil {
			t.Fatalf("pod %s's summaries: %+v; want one finished catch-up", pod.Name, sums)
		}
		cu := sums[0].Catchup
		if cu.Since != snapA || cu.CellsAdded != int64(len(added)) || cu.CellsRemoved != int64(len(removed)) || cu.CellsReplace != 0 {
			t.Errorf("the catch-up: %+v; want since %s, %d cells added and %d removed (the oracle's dumps of A and B)", *cu, snapA, len(added), len(removed))
		}
		t.Logf("the catch-up from %s: %d cells added, %d removed, %d rows touched, store files %d read, %d skipped", cu.Since, cu.CellsAdded, cu.CellsRemoved, cu.RowsTouched, cu.FilesRead, cu.FilesSkipped)
	}

	testenv.SameCells(t, "target after the catch-up vs the rule over B", testenv.DumpTable(t, table, false), ruleAll(dumpB))
	raw := ruleAll(append(append([]cell.Cell(nil), dumpA...), added...))
	for _, c := range ruleAll(removed) {
		raw = append(raw, cell.Cell{Row: c.Row, Family: c.Family, Qualifier: c.Qualifier, Timestamp: c.Timestamp, Type: cell.Delete})
	}
	testenv.SortCells(raw)
	testenv.SameCells(t, "target after the catch-up (raw dump) vs the rule over A, B's new cells, and a version delete of each cell gone", testenv.DumpTable(t, table, true), raw)
}

// ruleAll is rule over cells, sorted in HBase's order.
func ruleAll(cells []cell.Cell) []cell.Cell {
	out := make([]cell.Cell, 0, len(cells))
	for _, c := range cells {
		out = append(out, rule(c))
	}
	testenv.SortCells(out)
	return out
}

// difference is the cells of a not in b (key, type and value).
func difference(a, b []cell.Cell) []cell.Cell {
	in := map[string]bool{}
	for _, c := range b {
		in[string(cell.AppendDump(nil, &c))] = true
	}
	var out []cell.Cell
	for _, c := range a {
		if !in[string(cell.AppendDump(nil, &c))] {
			out = append(out, c)
		}
	}
	return out
}
