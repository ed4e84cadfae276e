package apiserver

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/minictl/minictl/api"
)

// kube-apiserver's ServiceAccount admission plugin, for new pods (mirror
// pods aside, which the kubelet writes and no token may follow):
//
//   - a pod runs as the ServiceAccount "default" unless it names one, and
//     the one it runs as must exist: otherwise the pod is refused;
//   - unless the pod, or else its ServiceAccount, sets
//     automountServiceAccountToken to false, the pod gets the projected
//     volume kube-api-access-<5 random characters> (a token of the
//     ServiceAccount, the cluster's CA from the kube-root-ca.crt ConfigMap,
//     and the namespace) mounted read-only at
//     /var/run/secrets/kubernetes.io/serviceaccount in every container and
//     init container that has nothing mounted there already.
//
// It runs only when Config.ServiceAccountAdmission says so.

const (
	// serviceAccountVolumePrefix begins the name of the token volume.
	serviceAccountVolumePrefix = "kube-api-access-"
	// serviceAccountMountPath is where a container finds its token, the
	// CA and its namespace.
	serviceAccountMountPath = "/var/run/secrets/kubernetes.io/serviceaccount"
	// rootCAConfigMap holds the cluster's CA in every namespace (the
	// root-ca-cert-publisher controller's).
	rootCAConfigMap = "kube-root-ca.crt"
	// mirrorPodAnnotation marks the pods a kubelet writes for its static pods.
	mirrorPodAnnotation = "kubernetes.io/config.mirror"
)

func (s *Server) admitServiceAccount(ctx context.Context, a *attributes) error {
	pod, ok := a.obj.(*corev1.Pod)
	if !s.saAdmission || a.op != opCreate || !ok || a.subresource != "" {
		return nil
	}
	if _, mirror := pod.Annotations[mirrorPodAnnotation]; mirror {
		return nil
	}
	if pod.Spec.ServiceAccountName == "" {
		pod.Spec.ServiceAccountName = api.DefaultServiceAccountName
	}
	pod.Spec.DeprecatedServiceAccount = pod.Spec.ServiceAccountName
	sa, err := s.serviceAccountOf(ctx, a.namespace, pod.Spec.ServiceAccountName)
	if err != nil {
		return apierrors.NewForbidden(a.res.GroupResource(), a.name,
			fmt.Errorf("error looking up service account %s/%s: %w", a.namespace, pod.Spec.ServiceAccountName, err))
	}
	automount := true
	switch {
	case pod.Spec.AutomountServiceAccountToken != nil:
		automount = *pod.Spec.AutomountServiceAccountToken
	case sa.AutomountServiceAccountToken != nil:
		automount = *sa.AutomountServiceAccountToken
	}
	if automount {
		mountServiceAccountToken(pod)
	}
	return nil
}

// serviceAccountOf finds a ServiceAccount in the watch cache, and in etcd
// when the cache has not seen it yet (it may have been created a moment
// ago). As kube's plugin, it asks etcd up to 10 times, 100-200ms apart,
// for "default", which the serviceaccount controller is about to create
// in a new namespace or a cluster just started. Not found is said as
// kube's plugin says it.
func (s *Server) serviceAccountOf(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error) {
	if sa, ok := cachedAs[*corev1.ServiceAccount](s, api.ServiceAccounts, namespace, name); ok {
		return sa, nil
	}
	attempts := 1
	if name == api.DefaultServiceAccountName {
		attempts = 10
	}
	interval := time.Duration(100+rand.IntN(100)) * time.Millisecond
	for i := 0; i < attempts; i++ {
		if i > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(interval):
			}
		}
		obj, err := s.serving().stores[api.ServiceAccounts].get(ctx, namespace, name)
		if err == nil {
			return obj.(*corev1.ServiceAccount), nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "serviceaccount"}, name)
}

// mountServiceAccountToken adds the token volume to pod, unless it has
// one, and mounts it in every container that has nothing at the mount
// path.
func mountServiceAccountToken(pod *corev1.Pod) {
	volume := ""
	for _, v := range pod.Spec.Volumes {
		if strings.HasPrefix(v.Name, serviceAccountVolumePrefix) {
			volume = v.Name
			break
		}
	}
	hasVolume := volume != ""
	if !hasVolume {
		volume = serviceAccountVolumePrefix + randomSuffix()
	}
	mount := corev1.VolumeMount{Name: volume, ReadOnly: true, MountPath: serviceAccountMountPath}
	needed := false
	for _, cs := range []([]corev1.Container){pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if !mountsAt(cs[i], serviceAccountMountPath) {
				cs[i].VolumeMounts = append(cs[i].VolumeMounts, mount)
				needed = true
			}
		}
	}
	if needed && !hasVolume {
		pod.Spec.Volumes = append(pod.Spec.Volumes, tokenVolume(volume))
	}
}

func mountsAt(c corev1.Container, path string) bool {
	for _, m := range c.VolumeMounts {
		if m.MountPath == path {
			return true
		}
	}
	return false
}

// tokenVolume is kube's projected token volume, with the defaults the
// Pod kind would give it.
func tokenVolume(name string) corev1.Volume {
	expiration := int64(60*60 + 7) // serviceaccount.WarnOnlyBoundTokenExpirationSeconds
	mode := corev1.ProjectedVolumeSourceDefaultMode
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: &expiration}},
			{ConfigMap: &corev1.ConfigMapProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: rootCAConfigMap},
				Items:                []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}},
			}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{
				Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"},
			}}}},
		},
		DefaultMode: &mode,
	}}}
}

// randomSuffix is five characters of kube's name generator's alphabet,
// which has no vowels (no words) and no look-alikes.
func randomSuffix() string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, 5)
	for i := range b {
		b[i] = alphabet[rand.IntN(len(alphabet))]
	}
	return string(b)
}
