// Package kubeletshim stands in for the kubelet of one node, for tests
// only: with a real API server, scheduler and controller manager it lets
// the real Job controller run rekey's pods as local processes.
//
// It registers a Node (Ready, large allocatable CPU and memory, address
// 127.0.0.1) and keeps its Lease and Ready condition fresh. For each pod
// the scheduler binds to that node it
//   - builds the container's environment as the kubelet does: envFrom
//     (ConfigMaps, Secrets), then env (values with $(VAR) expanded, and
//     valueFrom: configMapKeyRef, secretKeyRef, the downward API's
//     fieldRef, e.g. the job-completion-index annotation);
//   - writes its ConfigMap, Secret, projected and emptyDir volumes to a
//     folder per pod, each at that folder plus its mount path, and
//     rewrites the mount paths where they stand as paths in the command,
//     args and env values (so /etc/rekey/job.yaml becomes
//     POD/etc/rekey/job.yaml); paths inside the mounted files are not
//     rewritten;
//   - runs the container's command and args, $(VAR) expanded, as a local
//     process: the image's entrypoint is the program Config.Images names
//     for it; the process gets PATH, HOSTNAME and the container's env,
//     nothing of the test's own environment;
//   - reports Running, then Succeeded or Failed with the exit code (or
//     128+signal) in containerStatuses[].state.terminated;
//   - when the pod is deleted, sends SIGTERM, then SIGKILL after the
//     pod's grace period, reports the pod Failed (or Succeeded on exit 0)
//     and removes it, as the kubelet's final delete does.
//
// What it does not do: images (no pull, no filesystem of the image: the
// process sees the host's), cgroups and resources (requests and limits
// are ignored, nothing is evicted), users and securityContext, probes,
// restarts in place (restartPolicy OnFailure or Always is refused: Jobs
// here use Never), init and sidecar containers (one container a pod),
// subPath mounts, service-account tokens, networking (every process is
// on the host's loopback, ports are not isolated), logs through the API
// (kubectl logs does not work; LogPath names the files), exec and
// port-forward.
package kubeletshim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
)

// Config is one stand-in node.
type Config struct {
	// Client talks to the API server.
	Client kubernetes.Interface
	// Node is the name of the node to register and serve.
	Node string
	// Images maps a container image, as the pod names it after the
	// overlay's rewrite (e.g. "rekey-test:dev"), to the local program that
	// plays its entrypoint.
	Images map[string]string
	// Root is the folder of the pods' volumes and logs, one folder each.
	Root string
	// Logf, if set, receives a line per pod event.
	Logf func(format string, args ...any)
}

// Shim is a running stand-in node.
type Shim struct {
	cfg    Config
	mu     sync.Mutex
	pods   map[types.UID]*podRun
	wg     sync.WaitGroup
	cancel context.CancelFunc
}

// podRun is one pod's process and what is known of it.
type podRun struct {
	pod      *corev1.Pod
	dir      string
	cmd      *exec.Cmd
	started  time.Time
	deleting bool // a deletion was seen: the process is being stopped
	exited   bool // the process ended (or never started): signal nothing
	code     int  // its exit code once exited and it ran (-1: it never ran)
	done     chan struct{}
}

// Start registers the node and serves its pods until Stop.
func Start(ctx context.Context, cfg Config) (*Shim, error) {
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &Shim{cfg: cfg, pods: map[types.UID]*podRun{}, cancel: cancel}
	if err := s.register(ctx); err != nil {
		cancel()
		return nil, err
	}
	s.wg.Add(1)
	go func() { defer s.wg.Done(); s.heartbeat(ctx) }()
	f := informers.NewSharedInformerFactoryWithOptions(cfg.Client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", cfg.Node).String()
	}))
	inf := f.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { s.sync(ctx, o) },
		UpdateFunc: func(_, o any) { s.sync(ctx, o) },
		DeleteFunc: func(o any) {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if p, ok := o.(*corev1.Pod); ok {
				s.gone(p)
			}
		},
	}); err != nil {
		cancel()
		return nil, err
	}
	f.Start(ctx.Done())
	s.wg.Add(1)
	go func() { defer s.wg.Done(); f.WaitForCacheSync(ctx.Done()); <-ctx.Done(); f.Shutdown() }()
	return s, nil
}

