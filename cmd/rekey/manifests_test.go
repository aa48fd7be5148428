package main

import (
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/pipeline"
)

// The manifests in deploy/kubernetes are checked here as an operator
// applies them: the example overlay is rendered with kustomize's own Go
// API (what kubectl kustomize runs), and every object it renders is
// decoded strictly into its Kubernetes API type (an unknown or misspelt
// field is an error), then checked against rekey's own command line and
// job loader. No API server or kubelet runs: what the Job controller does
// with them is not tested.

const (
	kubeBase    = "../../deploy/kubernetes/base"
	kubeOverlay = "../../deploy/kubernetes/overlays/example"
	// The overlay's settings, which the checks find in the render.
	overlayPrefix = "rekey-events-"
	overlayImage  = "registry.example.com/rekey:0.1.0"
)

// kube is one render of the overlay: its objects by kind and name.
type kube struct {
	jobs       map[string]*batchv1.Job // by app.kubernetes.io/component
	cronJobs   map[string]*batchv1.CronJob
	configMaps map[string]*corev1.ConfigMap // by their full name
	secrets    map[string]*corev1.Secret
}

// decodeStrict reads one object into out, refusing unknown fields.
func decodeStrict(t *testing.T, what string, b []byte, out any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(b, out); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// decodeKind decodes b strictly into the API type its apiVersion and kind
// name, among those rekey's manifests use.
func decodeKind(t *testing.T, what string, b []byte) any {
	t.Helper()
	var head struct{ APIVersion, Kind string }
	if err := yaml.Unmarshal(b, &head); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	var obj any
	switch head.APIVersion + " " + head.Kind {
	case "batch/v1 Job":
		obj = &batchv1.Job{}
	case "batch/v1 CronJob":
		obj = &batchv1.CronJob{}
	case "v1 ConfigMap":
		obj = &corev1.ConfigMap{}
	case "v1 Secret":
		obj = &corev1.Secret{}
	default:
		t.Fatalf("%s: %s %s is not a kind this test knows", what, head.APIVersion, head.Kind)
	}
	decodeStrict(t, what, b, obj)
	return obj
}

// render builds the example overlay with the kustomize API and decodes
// what it renders.
func render(t *testing.T) kube {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), kubeOverlay)
	if err != nil {
		t.Fatalf("kustomize %s: %v", kubeOverlay, err)
	}
	k := kube{jobs: map[string]*batchv1.Job{}, cronJobs: map[string]*batchv1.CronJob{},
		configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{}}
	for _, r := range m.Resources() {
		b, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		what := r.CurId().String()
		switch o := decodeKind(t, what, b).(type) {
		case *batchv1.Job:
			k.jobs[o.Labels["app.kubernetes.io/component"]] = o
		case *batchv1.CronJob:
			k.cronJobs[o.Labels["app.kubernetes.io/component"]] = o
		case *corev1.ConfigMap:
			k.configMaps[o.Name] = o
		case *corev1.Secret:
			k.secrets[o.Name] = o
		}
	}
	return k
}

// generated returns the ConfigMap or Secret the overlay generated as name
// (its full name is the prefix, name and a hash).
func generated[T any](t *testing.T, objs map[string]*T, name string) (string, *T) {
	t.Helper()
	for full, o := range objs {
		if strings.HasPrefix(full, overlayPrefix+name+"-") {
			return full, o
		}
	}
	t.Fatalf("the render has no %s%s-<hash>", overlayPrefix, name)
	return "", nil
}

// params is the overlay's params ConfigMap: the counts and names.
func (k kube) params(t *testing.T) map[string]string {
	_, cm := generated(t, k.configMaps, "params")
	return cm.Data
}

// podSpecs returns every rekey pod template of the render, by component.
func (k kube) podSpecs() map[string]corev1.PodTemplateSpec {
	out := map[string]corev1.PodTemplateSpec{}
	for c, j := range k.jobs {
		out[c] = j.Spec.Template
	}
	for c, cj := range k.cronJobs {
		out[c] = cj.Spec.JobTemplate.Spec.Template
	}
	return out
}

