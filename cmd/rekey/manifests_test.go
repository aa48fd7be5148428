package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/pipeline"
)

// The manifests in deploy/kubernetes are checked here against the
// Kubernetes API types (decoded strictly: an unknown or misspelt field is
// an error) and against rekey's own command line. No API server or kubelet
// runs: what the Job controller does with them is not tested.

const manifests = "../../deploy/kubernetes"

// decodeStrict reads one manifest into out, refusing unknown fields.
func decodeStrict(t *testing.T, name string, out any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(manifests, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, out); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// TestManifestsDecodeStrictly: every YAML file in deploy/kubernetes is one
// of the kinds below and decodes strictly into its API type.
func TestManifestsDecodeStrictly(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(manifests, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s (%v)", manifests, err)
	}
	for _, f := range files {
		var head struct{ APIVersion, Kind string }
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, &head); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var obj any
		switch head.APIVersion + " " + head.Kind {
		case "batch/v1 Job":
			obj = &batchv1.Job{}
		case "batch/v1 CronJob":
			obj = &batchv1.CronJob{}
		case "v1 ConfigMap":
			obj = &corev1.ConfigMap{}
		default:
			t.Errorf("%s: %s %s is not a kind this test knows", f, head.APIVersion, head.Kind)
			continue
		}
		decodeStrict(t, filepath.Base(f), obj)
	}
}

// TestConfigMapJobFile: the ConfigMap's job file is a valid rekey job with
// the hfiles sink and its state on HDFS, and the client configuration the
// pods point HBASE_CONF_DIR and HADOOP_CONF_DIR at is there.
func TestConfigMapJobFile(t *testing.T) {
	var cm corev1.ConfigMap
	decodeStrict(t, "configmap.yaml", &cm)
	for _, k := range []string{"job.yaml", "hbase-site.xml", "core-site.xml", "hdfs-site.xml"} {
		if cm.Data[k] == "" {
			t.Errorf("the ConfigMap has no %s", k)
		}
	}
	j := configMapJob(t, cm)
	if j.Sink.Kind != job.SinkHFiles {
		t.Errorf("the job's sink is %q, want hfiles (the phases need it)", j.Sink.Kind)
	}
	for what, p := range map[string]string{"run.checkpoint": j.Run.Checkpoint, "sink.staging": j.Sink.Staging} {
		if !strings.HasPrefix(p, "hdfs://") {
			t.Errorf("%s is %q: a retried pod on another node would not find it; want hdfs://", what, p)
		}
	}
}

// configMapJob loads the ConfigMap's job file with rekey's job loader.
func configMapJob(t *testing.T, cm corev1.ConfigMap) *job.Job {
	t.Helper()
	p := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(p, []byte(cm.Data["job.yaml"]), 0o644); err != nil {
		t.Fatal(err)
	}
	j, err := job.Load(p)
	if err != nil {
		t.Fatalf("the ConfigMap's job file: %v", err)
	}
	return j
}

// TestIndexedJobs: the spill and the merge are Indexed Jobs whose pods
// take their shard or part from JOB_COMPLETION_INDEX through $(...) in
// args (no shell), with a count equal to completions; rekey's exit codes
// map to the pod failure policy: 1 and 2 fail the index, anything else is
// retried; a pod is replaced only once it has failed.
func TestIndexedJobs(t *testing.T) {
	var cm corev1.ConfigMap
	decodeStrict(t, "configmap.yaml", &cm)
	j := configMapJob(t, cm)
	for _, c := range []struct {
		file  string
		phase pipeline.Phase
		flag  string
	}{{"spill-job.yaml", pipeline.PhaseSpill, "shard"}, {"merge-job.yaml", pipeline.PhaseMerge, "part"}} {
		t.Run(string(c.phase), func(t *testing.T) {
			var jb batchv1.Job
			decodeStrict(t, c.file, &jb)
			s := jb.Spec
			if s.CompletionMode == nil || *s.CompletionMode != batchv1.IndexedCompletion {
				t.Fatalf("completionMode %v, want Indexed", s.CompletionMode)
			}
			if s.Completions == nil || *s.Completions < 1 {
				t.Fatal("no completions")
			}
			if s.BackoffLimitPerIndex == nil {
				t.Error("no backoffLimitPerIndex: one index's retries would use up the whole Job's")
			}
			checkPod(t, jb.Spec, batchv1.PodFailurePolicyActionFailIndex)
			ctr := rekeyContainer(t, s.Template.Spec)
			checkIndexEnv(t, ctr)
			n := int(*s.Completions)
			for i := 0; i < n; i++ {
				args := expand(ctr.Args, map[string]string{"JOB_COMPLETION_INDEX": strconv.Itoa(i)})
				f := parseRun(t, args)
				if pipeline.Phase(f.phase) != c.phase {
					t.Fatalf("index %d runs phase %q, want %s", i, f.phase, c.phase)
				}
				share := f.shard
				if c.flag == "part" {
					share = f.part
				}
				sh, err := parseShare("--"+c.flag, share)
				if err != nil || sh.Index != i || sh.Count != n {
					t.Errorf("index %d: --%s %q (%v), want %d/%d", i, c.flag, share, err, i, n)
				}
				if _, err := phaseOf(f); err != nil {
					t.Errorf("index %d: %v", i, err)
				}
				if err := applyRunFlags(j, f); err != nil {
					t.Errorf("index %d: %v", i, err)
				}
			}
		})
	}
}

