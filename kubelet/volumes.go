package kubelet

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/scheduler/placement"
)

// DefaultVolumeMountTimeout is how long a pod waits for its volumes before
// the kubelet says so in a FailedMount event (and then again each time as
// long), as the kubelet's volume manager times its waits.
const DefaultVolumeMountTimeout = 2*time.Minute + 3*time.Second

// volumePollInterval is how often a pod waiting for its volumes looks at
// its claims again: a kubelet may get the claims and volumes of its pods,
// not watch them.
const volumePollInterval = time.Second

// unmountedVolumes names the volumes of pod that cannot be mounted yet:
// those whose claim does not exist, is not Bound, or is bound to a volume
// that does not exist, does not name the claim back, or is not reachable
// from this node (its node affinity). Sorted; nil when every volume is
// ready.
func (k *Kubelet) unmountedVolumes(ctx context.Context, pod *corev1.Pod) ([]string, error) {
	var pending []string
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		claim := ""
		switch {
		case v.PersistentVolumeClaim != nil:
			claim = v.PersistentVolumeClaim.ClaimName
		case v.Ephemeral != nil:
			claim = pod.Name + "-" + v.Name
		default:
			continue
		}
		ok, err := k.claimReady(ctx, pod.Namespace, claim)
		if err != nil {
			return nil, err
		}
		if !ok {
			pending = append(pending, v.Name)
		}
	}
	slices.Sort(pending)
	return pending, nil
}

func (k *Kubelet) claimReady(ctx context.Context, namespace, name string) (bool, error) {
	pvc, err := client.For[*corev1.PersistentVolumeClaim](k.opts.Client).Get(ctx, namespace, name)
	if client.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get persistentvolumeclaim %s/%s: %w", namespace, name, err)
	}
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" {
		return false, nil
	}
	pv, err := client.For[*corev1.PersistentVolume](k.opts.Client).Get(ctx, "", pvc.Spec.VolumeName)
	if client.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get persistentvolume %s: %w", pvc.Spec.VolumeName, err)
	}
	if ref := pv.Spec.ClaimRef; ref == nil || ref.UID != pvc.UID {
		return false, nil
	}
	node, err := k.nodeLister.Get("", k.name)
	if err != nil {
		return false, nil // the node informer has not seen the Node yet
	}
	return placement.VolumeFitsNode(pv, node), nil
}

// mountTimedOut reports whether the pod key has waited for its volumes
// for the mount timeout since it began to, or since it was last told;
// the wait starts over when it does.
func (k *Kubelet) mountTimedOut(key string, pod *corev1.Pod) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	m := k.memoLocked(key, pod.UID)
	now := k.clock.Now()
	if m.volumesWaitSince.IsZero() {
		m.volumesWaitSince = now
		return false
	}
	if now.Sub(m.volumesWaitSince) < k.opts.VolumeMountTimeout {
		return false
	}
	m.volumesWaitSince = now
	return true
}

// failedMountMessage is the kubelet's FailedMount message for a pod whose
// volumes did not mount in time.
func failedMountMessage(unmounted []string) string {
	list := strings.Join(unmounted, " ")
	return fmt.Sprintf("Unable to attach or mount volumes: unmounted volumes=[%s], unattached volumes=[%s]: timed out waiting for the condition", list, list)
}