// env resolves the container's environment as the kubelet would: values,
// ConfigMap keys of the render (an optional key that is missing stays
// unset), and the downward API fields given.
func (k kube) env(t *testing.T, c corev1.Container, fields map[string]string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			out[e.Name] = e.Value
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			cm, ok := k.configMaps[ref.Name]
			if !ok {
				t.Fatalf("env %s: no ConfigMap %s in the render", e.Name, ref.Name)
			}
			v, ok := cm.Data[ref.Key]
			if !ok && (ref.Optional == nil || !*ref.Optional) {
				t.Fatalf("env %s: ConfigMap %s has no key %s", e.Name, ref.Name, ref.Key)
			}
			if ok {
				out[e.Name] = v
			}
		case e.ValueFrom.FieldRef != nil:
			if v, ok := fields[e.ValueFrom.FieldRef.FieldPath]; ok {
				out[e.Name] = v
			}
		}
	}
	return out
}

// The downward API fields the Jobs' pods read.
const (
	indexField   = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
	jobNameField = "metadata.labels['batch.kubernetes.io/job-name']"
)

// TestManifestsDecodeStrictly: every file of the base decodes strictly on
// its own, and the overlay renders the kinds and names an operator
// applies: five Jobs, the CronJob, the two ConfigMaps and two Secrets,
// each named with the overlay's prefix and labelled with its instance.
func TestManifestsDecodeStrictly(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(kubeBase, "*.yaml"))
	if err != nil || len(files) < 2 {
		t.Fatalf("no manifests in %s (%v)", kubeBase, err)
	}
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		decodeKind(t, f, b)
	}
	k := render(t)
	for _, c := range []string{"spill", "merge", "load", "verify", "status"} {
		if k.jobs[c] == nil {
			t.Errorf("the render has no %s Job", c)
		}
	}
	if k.cronJobs["backfill"] == nil {
		t.Error("the render has no backfill CronJob")
	}
	generated(t, k.configMaps, "params")
	generated(t, k.configMaps, "config")
	generated(t, k.secrets, "kerberos")
	generated(t, k.secrets, "objectstore")
	labelled := func(what string, labels map[string]string) {
		if labels["app.kubernetes.io/name"] != "rekey" || labels["app.kubernetes.io/instance"] != "events" {
			t.Errorf("%s labelled %v: want app.kubernetes.io/name rekey and instance events", what, labels)
		}
	}
	check := func(kind, name string, labels map[string]string) {
		if !strings.HasPrefix(name, overlayPrefix) {
			t.Errorf("%s %s: want the overlay's prefix %s", kind, name, overlayPrefix)
		}
		labelled(kind+" "+name, labels)
	}
	for _, j := range k.jobs {
		check("Job", j.Name, j.Labels)
	}
	for _, j := range k.cronJobs {
		check("CronJob", j.Name, j.Labels)
	}
	for c, p := range k.podSpecs() {
		labelled("the pods of "+c, p.Labels)
		if ctr := rekeyContainer(t, p.Spec); ctr.Image != overlayImage {
			t.Errorf("%s: image %q, want the overlay's %s", c, ctr.Image, overlayImage)
		}
	}
}

// TestConfigMapJobFile: the rendered ConfigMap's job file is a valid rekey
// job with the hfiles sink and its state on HDFS, and the client
// configuration the pods point HBASE_CONF_DIR and HADOOP_CONF_DIR at is
// there.
func TestConfigMapJobFile(t *testing.T) {
	k := render(t)
	_, cm := generated(t, k.configMaps, "config")
	for _, key := range []string{"job.yaml", "hbase-site.xml", "core-site.xml", "hdfs-site.xml"} {
		if cm.Data[key] == "" {
			t.Errorf("the ConfigMap has no %s", key)
		}
	}
	j := configMapJob(t, k)
	if j.Sink.Kind != job.SinkHFiles {
		t.Errorf("the job's sink is %q, want hfiles (the phases need it)", j.Sink.Kind)
	}
	for what, p := range map[string]string{"run.checkpoint": j.Run.Checkpoint, "sink.staging": j.Sink.Staging} {
		if !strings.HasPrefix(p, "hdfs://") {
			t.Errorf("%s is %q: a retried pod on another node would not find it; want hdfs://", what, p)
		}
	}
	for c, p := range k.podSpecs() {
		ctr := rekeyContainer(t, p.Spec)
		env := k.env(t, ctr, nil)
		if env["HBASE_CONF_DIR"] != "/etc/rekey" || env["HADOOP_CONF_DIR"] != "/etc/rekey" {
			t.Errorf("%s: HBASE_CONF_DIR %q, HADOOP_CONF_DIR %q, want /etc/rekey", c, env["HBASE_CONF_DIR"], env["HADOOP_CONF_DIR"])
		}
		if v := volumeOf(t, p.Spec, ctr, "/etc/rekey"); v.ConfigMap == nil || v.ConfigMap.Name != cm.Name {
			t.Errorf("%s: /etc/rekey is %+v, want the ConfigMap %s", c, v.VolumeSource, cm.Name)
		}
	}
}

