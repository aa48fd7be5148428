package kubeletshim_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/rekeyhq/rekey/internal/kubeletshim"
	"github.com/rekeyhq/rekey/internal/testenv"
)

// client connects to testenv/k8s's control plane, or skips saying why
// (fails under REKEY_REQUIRE_K8S=1).
func client(t *testing.T) kubernetes.Interface {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Kubeconfig string `json:"kubeconfig"`
	}
	var c kubernetes.Interface
	b, err := os.ReadFile(filepath.Join(root, "testenv", "run-k8s", "state.json"))
	if err == nil {
		err = json.Unmarshal(b, &st)
	}
	if err == nil {
		c, err = newClient(st.Kubeconfig)
	}
	if err == nil {
		_, err = c.Discovery().ServerVersion()
	}
	if err != nil {
		msg := fmt.Sprintf("KUBERNETES SUITE NOT RUN: no Kubernetes control plane answers (%v); `make test-k8s` builds and starts one (testenv/k8s up)", err)
		if os.Getenv("REKEY_REQUIRE_K8S") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return c
}

func newClient(kubeconfig string) (kubernetes.Interface, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(rc)
}

// TestShimPod runs one bare pod through the real scheduler onto the
// stand-in node: /bin/sh plays the image's entrypoint and writes what it
// sees into a file of its own, then exits 7. The pod reads env from a
// ConfigMap (configMapKeyRef and envFrom with a prefix), a Secret, the
// downward API and a literal with $(VAR) in it; $(VAR) in args is
// expanded, $$ escaped; the ConfigMap and the Secret are mounted and their
// mount paths rewritten in args. The pod ends Failed with exit code 7 in
// its container status. A second pod, sleeping, is deleted: it gets
// SIGTERM, exits with 143 (128+15) and is removed.
func TestShimPod(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	ns := fmt.Sprintf("shim-%d", time.Now().UnixNano()%1_000_000_000)
	node := "shim-node-" + ns
	// Every pod of the namespace goes to this test's node (PodNodeSelector,
	// which testenv/k8s enables), whatever other stand-in nodes run beside.
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Annotations: map[string]string{"scheduler.alpha.kubernetes.io/node-selector": "kubernetes.io/hostname=" + node}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	out := t.TempDir()
	s, err := kubeletshim.Start(ctx, kubeletshim.Config{Client: c, Node: node, Images: map[string]string{"sh:test": "/bin/sh"},
		Root: t.TempDir(), Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	if _, err := c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "params"},
		Data: map[string]string{"shards": "8", "file.txt": "from the configmap"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"},
		Data: map[string][]byte{"key": []byte("s3cret")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if _, err := c.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			break
		}
		if i == 300 {
			t.Fatal("no default ServiceAccount in 30 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	result := filepath.Join(out, "result")
	// $0 is "sh"; $1 and $2 are mounted files, named by their paths in the
	// container, which the shim rewrites where they stand as whole args.
	script := `{ echo 'args: $(SHARDS) $$(SHARDS) $(NOPE)'; echo "env: $SHARDS $P_shards $KEY $POD $INDEX $COMBINED ${MISSING-unset}"; ` +
		`cat "$1"; echo; cat "$2"; echo; cat "$CONF/file.txt"; } > ` + result + `; exit 7`
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "one", Annotations: map[string]string{"batch.kubernetes.io/job-completion-index": "5"}},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "main", Image: "sh:test",
				Args:    []string{"-c", script, "sh", "/etc/params/file.txt", "/etc/creds/key"},
				EnvFrom: []corev1.EnvFromSource{{Prefix: "P_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "params"}}}},
				Env: []corev1.EnvVar{
					{Name: "SHARDS", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "params"}, Key: "shards"}}},
					{Name: "KEY", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "key"}}},
					{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
					{Name: "INDEX", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}},
					{Name: "COMBINED", Value: "$(INDEX)/$(SHARDS)"},
					{Name: "CONF", Value: "/etc/params"},
					{Name: "MISSING", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "params"}, Key: "nope", Optional: ptr(true)}}},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "params", MountPath: "/etc/params"}, {Name: "creds", MountPath: "/etc/creds"}},
			}},
			Volumes: []corev1.Volume{
				{Name: "params", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "params"}}}},
				{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}},
			},
		},
	}
	if _, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := waitPhase(t, c, ns, "one", corev1.PodFailed)
	if cs := p.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.ExitCode != 7 {
		t.Fatalf("pod one: container statuses %+v; want terminated with exit code 7", cs)
	}
	if p.Spec.NodeName != node {
		t.Errorf("pod one ran on %q, want the stand-in node %q", p.Spec.NodeName, node)
	}
	got, err := os.ReadFile(result)
	if err != nil {
		t.Fatalf("the pod's process wrote nothing: %v", err)
	}
	want := "args: 8 $(SHARDS) $(NOPE)\nenv: 8 8 s3cret one 5 5/8 unset\nfrom the configmap\ns3cret\nfrom the configmap"
	if string(got) != want {
		t.Errorf("the pod saw:\n%s\nwant:\n%s", got, want)
	}

	// Deleted while it runs: SIGTERM, exit 143, status Failed, removed. A
	// finalizer of the test's keeps the object to read its last status.
	sleeper := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "sleeper", Finalizers: []string{"rekey.test/hold"}},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr(int64(20)),
			Containers:                    []corev1.Container{{Name: "main", Image: "sh:test", Args: []string{"-c", "sleep 300"}}},
		},
	}
	if _, err := c.CoreV1().Pods(ns).Create(ctx, sleeper, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, c, ns, "sleeper", corev1.PodRunning)
	start := time.Now()
	if err := c.CoreV1().Pods(ns).Delete(ctx, "sleeper", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	p = waitPhase(t, c, ns, "sleeper", corev1.PodFailed)
	if cs := p.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.ExitCode != 143 {
		t.Errorf("sleeper: container statuses %+v; want terminated with exit code 143 (SIGTERM)", cs)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("sleeper ended %s after its deletion: SIGTERM should end it at once, not the SIGKILL after 20 s", d)
	}
	if _, err := c.CoreV1().Pods(ns).Patch(ctx, "sleeper", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if _, err := c.CoreV1().Pods(ns).Get(ctx, "sleeper", metav1.GetOptions{}); err != nil {
			break
		}
		if i == 100 {
			t.Fatal("sleeper still there 10 s after its finalizer went: the stand-in made no final delete")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func ptr[T any](v T) *T { return &v }

// waitPhase waits up to a minute for a pod to reach a phase.
func waitPhase(t *testing.T, c kubernetes.Interface, ns, name string, phase corev1.PodPhase) *corev1.Pod {
	t.Helper()
	for i := 0; ; i++ {
		p, err := c.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Status.Phase == phase {
			return p
		}
		if i == 600 {
			t.Fatalf("pod %s: phase %s after 60 s, want %s: %+v", name, p.Status.Phase, phase, p.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