// Stop kills every process still running (SIGKILL), stops serving and
// removes the node.
func (s *Shim) Stop() {
	s.mu.Lock()
	for _, r := range s.pods {
		r.signal(syscall.SIGKILL)
	}
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = s.cfg.Client.CoreV1().Nodes().Delete(ctx, s.cfg.Node, metav1.DeleteOptions{})
}

// LogPath is the file of a pod's stdout or stderr ("stdout", "stderr").
func (s *Shim) LogPath(namespace, pod, stream string) string {
	return filepath.Join(s.cfg.Root, namespace+"_"+pod, stream+".log")
}

// PID is the process id of a pod's running process, 0 if none runs.
func (s *Shim) PID(uid types.UID) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.pods[uid]; r != nil && r.cmd != nil && !r.exited {
		return r.cmd.Process.Pid
	}
	return 0
}

// ExitCode is the exit code of a pod's process once it has ended (128 +
// the signal for one killed by a signal), even after the pod object is
// gone; ok is false while it runs or if it never ran here.
func (s *Shim) ExitCode(uid types.UID) (code int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.pods[uid]; r != nil && r.cmd != nil && r.exited {
		return r.code, true
	}
	return 0, false
}

// signal sends sig to the pod's process group if its process runs (the
// caller holds s.mu; exited is set under it, so a reused pid is never
// signalled).
func (r *podRun) signal(sig syscall.Signal) {
	if r.cmd != nil && r.cmd.Process != nil && !r.exited {
		_ = syscall.Kill(-r.cmd.Process.Pid, sig)
	}
}

var nodeResources = corev1.ResourceList{
	corev1.ResourceCPU:    resource.MustParse("64"),
	corev1.ResourceMemory: resource.MustParse("256Gi"),
	corev1.ResourcePods:   resource.MustParse("110"),
}

func (s *Shim) nodeStatus(now metav1.Time) corev1.NodeStatus {
	cond := func(t corev1.NodeConditionType, st corev1.ConditionStatus, reason string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: st, Reason: reason, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	return corev1.NodeStatus{
		Capacity:    nodeResources,
		Allocatable: nodeResources,
		Conditions: []corev1.NodeCondition{
			cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady"),
			cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory"),
			cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure"),
			cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID"),
		},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}, {Type: corev1.NodeHostName, Address: s.cfg.Node}},
		NodeInfo:  corev1.NodeSystemInfo{KubeletVersion: "kubeletshim", OperatingSystem: "linux", Architecture: "amd64"},
	}
}

// register creates the node (or takes over one of the same name left by
// an earlier run) with a Ready status.
func (s *Shim) register(ctx context.Context) error {
	nodes := s.cfg.Client.CoreV1().Nodes()
	now := metav1.Now()
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: s.cfg.Node, Labels: map[string]string{
			"kubernetes.io/hostname": s.cfg.Node, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}},
		Status: s.nodeStatus(now),
	}
	if _, err := nodes.Create(ctx, n, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubeletshim: register node %s: %w", s.cfg.Node, err)
	}
	return s.updateNode(ctx)
}

