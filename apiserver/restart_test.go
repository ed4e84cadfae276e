package apiserver_test

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/minictl/minictl/internal/testenv"
)

// TestRestart: the API server keeps nothing that etcd does not; a restarted
// server serves the same objects, and resourceVersions only go up.
func TestRestart(t *testing.T) {
	env := testenv.Start(t)
	createNamespace(t, env, "kept")
	cm := create[corev1.ConfigMap](t, env, cmPath("kept", ""), configMap("cm", map[string]string{"a": "b"}, map[string]string{"k": "v"}))
	d := create[appsv1.Deployment](t, env, deployPath("kept", ""), deployment("web", 3))
	before := get[corev1.ConfigMapList](t, env, "/api/v1/configmaps")

	env.RestartServer()
	healthy(t, env)

	got := get[corev1.ConfigMap](t, env, cmPath("kept", "cm"))
	if got.UID != cm.UID || got.ResourceVersion != cm.ResourceVersion || got.Data["k"] != "v" || got.Labels["a"] != "b" {
		t.Errorf("configmap after restart: uid %s rv %s data %v labels %v; before: uid %s rv %s",
			got.UID, got.ResourceVersion, got.Data, got.Labels, cm.UID, cm.ResourceVersion)
	}
	if gd := get[appsv1.Deployment](t, env, deployPath("kept", "web")); gd.UID != d.UID || *gd.Spec.Replicas != 3 || gd.Generation != 1 {
		t.Errorf("deployment after restart: uid %s replicas %d generation %d", gd.UID, *gd.Spec.Replicas, gd.Generation)
	}
	after := get[corev1.ConfigMapList](t, env, "/api/v1/configmaps")
	if !slices.Equal(cmNames(after), cmNames(before)) {
		t.Errorf("list after restart %v, before %v", cmNames(after), cmNames(before))
	}
	if rv(t, after.ResourceVersion) < rv(t, before.ResourceVersion) {
		t.Errorf("list resourceVersion went back from %s to %s", before.ResourceVersion, after.ResourceVersion)
	}
	// The watch cache was refilled too.
	cached := get[corev1.ConfigMapList](t, env, cmPath("kept", "")+"?resourceVersion="+cm.ResourceVersion)
	if !slices.Equal(cmNames(cached), []string{"cm"}) {
		t.Errorf("list from the cache after restart: %v", cmNames(cached))
	}

	// New writes get higher resourceVersions than anything before.
	in := got.DeepCopy()
	in.Data["k"] = "w"
	updated := update[corev1.ConfigMap](t, env, cmPath("kept", "cm"), in)
	if rv(t, updated.ResourceVersion) <= rv(t, cm.ResourceVersion) || rv(t, updated.ResourceVersion) <= rv(t, before.ResourceVersion) {
		t.Errorf("update after restart got resourceVersion %s, not after %s", updated.ResourceVersion, before.ResourceVersion)
	}
	created := create[corev1.ConfigMap](t, env, cmPath("kept", ""), configMap("new", nil, nil))
	if rv(t, created.ResourceVersion) <= rv(t, updated.ResourceVersion) {
		t.Errorf("create after restart got resourceVersion %s, not after %s", created.ResourceVersion, updated.ResourceVersion)
	}

	// A watch from a resourceVersion written after the restart resumes.
	s := watch(t, env, cmPath("kept", "")+"?watch=true&resourceVersion="+updated.ResourceVersion)
	s.expect(t, "ADDED new")

	// A second restart, with watchers open: their streams end, and a
	// client that watches again from its last resourceVersion misses
	// nothing written after it.
	env.RestartServer()
	s.ended(t, waitTimeout)
	create[corev1.ConfigMap](t, env, cmPath("kept", ""), configMap("after-second", nil, nil))
	s2 := watch(t, env, cmPath("kept", "")+"?watch=true&resourceVersion="+created.ResourceVersion)
	s2.expect(t, "ADDED after-second")
}