// TestLoadJob: the load is one pod, rekey load on the ConfigMap's job;
// exit 1 and 2 fail the Job at once.
func TestLoadJob(t *testing.T) {
	var jb batchv1.Job
	decodeStrict(t, "load-job.yaml", &jb)
	if jb.Spec.CompletionMode != nil && *jb.Spec.CompletionMode == batchv1.IndexedCompletion {
		t.Error("the load is one task, not an Indexed Job")
	}
	checkPod(t, jb.Spec, batchv1.PodFailurePolicyActionFailJob)
	ctr := rekeyContainer(t, jb.Spec.Template.Spec)
	root := newRootCmd()
	cmd, rest, err := root.Find(ctr.Args)
	if err != nil || cmd.Name() != "load" {
		t.Fatalf("args %v: command %v (%v), want load", ctr.Args, cmd.Name(), err)
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Fatalf("args %v: %v", ctr.Args, err)
	}
	if a := cmd.Flags().Args(); len(a) != 1 || a[0] != "/etc/rekey/job.yaml" {
		t.Errorf("positional args %v, want the mounted job file", a)
	}
}

// TestBackfillCronJob: the CronJob copies the last whole UTC day, one at a
// time; its args parse with rekey's flags into a one-day range on the
// ConfigMap's job, with a checkpoint per scheduled Job (from the Job's name,
// which its retried pods share).
func TestBackfillCronJob(t *testing.T) {
	var cj batchv1.CronJob
	decodeStrict(t, "backfill-cronjob.yaml", &cj)
	if cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
		t.Errorf("concurrencyPolicy %q, want Forbid: two backfills of one table at once", cj.Spec.ConcurrencyPolicy)
	}
	if cj.Spec.TimeZone == nil || *cj.Spec.TimeZone != "Etc/UTC" {
		t.Errorf("timeZone %v, want Etc/UTC (the relative days are UTC days)", cj.Spec.TimeZone)
	}
	spec := cj.Spec.JobTemplate.Spec
	checkPod(t, spec, batchv1.PodFailurePolicyActionFailJob)
	ctr := rekeyContainer(t, spec.Template.Spec)
	var byName bool
	for _, e := range ctr.Env {
		byName = byName || e.Name == "JOB_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil &&
			e.ValueFrom.FieldRef.FieldPath == "metadata.labels['batch.kubernetes.io/job-name']"
	}
	if !byName {
		t.Error("no JOB_NAME from the pod's job-name label")
	}
	args := expand(ctr.Args, map[string]string{"JOB_NAME": "rekey-events-backfill-29420370"})
	f := parseRun(t, args)
	if !strings.Contains(f.checkpoint, "rekey-events-backfill-29420370") {
		t.Errorf("checkpoint %q is not the scheduled Job's own", f.checkpoint)
	}
	var cm corev1.ConfigMap
	decodeStrict(t, "configmap.yaml", &cm)
	j := configMapJob(t, cm)
	if err := applyRunFlags(j, f); err != nil {
		t.Fatal(err)
	}
	const day = 24 * 3600 * 1000
	if r := j.Source.Scan; r.To-r.From != day || r.To%day != 0 {
		t.Errorf("range [%d, %d): want one whole UTC day", r.From, r.To)
	}
}