func (s *Shim) updateNode(ctx context.Context) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := s.cfg.Client.CoreV1().Nodes().Get(ctx, s.cfg.Node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Status = s.nodeStatus(metav1.Now())
		_, err = s.cfg.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

// heartbeat renews the node's Lease every 5 s and its Ready condition
// every 20 s, well inside the node lifecycle controller's grace period.
func (s *Shim) heartbeat(ctx context.Context) {
	leases := s.cfg.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for i := 0; ; i++ {
		now := metav1.NewMicroTime(time.Now())
		l, err := leases.Get(ctx, s.cfg.Node, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			holder, secs := s.cfg.Node, int32(40)
			_, err = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: s.cfg.Node},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, RenewTime: &now}}, metav1.CreateOptions{})
		case err == nil:
			l.Spec.RenewTime = &now
			_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		}
		if err != nil && ctx.Err() == nil {
			s.cfg.Logf("kubeletshim: node lease: %v", err)
		}
		if i%4 == 3 {
			if err := s.updateNode(ctx); err != nil && ctx.Err() == nil {
				s.cfg.Logf("kubeletshim: node status: %v", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// sync acts on a pod's latest state: starts a new pod, stops one being
// deleted.
func (s *Shim) sync(ctx context.Context, o any) {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	s.mu.Lock()
	r := s.pods[p.UID]
	if r == nil {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			s.mu.Unlock()
			if p.DeletionTimestamp != nil {
				s.finalDelete(ctx, p)
			}
			return
		}
		r = &podRun{pod: p.DeepCopy(), dir: filepath.Join(s.cfg.Root, p.Namespace+"_"+p.Name), done: make(chan struct{})}
		s.pods[p.UID] = r
		s.mu.Unlock()
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.run(ctx, r) }()
		if p.DeletionTimestamp != nil {
			s.stop(ctx, r, p)
		}
		return
	}
	s.mu.Unlock()
	if p.DeletionTimestamp != nil {
		s.stop(ctx, r, p)
	}
}

// gone: the pod object is removed; a process still running is killed.
func (s *Shim) gone(p *corev1.Pod) {
	s.mu.Lock()
	r := s.pods[p.UID]
	s.mu.Unlock()
	if r == nil {
		return
	}
	s.mu.Lock()
	r.signal(syscall.SIGKILL)
	r.deleting = true
	s.mu.Unlock()
}

// stop handles a deletion request once: SIGTERM now, SIGKILL when the
// grace period has passed and the process still runs.
func (s *Shim) stop(ctx context.Context, r *podRun, p *corev1.Pod) {
	s.mu.Lock()
	if r.deleting {
		s.mu.Unlock()
		return
	}
	r.deleting = true
	exited := r.exited
	s.mu.Unlock()
	if exited {
		// Its status is final already: only the kubelet's final delete is left.
		s.finalDelete(ctx, p)
		return
	}
	grace := int64(30)
	if p.DeletionGracePeriodSeconds != nil {
		grace = *p.DeletionGracePeriodSeconds
	}
	s.cfg.Logf("kubeletshim: pod %s/%s deleted: SIGTERM, SIGKILL after %d s", p.Namespace, p.Name, grace)
	s.mu.Lock()
	r.signal(syscall.SIGTERM)
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		select {
		case <-r.done:
			// Ended within the grace period; its final status is written.
			s.finalDelete(ctx, p)
		case <-ctx.Done():
		case <-time.After(time.Duration(grace) * time.Second):
			s.mu.Lock()
			if !r.exited {
				s.cfg.Logf("kubeletshim: pod %s/%s: grace period over: SIGKILL", p.Namespace, p.Name)
			}
			r.signal(syscall.SIGKILL)
			s.mu.Unlock()
		}
	}()
}

