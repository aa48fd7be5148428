package kubeletshim

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// mounts writes the container's volumes under root, each at root plus its
// mount path (root/etc/rekey for /etc/rekey), and returns the rewrites
// from mount path to local folder, longest mount path first.
func mounts(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, c *corev1.Container, root string) ([]rewrite, error) {
	vols := map[string]*corev1.Volume{}
	for i := range pod.Spec.Volumes {
		vols[pod.Spec.Volumes[i].Name] = &pod.Spec.Volumes[i]
	}
	var out []rewrite
	for _, m := range c.VolumeMounts {
		if m.SubPath != "" || m.SubPathExpr != "" {
			return nil, fmt.Errorf("kubeletshim: volume mount %s: subPath is not supported", m.Name)
		}
		v := vols[m.Name]
		if v == nil {
			return nil, fmt.Errorf("volume mount %s names no volume of the pod", m.Name)
		}
		dir := filepath.Join(root, filepath.FromSlash(m.MountPath))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		if err := writeVolume(ctx, client, pod, v, dir); err != nil {
			return nil, fmt.Errorf("volume %s: %w", v.Name, err)
		}
		out = append(out, rewrite{from: strings.TrimSuffix(m.MountPath, "/"), to: dir})
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i].from) > len(out[j].from) })
	return out, nil
}

// writeVolume fills dir with the volume's files: a ConfigMap's or a
// Secret's keys (or the items chosen), the ConfigMap, Secret and downward
// API parts of a projected volume; an emptyDir stays empty.
func writeVolume(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, v *corev1.Volume, dir string) error {
	switch {
	case v.EmptyDir != nil:
		return nil
	case v.ConfigMap != nil:
		return writeConfigMap(ctx, client, pod.Namespace, v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.Optional, mode(v.ConfigMap.DefaultMode), dir)
	case v.Secret != nil:
		return writeSecret(ctx, client, pod.Namespace, v.Secret.SecretName, v.Secret.Items, v.Secret.Optional, mode(v.Secret.DefaultMode), dir)
	case v.Projected != nil:
		m := mode(v.Projected.DefaultMode)
		for _, s := range v.Projected.Sources {
			var err error
			switch {
			case s.ConfigMap != nil:
				err = writeConfigMap(ctx, client, pod.Namespace, s.ConfigMap.Name, s.ConfigMap.Items, s.ConfigMap.Optional, m, dir)
			case s.Secret != nil:
				err = writeSecret(ctx, client, pod.Namespace, s.Secret.Name, s.Secret.Items, s.Secret.Optional, m, dir)
			case s.DownwardAPI != nil:
				for _, it := range s.DownwardAPI.Items {
					if it.FieldRef == nil {
						return fmt.Errorf("kubeletshim: downward API item %s: only fieldRef is supported", it.Path)
					}
					val, ferr := podField(pod, it.FieldRef.FieldPath)
					if ferr != nil {
						return ferr
					}
					if err = writeFile(dir, it.Path, []byte(val), m); err != nil {
						return err
					}
				}
			case s.ServiceAccountToken != nil:
				// The token admission adds to every pod: the programs run
				// here never call the API server, so no token is minted.
			default:
				return fmt.Errorf("kubeletshim: a projected source of an unsupported kind")
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("kubeletshim: only configMap, secret, projected and emptyDir volumes are supported")
}

func mode(m *int32) os.FileMode {
	if m == nil {
		return 0o644
	}
	return os.FileMode(*m)
}

func writeConfigMap(ctx context.Context, client kubernetes.Interface, ns, name string, items []corev1.KeyToPath, opt *bool, m os.FileMode, dir string) error {
	cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) && optional(opt) {
			return nil
		}
		return configErr(err, "configmap %q", name)
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return writeKeys(data, items, opt, m, dir, "configmap "+name)
}

func writeSecret(ctx context.Context, client kubernetes.Interface, ns, name string, items []corev1.KeyToPath, opt *bool, m os.FileMode, dir string) error {
	sec, err := client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) && optional(opt) {
			return nil
		}
		return configErr(err, "secret %q", name)
	}
	return writeKeys(sec.Data, items, opt, m, dir, "secret "+name)
}

// writeKeys writes every key as a file named after it, or only the items
// listed, each at its path and mode.
func writeKeys(data map[string][]byte, items []corev1.KeyToPath, opt *bool, m os.FileMode, dir, what string) error {
	if len(items) == 0 {
		for k, v := range data {
			if err := writeFile(dir, k, v, m); err != nil {
				return err
			}
		}
		return nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional(opt) {
				continue
			}
			return &errConfig{msg: fmt.Sprintf("key %q not in %s", it.Key, what)}
		}
		fm := m
		if it.Mode != nil {
			fm = os.FileMode(*it.Mode)
		}
		if err := writeFile(dir, it.Path, v, fm); err != nil {
			return err
		}
	}
	return nil
}

func writeFile(dir, rel string, b []byte, m os.FileMode) error {
	if filepath.IsAbs(rel) || strings.Contains(rel, "..") {
		return fmt.Errorf("kubeletshim: volume file path %q leaves its volume", rel)
	}
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	// The owner can always read its files here: the modes the pod asks for
	// (0440 for the Kerberos secret) are kept, but the shim runs every
	// process as its own user, not as the image's.
	return os.WriteFile(p, b, m|0o400)
}

// rewrite maps a mount path in the container to its local folder.
type rewrite struct{ from, to string }

// rewritePaths replaces every mount path in s where it stands as a path,
// that is at the start of s or after '=', ':' or ',' and followed by the
// end, '/' or one of those separators, by its local folder, in one pass
// (a local folder is never rewritten again). rw is longest first, so a
// nested mount wins over its parent. Paths inside the mounted files are
// not rewritten.
func rewritePaths(s string, rw []rewrite) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		if i == 0 || strings.ContainsRune("=:,", rune(s[i-1])) {
			if r, ok := pathAt(s[i:], rw); ok {
				b.WriteString(r.to)
				i += len(r.from)
				continue
			}
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String()
}

// pathAt is the first rewrite whose mount path s starts with, as a whole
// path element.
func pathAt(s string, rw []rewrite) (rewrite, bool) {
	for _, r := range rw {
		if strings.HasPrefix(s, r.from) && (len(s) == len(r.from) || strings.ContainsRune("/=:,", rune(s[len(r.from)]))) {
			return r, true
		}
	}
	return rewrite{}, false
}