// configMapJob loads the rendered ConfigMap's job file with rekey's job
// loader.
func configMapJob(t *testing.T, k kube) *job.Job {
	t.Helper()
	_, cm := generated(t, k.configMaps, "config")
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

// volumeOf returns the pod's volume the container mounts at dir.
func volumeOf(t *testing.T, p corev1.PodSpec, c corev1.Container, dir string) corev1.Volume {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if m.MountPath != dir {
			continue
		}
		for _, v := range p.Volumes {
			if v.Name == m.Name {
				return v
			}
		}
		t.Fatalf("mount %s names no volume %s", dir, m.Name)
	}
	t.Fatalf("nothing mounted at %s", dir)
	return corev1.Volume{}
}

// TestIndexedJobs: the spill and the merge are Indexed Jobs whose pods
// take their shard or part from JOB_COMPLETION_INDEX and the count from
// the overlay's params, both through $(...) in args (no shell); the count
// is the same number in completions, in the pods' --shard or --part and
// in params, set once; rekey's exit codes map to the pod failure policy:
// 1 and 2 fail the index, anything else is retried; a pod is replaced
// only once it has failed; the merge waits for the spill (--wait-ready).
func TestIndexedJobs(t *testing.T) {
	k := render(t)
	j := configMapJob(t, k)
	params := k.params(t)
	for _, c := range []struct {
		phase pipeline.Phase
		flag  string
		count string // the params key
	}{{pipeline.PhaseSpill, "shard", "shards"}, {pipeline.PhaseMerge, "part", "parts"}} {
		t.Run(string(c.phase), func(t *testing.T) {
			jb := k.jobs[string(c.phase)]
			if jb == nil {
				t.Fatalf("no %s Job", c.phase)
			}
			s := jb.Spec
			if s.CompletionMode == nil || *s.CompletionMode != batchv1.IndexedCompletion {
				t.Fatalf("completionMode %v, want Indexed", s.CompletionMode)
			}
			if s.Completions == nil || *s.Completions < 1 {
				t.Fatal("no completions")
			}
			n := int(*s.Completions)
			if want, err := strconv.Atoi(params[c.count]); err != nil || n != want {
				t.Errorf("completions %d, params.%s %q: want the same count", n, c.count, params[c.count])
			}
			if c.phase == pipeline.PhaseMerge && (s.Parallelism == nil || int(*s.Parallelism) != n) {
				t.Errorf("merge parallelism %v, want every part at once (%d)", s.Parallelism, n)
			}
			if s.BackoffLimitPerIndex == nil {
				t.Error("no backoffLimitPerIndex: one index's retries would use up the whole Job's")
			}
			checkPod(t, jb.Spec, batchv1.PodFailurePolicyActionFailIndex)
			ctr := rekeyContainer(t, s.Template.Spec)
			checkIndexEnv(t, ctr)
			for i := 0; i < n; i++ {
				args := expand(ctr.Args, k.env(t, ctr, map[string]string{indexField: strconv.Itoa(i)}))
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
				if c.phase == pipeline.PhaseMerge && f.waitReady <= 0 {
					t.Errorf("index %d: no --wait-ready: a part started with the spill would exit 2 and fail its index", i)
				}
			}
		})
	}
}

// TestLoadJob: the load is one pod, rekey load on the ConfigMap's job,
// waiting for the merge (--wait-ready); exit 1 and 2 fail the Job at once.
func TestLoadJob(t *testing.T) {
	k := render(t)
	jb := k.jobs["load"]
	if jb == nil {
		t.Fatal("no load Job")
	}
	if jb.Spec.CompletionMode != nil && *jb.Spec.CompletionMode == batchv1.IndexedCompletion {
		t.Error("the load is one task, not an Indexed Job")
	}
	checkPod(t, jb.Spec, batchv1.PodFailurePolicyActionFailJob)
	ctr := rekeyContainer(t, jb.Spec.Template.Spec)
	cmd := parseCommand(t, ctr.Args, "load")
	if d, _ := cmd.Flags().GetDuration("wait-ready"); d <= 0 {
		t.Error("no --wait-ready: a load started with the merge would exit 2 and fail the Job")
	}
}

