package apiserver_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/minictl/minictl/apiserver"
	"github.com/minictl/minictl/internal/testenv"
)

// TestDefaultTolerations: a created pod tolerates the not-ready and
// unreachable NoExecute taints for the server's configured seconds (300
// unless told otherwise), as kube-apiserver's DefaultTolerationSeconds
// admission makes it; a pod that tolerates them already keeps its own.
func TestDefaultTolerations(t *testing.T) {
	for _, tt := range []struct {
		name                  string
		cfg                   apiserver.Config
		notReady, unreachable int64
	}{
		{"defaults", apiserver.Config{}, 300, 300},
		{"configured", apiserver.Config{DefaultNotReadyTolerationSeconds: 30, DefaultUnreachableTolerationSeconds: 60}, 30, 60},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := testenv.StartWith(t, testenv.Options{Server: tt.cfg})
			created := create[corev1.Pod](t, env, "/api/v1/namespaces/default/pods", pod("p", "", nil))
			want := map[string]int64{corev1.TaintNodeNotReady: tt.notReady, corev1.TaintNodeUnreachable: tt.unreachable}
			if len(created.Spec.Tolerations) != 2 {
				t.Fatalf("tolerations = %+v, want the two defaults", created.Spec.Tolerations)
			}
			for _, tol := range created.Spec.Tolerations {
				if tol.Operator != corev1.TolerationOpExists || tol.Effect != corev1.TaintEffectNoExecute ||
					tol.TolerationSeconds == nil || *tol.TolerationSeconds != want[tol.Key] {
					t.Errorf("toleration %+v, want %s Exists NoExecute %ds", tol, tol.Key, want[tol.Key])
				}
			}

			own := pod("own", "", nil)
			secs := int64(5)
			own.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &secs}}
			created = create[corev1.Pod](t, env, "/api/v1/namespaces/default/pods", own)
			if n := len(created.Spec.Tolerations); n != 2 || *created.Spec.Tolerations[0].TolerationSeconds != 5 {
				t.Errorf("a pod with its own not-ready toleration: %+v, want it kept and unreachable added", created.Spec.Tolerations)
			}
		})
	}
}