// run prepares the pod, runs its process and reports how it ended.
func (s *Shim) run(ctx context.Context, r *podRun) {
	defer close(r.done)
	defer func() { s.mu.Lock(); r.exited = true; s.mu.Unlock() }()
	p := r.pod
	cmd, err := s.prepare(ctx, r)
	for err != nil {
		var ce *errConfig
		if !errors.As(err, &ce) {
			s.cfg.Logf("kubeletshim: pod %s/%s: %v", p.Namespace, p.Name, err)
			s.report(ctx, r, -1, err.Error())
			s.afterExit(ctx, r)
			return
		}
		// A ConfigMap or Secret not there yet: wait, as the kubelet does.
		s.waiting(ctx, r, "CreateContainerConfigError", ce.msg)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		s.mu.Lock()
		del := r.deleting
		s.mu.Unlock()
		if del {
			s.report(ctx, r, -1, "deleted before it started")
			s.afterExit(ctx, r)
			return
		}
		cmd, err = s.prepare(ctx, r)
	}
	s.mu.Lock()
	if r.deleting {
		s.mu.Unlock()
		s.report(ctx, r, -1, "deleted before it started")
		s.afterExit(ctx, r)
		return
	}
	err = cmd.Start()
	if err == nil {
		r.cmd = cmd
		r.started = time.Now()
	}
	s.mu.Unlock()
	if err != nil {
		s.report(ctx, r, -1, "start: "+err.Error())
		s.afterExit(ctx, r)
		return
	}
	s.cfg.Logf("kubeletshim: pod %s/%s running: pid %d: %v", p.Namespace, p.Name, cmd.Process.Pid, cmd.Args)
	s.running(ctx, r)
	werr := cmd.Wait()
	code := 0
	if werr != nil {
		var ee *exec.ExitError
		if !errors.As(werr, &ee) {
			code = -1
		} else if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			// A container runtime reports a signal as 128+signal.
			code = 128 + int(ws.Signal())
		} else {
			code = ee.ExitCode()
		}
	}
	s.mu.Lock()
	r.exited, r.code = true, code
	s.mu.Unlock()
	for _, f := range []any{cmd.Stdout, cmd.Stderr} {
		if c, ok := f.(*os.File); ok {
			c.Close()
		}
	}
	s.cfg.Logf("kubeletshim: pod %s/%s exited %d", p.Namespace, p.Name, code)
	s.report(ctx, r, code, "")
	s.afterExit(ctx, r)
}

// afterExit removes a pod that was being deleted, as the kubelet's final
// delete (grace 0) does once its containers are gone.
func (s *Shim) afterExit(ctx context.Context, r *podRun) {
	s.mu.Lock()
	del := r.deleting
	s.mu.Unlock()
	if del {
		s.finalDelete(ctx, r.pod)
	}
}

func (s *Shim) finalDelete(ctx context.Context, p *corev1.Pod) {
	zero := int64(0)
	uid := p.UID
	err := s.cfg.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && ctx.Err() == nil {
		s.cfg.Logf("kubeletshim: final delete of %s/%s: %v", p.Namespace, p.Name, err)
	}
}

// prepare resolves the container's env and volumes and builds its
// process.
func (s *Shim) prepare(ctx context.Context, r *podRun) (*exec.Cmd, error) {
	p := r.pod
	if len(p.Spec.Containers) != 1 || len(p.Spec.InitContainers) != 0 {
		return nil, fmt.Errorf("kubeletshim: %d containers and %d init containers; it runs pods of one container", len(p.Spec.Containers), len(p.Spec.InitContainers))
	}
	if p.Spec.RestartPolicy != corev1.RestartPolicyNever {
		return nil, fmt.Errorf("kubeletshim: restartPolicy %s; it does not restart containers in place (Never only)", p.Spec.RestartPolicy)
	}
	c := &p.Spec.Containers[0]
	entry, ok := s.cfg.Images[c.Image]
	if !ok {
		return nil, fmt.Errorf("kubeletshim: image %q has no local program (Config.Images)", c.Image)
	}
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return nil, err
	}
	env, vals, err := containerEnv(ctx, s.cfg.Client, p, c)
	if err != nil {
		return nil, err
	}
	rw, err := mounts(ctx, s.cfg.Client, p, c, r.dir)
	if err != nil {
		return nil, err
	}
	lookup := func(k string) (string, bool) { v, ok := vals[k]; return v, ok }
	var argv []string
	for _, a := range c.Command {
		argv = append(argv, rewritePaths(Expand(a, lookup), rw))
	}
	if len(argv) == 0 {
		argv = []string{entry}
	} else if argv[0] != entry {
		return nil, fmt.Errorf("kubeletshim: command %q: only the image's entrypoint %s runs here", argv[0], entry)
	}
	for _, a := range c.Args {
		argv = append(argv, rewritePaths(Expand(a, lookup), rw))
	}
	procEnv := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOSTNAME=" + p.Name, "HOME=" + r.dir}
	for _, e := range env {
		procEnv = append(procEnv, rewritePaths(e, rw))
	}
	stdout, err := os.OpenFile(filepath.Join(r.dir, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	stderr, err := os.OpenFile(filepath.Join(r.dir, "stderr.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		stdout.Close()
		return nil, err
	}
	cmd := exec.Command(entry, argv[1:]...)
	cmd.Env = procEnv
	cmd.Dir = r.dir
	if c.WorkingDir != "" {
		cmd.Dir = rewritePaths(c.WorkingDir, rw)
	}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// Its own process group, so signals reach any children too; killed
	// with the test process.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd, nil
}

// containerStatus is the one container's status in a given state.
func containerStatus(p *corev1.Pod, st corev1.ContainerState, ready bool) []corev1.ContainerStatus {
	c := p.Spec.Containers[0]
	started := st.Running != nil
	return []corev1.ContainerStatus{{Name: c.Name, Image: c.Image, ImageID: "kubeletshim://" + c.Image, State: st, Ready: ready, Started: &started}}
}

func (s *Shim) updateStatus(ctx context.Context, r *podRun, mutate func(*corev1.Pod)) {
	p := r.pod
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := s.cfg.Client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != p.UID {
			return apierrors.NewNotFound(corev1.Resource("pods"), p.Name)
		}
		mutate(cur)
		_, err = s.cfg.Client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		s.cfg.Logf("kubeletshim: status of %s/%s: %v", p.Namespace, p.Name, err)
	}
}

func setCondition(p *corev1.Pod, t corev1.PodConditionType, st corev1.ConditionStatus, now metav1.Time) {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			if p.Status.Conditions[i].Status != st {
				p.Status.Conditions[i].Status = st
				p.Status.Conditions[i].LastTransitionTime = now
			}
			return
		}
	}
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: st, LastTransitionTime: now})
}