// TestVerifyAndStatusJobs: verify and status are Jobs of one pod, created
// suspended (verify must not start before the load is done; status is
// asked for), whose args parse as those subcommands on the mounted job
// file; verify's 1 (a mismatch) and 2 fail the Job, 4 is retried.
func TestVerifyAndStatusJobs(t *testing.T) {
	k := render(t)
	for _, c := range []string{"verify", "status"} {
		jb := k.jobs[c]
		if jb == nil {
			t.Fatalf("no %s Job", c)
		}
		if jb.Spec.Suspend == nil || !*jb.Spec.Suspend {
			t.Errorf("%s: not suspended: it would run as soon as it is applied", c)
		}
		checkPod(t, jb.Spec, batchv1.PodFailurePolicyActionFailJob)
		parseCommand(t, rekeyContainer(t, jb.Spec.Template.Spec).Args, c)
	}
}

// TestBackfillCronJob: the CronJob copies the last whole UTC day, one at a
// time, from the snapshot the overlay names in params; its args parse
// with rekey's flags into a one-day range on the ConfigMap's job, with a
// checkpoint per scheduled Job (from the Job's name, which its retried
// pods share) under the params' HDFS folder.
func TestBackfillCronJob(t *testing.T) {
	k := render(t)
	cj := k.cronJobs["backfill"]
	if cj == nil {
		t.Fatal("no backfill CronJob")
	}
	if cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
		t.Errorf("concurrencyPolicy %q, want Forbid: two backfills of one table at once", cj.Spec.ConcurrencyPolicy)
	}
	if cj.Spec.TimeZone == nil || *cj.Spec.TimeZone != "Etc/UTC" {
		t.Errorf("timeZone %v, want Etc/UTC (the relative days are UTC days)", cj.Spec.TimeZone)
	}
	spec := cj.Spec.JobTemplate.Spec
	checkPod(t, spec, batchv1.PodFailurePolicyActionFailJob)
	ctr := rekeyContainer(t, spec.Template.Spec)
	const jobName = "rekey-events-backfill-29420370"
	env := k.env(t, ctr, map[string]string{jobNameField: jobName})
	if env["JOB_NAME"] != jobName {
		t.Error("no JOB_NAME from the pod's job-name label")
	}
	f := parseRun(t, expand(ctr.Args, env))
	params := k.params(t)
	if !strings.HasPrefix(f.checkpoint, params["backfill_state"]+"/"+jobName+"/") || !strings.HasPrefix(f.checkpoint, "hdfs://") {
		t.Errorf("checkpoint %q is not the scheduled Job's own under params.backfill_state %q on HDFS", f.checkpoint, params["backfill_state"])
	}
	j := configMapJob(t, k)
	if err := applyRunFlags(j, f); err != nil {
		t.Fatal(err)
	}
	if want := params["backfill_snapshot"]; want == "" || j.Source.Name != want {
		t.Errorf("the run reads snapshot %q, want params.backfill_snapshot %q", j.Source.Name, want)
	}
	const day = 24 * 3600 * 1000
	if r := j.Source.Scan; r.To-r.From != day || r.To%day != 0 {
		t.Errorf("range [%d, %d): want one whole UTC day", r.From, r.To)
	}
}

