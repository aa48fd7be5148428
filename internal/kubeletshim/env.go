package kubeletshim

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Expand replaces $(NAME) in s by lookup's value of NAME, as the kubelet
// does in a container's command, args and env values: $$ is a literal $,
// a reference to a name lookup does not know stays as written, and a $
// before anything else is kept.
func Expand(s string, lookup func(string) (string, bool)) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				// Unterminated: the rest is literal.
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok && name != "" {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// envName is what the kubelet accepts as a variable name from envFrom
// (others are skipped, as it does).
var envName = regexp.MustCompile(`^[-._a-zA-Z][-._a-zA-Z0-9]*$`)

// errConfig is a container configuration the shim cannot complete yet (a
// ConfigMap or Secret that is not there): the kubelet keeps such a pod
// Pending with CreateContainerConfigError and tries again.
type errConfig struct{ msg string }

func (e *errConfig) Error() string { return e.msg }

// containerEnv builds the container's environment as the kubelet orders
// it: envFrom sources in order, then env entries in order, each later one
// overriding; an env value's $(VAR) expands against the variables defined
// before it. The result is a list of NAME=value in definition order.
func containerEnv(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, c *corev1.Container) ([]string, map[string]string, error) {
	vals := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vals[k]; !ok {
			order = append(order, k)
		}
		vals[k] = v
	}
	for _, src := range c.EnvFrom {
		var data map[string]string
		switch {
		case src.ConfigMapRef != nil:
			cm, err := client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, src.ConfigMapRef.Name, metav1.GetOptions{})
			if err != nil {
				if apierrors.IsNotFound(err) && optional(src.ConfigMapRef.Optional) {
					continue
				}
				return nil, nil, configErr(err, "configmap %q", src.ConfigMapRef.Name)
			}
			data = cm.Data
		case src.SecretRef != nil:
			sec, err := client.CoreV1().Secrets(pod.Namespace).Get(ctx, src.SecretRef.Name, metav1.GetOptions{})
			if err != nil {
				if apierrors.IsNotFound(err) && optional(src.SecretRef.Optional) {
					continue
				}
				return nil, nil, configErr(err, "secret %q", src.SecretRef.Name)
			}
			data = map[string]string{}
			for k, v := range sec.Data {
				data[k] = string(v)
			}
		default:
			return nil, nil, fmt.Errorf("envFrom entry with neither configMapRef nor secretRef")
		}
		for k, v := range data {
			if envName.MatchString(src.Prefix + k) {
				set(src.Prefix+k, v)
			}
		}
	}
	lookup := func(k string) (string, bool) { v, ok := vals[k]; return v, ok }
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, Expand(e.Value, lookup))
			continue
		}
		v, ok, err := valueFrom(ctx, client, pod, e.ValueFrom)
		if err != nil {
			return nil, nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		if ok {
			set(e.Name, v)
		}
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+vals[k])
	}
	return out, vals, nil
}

func optional(b *bool) bool { return b != nil && *b }

func configErr(err error, format string, args ...any) error {
	what := fmt.Sprintf(format, args...)
	if apierrors.IsNotFound(err) {
		return &errConfig{msg: what + " not found"}
	}
	return fmt.Errorf("%s: %w", what, err)
}

// fieldPathRE matches metadata.labels['x'] and metadata.annotations['x'].
var fieldPathRE = regexp.MustCompile(`^metadata\.(labels|annotations)\['([^']+)'\]$`)

// valueFrom resolves one env valueFrom; ok is false for an optional key
// that is missing (the variable is then not set, as the kubelet does).
func valueFrom(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, src *corev1.EnvVarSource) (string, bool, error) {
	switch {
	case src.ConfigMapKeyRef != nil:
		r := src.ConfigMapKeyRef
		cm, err := client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) && optional(r.Optional) {
				return "", false, nil
			}
			return "", false, configErr(err, "configmap %q", r.Name)
		}
		v, ok := cm.Data[r.Key]
		if !ok {
			if optional(r.Optional) {
				return "", false, nil
			}
			return "", false, &errConfig{msg: fmt.Sprintf("key %q not in configmap %q", r.Key, r.Name)}
		}
		return v, true, nil
	case src.SecretKeyRef != nil:
		r := src.SecretKeyRef
		sec, err := client.CoreV1().Secrets(pod.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) && optional(r.Optional) {
				return "", false, nil
			}
			return "", false, configErr(err, "secret %q", r.Name)
		}
		v, ok := sec.Data[r.Key]
		if !ok {
			if optional(r.Optional) {
				return "", false, nil
			}
			return "", false, &errConfig{msg: fmt.Sprintf("key %q not in secret %q", r.Key, r.Name)}
		}
		return string(v), true, nil
	case src.FieldRef != nil:
		v, err := podField(pod, src.FieldRef.FieldPath)
		return v, err == nil, err
	default:
		// resourceFieldRef: resources are not modelled here.
		return "", false, fmt.Errorf("kubeletshim: only configMapKeyRef, secretKeyRef and fieldRef are supported")
	}
}

// podField is the downward API's value of a field path.
func podField(pod *corev1.Pod, path string) (string, error) {
	if m := fieldPathRE.FindStringSubmatch(path); m != nil {
		if m[1] == "labels" {
			return pod.Labels[m[2]], nil
		}
		return pod.Annotations[m[2]], nil
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP", "status.hostIP":
		return "127.0.0.1", nil
	}
	return "", fmt.Errorf("kubeletshim: field path %q is not supported", path)
}