func (s *Shim) waiting(ctx context.Context, r *podRun, reason, msg string) {
	s.updateStatus(ctx, r, func(p *corev1.Pod) {
		p.Status.HostIP, p.Status.PodIP = "127.0.0.1", "127.0.0.1"
		p.Status.ContainerStatuses = containerStatus(p, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}, false)
	})
}

func (s *Shim) running(ctx context.Context, r *podRun) {
	start := metav1.NewTime(r.started)
	s.updateStatus(ctx, r, func(p *corev1.Pod) {
		now := metav1.Now()
		p.Status.Phase = corev1.PodRunning
		p.Status.HostIP, p.Status.PodIP = "127.0.0.1", "127.0.0.1"
		p.Status.HostIPs = []corev1.HostIP{{IP: "127.0.0.1"}}
		p.Status.PodIPs = []corev1.PodIP{{IP: "127.0.0.1"}}
		p.Status.StartTime = &start
		setCondition(p, corev1.PodInitialized, corev1.ConditionTrue, now)
		setCondition(p, corev1.ContainersReady, corev1.ConditionTrue, now)
		setCondition(p, corev1.PodReady, corev1.ConditionTrue, now)
		p.Status.ContainerStatuses = containerStatus(p, corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: start}}, true)
	})
}

// report writes the pod's terminal status: Succeeded on exit 0, else
// Failed with the exit code (-1: it never ran; the message says why).
func (s *Shim) report(ctx context.Context, r *podRun, code int, msg string) {
	s.updateStatus(ctx, r, func(p *corev1.Pod) {
		now := metav1.Now()
		p.Status.Phase = corev1.PodFailed
		reason := "Error"
		if code == 0 {
			p.Status.Phase = corev1.PodSucceeded
			reason = "Completed"
		}
		exit := int32(code)
		if code < 0 {
			exit = 128
			reason = "StartError"
			p.Status.Message = msg
		}
		if p.Status.StartTime == nil {
			p.Status.StartTime = &now
		}
		start := metav1.NewTime(r.started)
		if r.started.IsZero() {
			start = now
		}
		setCondition(p, corev1.ContainersReady, corev1.ConditionFalse, now)
		setCondition(p, corev1.PodReady, corev1.ConditionFalse, now)
		p.Status.ContainerStatuses = containerStatus(p, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: exit, Reason: reason, Message: msg, StartedAt: start, FinishedAt: now}}, false)
	})
}