// TestSecretsMounted: every rekey pod mounts the generated Kerberos Secret
// where the job file's security section names the keytab and krb5.conf,
// with both files in it, and takes the object-store Secret as its
// environment; every ConfigMap or Secret a pod names is in the render (a
// generated name has a hash, so a name kustomize did not rewrite would
// name nothing).
func TestSecretsMounted(t *testing.T) {
	k := render(t)
	sec := configMapJob(t, k).Security
	if sec.Keytab == "" || sec.Krb5Conf == "" || sec.Principal == "" {
		t.Fatalf("the example job has no keytab, principal and krb5.conf: %+v", sec)
	}
	dir := path.Dir(sec.Keytab)
	if path.Dir(sec.Krb5Conf) != dir {
		t.Fatalf("keytab %s and krb5.conf %s in two folders; the Secret is mounted at one", sec.Keytab, sec.Krb5Conf)
	}
	krbName, krbSecret := generated(t, k.secrets, "kerberos")
	for _, f := range []string{sec.Keytab, sec.Krb5Conf} {
		if _, ok := krbSecret.Data[path.Base(f)]; !ok {
			t.Errorf("the Secret %s has no %s (the job names %s)", krbName, path.Base(f), f)
		}
	}
	osName, _ := generated(t, k.secrets, "objectstore")
	for c, p := range k.podSpecs() {
		ctr := rekeyContainer(t, p.Spec)
		v := volumeOf(t, p.Spec, ctr, dir)
		if v.Secret == nil || v.Secret.SecretName != krbName {
			t.Errorf("%s: %s is %+v, want the Secret %s", c, dir, v.VolumeSource, krbName)
		}
		if !slices.ContainsFunc(ctr.EnvFrom, func(e corev1.EnvFromSource) bool {
			return e.SecretRef != nil && e.SecretRef.Name == osName
		}) {
			t.Errorf("%s: no envFrom of the Secret %s", c, osName)
		}
		for _, v := range p.Spec.Volumes {
			if v.ConfigMap != nil && k.configMaps[v.ConfigMap.Name] == nil {
				t.Errorf("%s: volume %s names no ConfigMap of the render: %s", c, v.Name, v.ConfigMap.Name)
			}
			if v.Secret != nil && k.secrets[v.Secret.SecretName] == nil {
				t.Errorf("%s: volume %s names no Secret of the render: %s", c, v.Name, v.Secret.SecretName)
			}
		}
		for _, e := range ctr.EnvFrom {
			if e.SecretRef != nil && k.secrets[e.SecretRef.Name] == nil {
				t.Errorf("%s: envFrom names no Secret of the render: %s", c, e.SecretRef.Name)
			}
		}
		k.env(t, ctr, nil) // every configMapKeyRef resolves
	}
}

// TestMetricsPorts: the pods that serve metrics (rekey run: the spill
// shards and the backfill) serve them with --metrics-addr on every
// interface, on the port they declare and annotate for a Prometheus.
func TestMetricsPorts(t *testing.T) {
	k := render(t)
	specs := k.podSpecs()
	for _, c := range []string{"spill", "backfill"} {
		p := specs[c]
		ctr := rekeyContainer(t, p.Spec)
		env := k.env(t, ctr, map[string]string{indexField: "0", jobNameField: "x"})
		f := parseRun(t, expand(ctr.Args, env))
		host, port, err := net.SplitHostPort(f.metricsAddr)
		if err != nil || host != "" {
			t.Errorf("%s: --metrics-addr %q (%v), want :PORT (every interface: the pod's IP)", c, f.metricsAddr, err)
			continue
		}
		if !slices.ContainsFunc(ctr.Ports, func(cp corev1.ContainerPort) bool {
			return cp.Name == "metrics" && strconv.Itoa(int(cp.ContainerPort)) == port
		}) {
			t.Errorf("%s: no container port named metrics on %s", c, port)
		}
		if a := p.Annotations; a["prometheus.io/scrape"] != "true" || a["prometheus.io/port"] != port || a["prometheus.io/path"] != "/metrics" {
			t.Errorf("%s: annotations %v, want a scrape of :%s/metrics", c, a, port)
		}
	}
}