// checkPod checks what every rekey Job shares: a failed pod is replaced
// only once it is gone (never two pods of one task at once), pods are not
// restarted in place, exit codes 1 and 2 take onFatal without a retry,
// no other exit code has a rule (so it is retried), and disruptions do
// not count as failures.
func checkPod(t *testing.T, s batchv1.JobSpec, onFatal batchv1.PodFailurePolicyAction) {
	t.Helper()
	if s.PodReplacementPolicy == nil || *s.PodReplacementPolicy != batchv1.Failed {
		t.Errorf("podReplacementPolicy %v, want Failed", s.PodReplacementPolicy)
	}
	if s.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("restartPolicy %q, want Never (a pod failure policy needs it)", s.Template.Spec.RestartPolicy)
	}
	if s.PodFailurePolicy == nil {
		t.Fatal("no podFailurePolicy")
	}
	var fatal, disruption bool
	for _, r := range s.PodFailurePolicy.Rules {
		switch {
		case r.OnExitCodes != nil:
			e := r.OnExitCodes
			codes := slices.Sorted(slices.Values(e.Values))
			if r.Action != onFatal || e.Operator != batchv1.PodFailurePolicyOnExitCodesOpIn || !slices.Equal(codes, []int32{1, 2}) ||
				e.ContainerName == nil || *e.ContainerName != "rekey" {
				t.Errorf("exit code rule %s %s %v on %v: want %s In [1 2] on rekey, and no other", r.Action, e.Operator, e.Values, e.ContainerName, onFatal)
			}
			fatal = true
		case slices.ContainsFunc(r.OnPodConditions, func(c batchv1.PodFailurePolicyOnPodConditionsPattern) bool {
			return c.Type == corev1.DisruptionTarget
		}):
			disruption = r.Action == batchv1.PodFailurePolicyActionIgnore
		}
	}
	if !fatal {
		t.Error("no rule for exit codes 1 and 2")
	}
	if !disruption {
		t.Error("no Ignore rule for DisruptionTarget: an eviction would use up a retry")
	}
}

// rekeyContainer returns the pod's one container, named rekey.
func rekeyContainer(t *testing.T, p corev1.PodSpec) corev1.Container {
	t.Helper()
	if len(p.Containers) != 1 || p.Containers[0].Name != "rekey" {
		t.Fatalf("want one container named rekey, got %d", len(p.Containers))
	}
	c := p.Containers[0]
	if len(c.Command) != 0 {
		t.Errorf("command %v: the image's entrypoint is rekey; args only", c.Command)
	}
	return c
}

// checkIndexEnv: JOB_COMPLETION_INDEX comes from the pod's completion
// index annotation.
func checkIndexEnv(t *testing.T, c corev1.Container) {
	t.Helper()
	for _, e := range c.Env {
		if e.Name == "JOB_COMPLETION_INDEX" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil &&
			e.ValueFrom.FieldRef.FieldPath == "metadata.annotations['batch.kubernetes.io/job-completion-index']" {
			return
		}
	}
	t.Error("no JOB_COMPLETION_INDEX from the completion index annotation")
}

// expand replaces $(NAME) in args as the kubelet does with the
// container's environment.
func expand(args []string, env map[string]string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		for k, v := range env {
			a = strings.ReplaceAll(a, "$("+k+")", v)
		}
		if strings.Contains(a, "$(") {
			panic("unexpanded variable in " + a)
		}
		out[i] = a
	}
	return out
}

// parseRun parses args as rekey run's command line, with rekey's own flag
// set, and returns the flags the checks read.
func parseRun(t *testing.T, args []string) runFlags {
	t.Helper()
	root := newRootCmd()
	cmd, rest, err := root.Find(args)
	if err != nil || cmd.Name() != "run" {
		t.Fatalf("args %v: command %q (%v), want run", args, cmd.Name(), err)
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Fatalf("args %v: %v", args, err)
	}
	if a := cmd.Flags().Args(); len(a) != 1 || a[0] != "/etc/rekey/job.yaml" {
		t.Fatalf("positional args %v, want the mounted job file", a)
	}
	fl := cmd.Flags()
	str := func(name string) string { v, _ := fl.GetString(name); return v }
	boolean := func(name string) bool { v, _ := fl.GetBool(name); return v }
	return runFlags{phase: str("phase"), shard: str("shard"), part: str("part"), sink: str("sink"), staging: str("staging"),
		checkpoint: str("checkpoint"), from: str("from"), to: str("to"), progress: str("progress"),
		resume: boolean("resume"), forceTakeover: boolean("force-takeover"), json: boolean("json")}
}