// checkPod checks what every rekey Job shares: a failed pod is replaced
// only once it is gone (never two pods of one task at once), pods are not
// restarted in place, the exit codes rekey means as final (exitProblems,
// exitUsage) take onFatal without a retry, those it means as worth
// another attempt (exitInterrupted, exitRetry) match no rule (so they
// are retried), and disruptions do not count as failures.
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
			if r.Action != onFatal || e.Operator != batchv1.PodFailurePolicyOnExitCodesOpIn || !slices.Equal(codes, []int32{exitProblems, exitUsage}) ||
				e.ContainerName == nil || *e.ContainerName != "rekey" {
				t.Errorf("exit code rule %s %s %v on %v: want %s In [1 2] on rekey, and no other", r.Action, e.Operator, e.Values, e.ContainerName, onFatal)
			}
			for _, retried := range []int32{exitInterrupted, exitRetry} {
				if slices.Contains(e.Values, retried) {
					t.Errorf("exit %d (retry) matches the rule %s", retried, r.Action)
				}
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
			e.ValueFrom.FieldRef.FieldPath == indexField {
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

// parseCommand parses args with rekey's own command tree as the
// subcommand want on the mounted job file, and returns the command with
// its flags set.
func parseCommand(t *testing.T, args []string, want string) *cobra.Command {
	t.Helper()
	root := newRootCmd()
	cmd, rest, err := root.Find(args)
	if err != nil || cmd.Name() != want {
		t.Fatalf("args %v: command %q (%v), want %s", args, cmd.Name(), err, want)
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Fatalf("args %v: %v", args, err)
	}
	if a := cmd.Flags().Args(); len(a) != 1 || a[0] != "/etc/rekey/job.yaml" {
		t.Fatalf("args %v: positional args %v, want the mounted job file", args, a)
	}
	return cmd
}

// parseRun parses args as rekey run's command line, with rekey's own flag
// set, and returns the flags the checks read.
func parseRun(t *testing.T, args []string) runFlags {
	t.Helper()
	fl := parseCommand(t, args, "run").Flags()
	str := func(name string) string { v, _ := fl.GetString(name); return v }
	boolean := func(name string) bool { v, _ := fl.GetBool(name); return v }
	dur := func(name string) time.Duration { v, _ := fl.GetDuration(name); return v }
	return runFlags{phase: str("phase"), shard: str("shard"), part: str("part"), sink: str("sink"), staging: str("staging"),
		checkpoint: str("checkpoint"), from: str("from"), to: str("to"), progress: str("progress"),
		metricsAddr: str("metrics-addr"), sourceSnapshot: str("source-snapshot"), waitReady: dur("wait-ready"),
		resume: boolean("resume"), forceTakeover: boolean("force-takeover"), json: boolean("json")}
}

// TestCatchupCronJobExample: the catch-up args the backfill CronJob shows
// in a comment parse with rekey's flags, with the CronJob's environment,
// into a catch-up from the last reached snapshot to params'
// backfill_snapshot, with the same checkpoint every night (where the
// reached record lies) under params.backfill_state, and no relative
// range (a range that moves each night is another job each night, and
// the record would refuse it).
func TestCatchupCronJobExample(t *testing.T) {
	k := render(t)
	b, err := os.ReadFile(filepath.Join(kubeOverlay, "..", "..", "base", "backfill-cronjob.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, line := range strings.Split(string(b), "\n") {
		if _, rest, ok := strings.Cut(line, "# catch-up args: "); ok {
			if err := yaml.Unmarshal([]byte(rest), &args); err != nil {
				t.Fatalf("the catch-up args %q: %v", rest, err)
			}
		}
	}
	if len(args) == 0 {
		t.Fatal("the backfill CronJob shows no catch-up args")
	}
	ctr := rekeyContainer(t, k.cronJobs["backfill"].Spec.JobTemplate.Spec.Template.Spec)
	env := k.env(t, ctr, map[string]string{jobNameField: "rekey-events-backfill-29420370"})
	cmd := parseCommand(t, expand(args, env), "run")
	fl := cmd.Flags()
	since, _ := fl.GetString("since")
	ckpt, _ := fl.GetString("checkpoint")
	snap, _ := fl.GetString("source-snapshot")
	from, _ := fl.GetString("from")
	to, _ := fl.GetString("to")
	params := k.params(t)
	if since != pipeline.SinceLast {
		t.Errorf("--since %q, want %q", since, pipeline.SinceLast)
	}
	if !strings.HasPrefix(ckpt, params["backfill_state"]+"/") || strings.Contains(ckpt, "rekey-events-backfill-29420370") {
		t.Errorf("checkpoint %q: want one for every night under %s, not the scheduled Job's own", ckpt, params["backfill_state"])
	}
	if snap != params["backfill_snapshot"] {
		t.Errorf("--source-snapshot %q, want params.backfill_snapshot %q", snap, params["backfill_snapshot"])
	}
	if from != "" || to != "" {
		t.Errorf("--from %q --to %q: a catch-up's job must not move each night", from, to)
	}
}
