package apiserver_test

import (
	"net/http"
	"regexp"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/internal/testenv"
)

func deployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{
					{Name: "app", Image: "nginx:1.27"},
					{Name: "sidecar", Image: "busybox:1.36"},
				}},
			},
		},
	}
}

func replicaSet(name string, replicas int32) *appsv1.ReplicaSet {
	d := deployment(name, replicas)
	return &appsv1.ReplicaSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       appsv1.ReplicaSetSpec{Replicas: &replicas, Selector: d.Spec.Selector, Template: d.Spec.Template},
	}
}

func deployPath(ns, name string) string {
	p := "/apis/apps/v1/namespaces/" + ns + "/deployments"
	if name != "" {
		p += "/" + name
	}
	return p
}

func TestCreate(t *testing.T) {
	env := testenv.Start(t)

	t.Run("with a name", func(t *testing.T) {
		before := time.Now().Add(-time.Second)
		in := configMap("named", map[string]string{"a": "b"}, map[string]string{"k": "v"})
		// What only the server sets is overwritten, whatever the client
		// sends; a resourceVersion is refused (TestCreateWithResourceVersion).
		in.UID = "client-chosen-uid"
		in.CreationTimestamp = metav1.NewTime(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC))
		got := create[corev1.ConfigMap](t, env, cmPath("default", ""), in)
		if got.Name != "named" || got.Namespace != "default" || got.Data["k"] != "v" || got.Labels["a"] != "b" {
			t.Errorf("created %s/%s data %v labels %v", got.Namespace, got.Name, got.Data, got.Labels)
		}
		if got.Kind != "ConfigMap" || got.APIVersion != "v1" {
			t.Errorf("kind %q apiVersion %q", got.Kind, got.APIVersion)
		}
		if got.UID == "" || got.UID == in.UID {
			t.Errorf("uid %q: want one the server chose", got.UID)
		}
		if got.CreationTimestamp.Time.Before(before) {
			t.Errorf("creationTimestamp %v: want now", got.CreationTimestamp)
		}
		rv(t, got.ResourceVersion) // an etcd revision
		stored := get[corev1.ConfigMap](t, env, cmPath("default", "named"))
		if stored.UID != got.UID || stored.ResourceVersion != got.ResourceVersion || !stored.CreationTimestamp.Equal(&got.CreationTimestamp) {
			t.Errorf("GET returned uid %s rv %s ts %v, create returned uid %s rv %s ts %v",
				stored.UID, stored.ResourceVersion, stored.CreationTimestamp, got.UID, got.ResourceVersion, got.CreationTimestamp)
		}
	})

	t.Run("the same name twice", func(t *testing.T) {
		create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap("twice", nil, nil))
		do(t, env, http.MethodPost, cmPath("default", ""), jsonType, configMap("twice", nil, nil)).
			wantStatus(t, http.StatusConflict, metav1.StatusReasonAlreadyExists)
	})

	t.Run("with generateName", func(t *testing.T) {
		seen := map[string]bool{}
		for range 3 {
			in := configMap("", nil, nil)
			in.GenerateName = "web-"
			got := create[corev1.ConfigMap](t, env, cmPath("default", ""), in)
			if !regexp.MustCompile(`^web-[a-z0-9]{5}$`).MatchString(got.Name) {
				t.Errorf("generated name %q: want web- and 5 characters", got.Name)
			}
			if got.GenerateName != "web-" {
				t.Errorf("generateName %q: want it kept", got.GenerateName)
			}
			if seen[got.Name] {
				t.Errorf("name %q generated twice", got.Name)
			}
			seen[got.Name] = true
			get[corev1.ConfigMap](t, env, cmPath("default", got.Name))
		}
	})

	t.Run("from YAML", func(t *testing.T) {
		body := `apiVersion: v1
kind: ConfigMap
metadata:
  name: from-yaml
  labels:
    source: yaml
data:
  greeting: hello
`
		r := do(t, env, http.MethodPost, cmPath("default", ""), yamlType, body).want(t, http.StatusCreated)
		var got corev1.ConfigMap
		r.into(t, &got)
		if got.Name != "from-yaml" || got.Labels["source"] != "yaml" || got.Data["greeting"] != "hello" {
			t.Errorf("created from YAML: %+v", got)
		}
		stored := get[corev1.ConfigMap](t, env, cmPath("default", "from-yaml"))
		if stored.Data["greeting"] != "hello" {
			t.Errorf("stored data %v", stored.Data)
		}
	})
}

func TestGetAndList(t *testing.T) {
	env := testenv.Start(t)
	createNamespace(t, env, "other")
	create[corev1.Pod](t, env, podPath("default", ""), pod("a", "", nil))
	create[corev1.Pod](t, env, podPath("default", ""), pod("b", "", nil))
	created := create[corev1.Pod](t, env, podPath("other", ""), pod("c", "", nil))

	got := get[corev1.Pod](t, env, podPath("other", "c"))
	if got.Name != "c" || got.Namespace != "other" || got.UID != created.UID || got.Kind != "Pod" || got.APIVersion != "v1" {
		t.Errorf("GET: %s/%s uid %s kind %s/%s", got.Namespace, got.Name, got.UID, got.APIVersion, got.Kind)
	}
	do(t, env, http.MethodGet, podPath("default", "c"), "", nil).wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)

	for _, tc := range []struct {
		path string
		want []string
	}{
		{podPath("default", ""), []string{"default/a", "default/b"}},
		{podPath("other", ""), []string{"other/c"}},
		{"/api/v1/pods", []string{"default/a", "default/b", "other/c"}},
		{podPath("empty", ""), []string{}},
	} {
		t.Run(tc.path, func(t *testing.T) {
			l := get[corev1.PodList](t, env, tc.path)
			if l.Kind != "PodList" || l.APIVersion != "v1" {
				t.Errorf("kind %q apiVersion %q", l.Kind, l.APIVersion)
			}
			rv(t, l.ResourceVersion)
			if got := podNames(l); !slices.Equal(got, tc.want) {
				t.Errorf("items %v, want %v", got, tc.want)
			}
		})
	}
}

func TestUpdate(t *testing.T) {
	env := testenv.Start(t)
	cur := create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap("cm", nil, map[string]string{"v": "1"}))

	t.Run("with the current resourceVersion", func(t *testing.T) {
		in := cur.DeepCopy()
		in.Data["v"] = "2"
		got := update[corev1.ConfigMap](t, env, cmPath("default", "cm"), in)
		if got.Data["v"] != "2" {
			t.Errorf("data %v", got.Data)
		}
		if rv(t, got.ResourceVersion) <= rv(t, cur.ResourceVersion) {
			t.Errorf("resourceVersion %s not after %s", got.ResourceVersion, cur.ResourceVersion)
		}
		cur = got
	})

	t.Run("with a stale resourceVersion", func(t *testing.T) {
		stale := cur.DeepCopy()
		newer := cur.DeepCopy()
		newer.Data["v"] = "3"
		cur = update[corev1.ConfigMap](t, env, cmPath("default", "cm"), newer)

		stale.Data["v"] = "lost update"
		before := revision(t, env)
		do(t, env, http.MethodPut, cmPath("default", "cm"), jsonType, stale).
			wantStatus(t, http.StatusConflict, metav1.StatusReasonConflict)
		if after := revision(t, env); after != before {
			t.Errorf("etcd revision moved from %d to %d on a rejected update", before, after)
		}
		got := get[corev1.ConfigMap](t, env, cmPath("default", "cm"))
		if got.Data["v"] != "3" || got.ResourceVersion != cur.ResourceVersion {
			t.Errorf("stored data %v rv %s, want v=3 rv %s", got.Data, got.ResourceVersion, cur.ResourceVersion)
		}
	})

	t.Run("without a resourceVersion", func(t *testing.T) {
		in := cur.DeepCopy()
		in.ResourceVersion = ""
		in.Data["v"] = "4"
		got := update[corev1.ConfigMap](t, env, cmPath("default", "cm"), in)
		if got.Data["v"] != "4" || rv(t, got.ResourceVersion) <= rv(t, cur.ResourceVersion) {
			t.Errorf("data %v rv %s", got.Data, got.ResourceVersion)
		}
		cur = got
	})

	t.Run("uid and creationTimestamp cannot change", func(t *testing.T) {
		in := cur.DeepCopy()
		in.CreationTimestamp = metav1.NewTime(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC))
		in.Data["v"] = "5"
		got := update[corev1.ConfigMap](t, env, cmPath("default", "cm"), in)
		if !got.CreationTimestamp.Equal(&cur.CreationTimestamp) {
			t.Errorf("creationTimestamp became %v, want %v kept", got.CreationTimestamp, cur.CreationTimestamp)
		}
		cur = got

		in = cur.DeepCopy()
		in.UID = "another-uid"
		r := do(t, env, http.MethodPut, cmPath("default", "cm"), jsonType, in)
		// kube-apiserver answers 409 (the body's uid is a precondition);
		// 422 (uid is immutable) says the same.
		st := r.status(t)
		if !(r.code == http.StatusConflict && st.Reason == metav1.StatusReasonConflict) &&
			!(r.code == http.StatusUnprocessableEntity && st.Reason == metav1.StatusReasonInvalid) {
			t.Errorf("PUT with another uid: HTTP %d %s, want 409 Conflict or 422 Invalid", r.code, st.Reason)
		}
		stored := get[corev1.ConfigMap](t, env, cmPath("default", "cm"))
		if stored.UID != cur.UID || !stored.CreationTimestamp.Equal(&cur.CreationTimestamp) || stored.ResourceVersion != cur.ResourceVersion {
			t.Errorf("stored uid %s ts %v rv %s, want %s %v %s", stored.UID, stored.CreationTimestamp, stored.ResourceVersion,
				cur.UID, cur.CreationTimestamp, cur.ResourceVersion)
		}
	})

	t.Run("of an object that does not exist", func(t *testing.T) {
		do(t, env, http.MethodPut, cmPath("default", "nope"), jsonType, configMap("nope", nil, nil)).
			wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)
	})
}

func TestPatch(t *testing.T) {
	env := testenv.Start(t)
	create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap("cm", map[string]string{"keep": "me"}, map[string]string{"a": "1", "b": "2"}))
	create[appsv1.Deployment](t, env, deployPath("default", ""), deployment("web", 1))

	t.Run("merge patch", func(t *testing.T) {
		got := patch[corev1.ConfigMap](t, env, cmPath("default", "cm"), mergePatch,
			`{"metadata":{"labels":{"added":"yes"}},"data":{"a":"10","b":null}}`)
		if got.Labels["keep"] != "me" || got.Labels["added"] != "yes" {
			t.Errorf("labels %v", got.Labels)
		}
		if got.Data["a"] != "10" || len(got.Data) != 1 {
			t.Errorf("data %v, want only a=10", got.Data)
		}
	})

	t.Run("JSON patch", func(t *testing.T) {
		got := patch[corev1.ConfigMap](t, env, cmPath("default", "cm"), jsonPatch,
			`[{"op":"add","path":"/data/c","value":"3"},{"op":"replace","path":"/data/a","value":"11"},{"op":"remove","path":"/metadata/labels/added"}]`)
		if got.Data["a"] != "11" || got.Data["c"] != "3" || got.Labels["added"] != "" {
			t.Errorf("data %v labels %v", got.Data, got.Labels)
		}
	})

	t.Run("JSON patch test op fails", func(t *testing.T) {
		before := revision(t, env)
		r := do(t, env, http.MethodPatch, cmPath("default", "cm"), jsonPatch, `[{"op":"test","path":"/data/a","value":"wrong"}]`)
		if r.code < 400 || r.code >= 500 {
			t.Errorf("failed test op: HTTP %d, want a 4xx", r.code)
		}
		if after := revision(t, env); after != before {
			t.Errorf("etcd revision moved from %d to %d", before, after)
		}
	})

	t.Run("strategic merge patch", func(t *testing.T) {
		// A list of containers is merged by name: only the sidecar changes.
		got := patch[appsv1.Deployment](t, env, deployPath("default", "web"), strategicPtch,
			`{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"busybox:1.37"}]}}}}`)
		cs := got.Spec.Template.Spec.Containers
		if len(cs) != 2 || cs[0].Name != "app" || cs[0].Image != "nginx:1.27" || cs[1].Name != "sidecar" || cs[1].Image != "busybox:1.37" {
			t.Errorf("containers after strategic merge: %+v", cs)
		}
		if got.Generation != 2 {
			t.Errorf("generation %d after a template change, want 2", got.Generation)
		}
	})

	t.Run("the same list as a merge patch replaces it", func(t *testing.T) {
		got := patch[appsv1.Deployment](t, env, deployPath("default", "web"), mergePatch,
			`{"spec":{"template":{"spec":{"containers":[{"name":"only","image":"nginx:1.28"}]}}}}`)
		if cs := got.Spec.Template.Spec.Containers; len(cs) != 1 || cs[0].Name != "only" {
			t.Errorf("containers after merge patch: %+v", cs)
		}
	})

	t.Run("with a stale resourceVersion", func(t *testing.T) {
		do(t, env, http.MethodPatch, cmPath("default", "cm"), mergePatch, `{"metadata":{"resourceVersion":"1"},"data":{"a":"x"}}`).
			wantStatus(t, http.StatusConflict, metav1.StatusReasonConflict)
	})

	t.Run("of an object that does not exist", func(t *testing.T) {
		do(t, env, http.MethodPatch, cmPath("default", "nope"), mergePatch, `{"data":{"a":"x"}}`).
			wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)
	})
}

func TestDeleteConfigMap(t *testing.T) {
	env := testenv.Start(t)
	cm := create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap("doomed", nil, nil))
	st := do(t, env, http.MethodDelete, cmPath("default", "doomed"), "", nil).want(t, http.StatusOK).status(t)
	if st.Status != metav1.StatusSuccess || st.Details == nil || st.Details.Name != "doomed" || st.Details.UID != cm.UID {
		t.Errorf("delete answered %+v", st)
	}
	do(t, env, http.MethodGet, cmPath("default", "doomed"), "", nil).wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)
	do(t, env, http.MethodDelete, cmPath("default", "doomed"), "", nil).wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)
	if l := get[corev1.ConfigMapList](t, env, cmPath("default", "")); len(l.Items) != 0 {
		t.Errorf("list after delete: %v", cmNames(l))
	}
}

func TestGeneration(t *testing.T) {
	env := testenv.Start(t)
	d := create[appsv1.Deployment](t, env, deployPath("default", ""), deployment("web", 1))
	if d.Generation != 1 {
		t.Fatalf("generation %d on create, want 1", d.Generation)
	}
	steps := []struct {
		name   string
		change func() *appsv1.Deployment
		want   int64
	}{
		{"label change", func() *appsv1.Deployment {
			return patch[appsv1.Deployment](t, env, deployPath("default", "web"), mergePatch, `{"metadata":{"labels":{"team":"a"}}}`)
		}, 1},
		{"status update", func() *appsv1.Deployment {
			in := get[appsv1.Deployment](t, env, deployPath("default", "web"))
			in.Status.Replicas, in.Status.ObservedGeneration = 1, 1
			return update[appsv1.Deployment](t, env, deployPath("default", "web")+"/status", in)
		}, 1},
		{"no-op PUT", func() *appsv1.Deployment {
			return update[appsv1.Deployment](t, env, deployPath("default", "web"), get[appsv1.Deployment](t, env, deployPath("default", "web")))
		}, 1},
		{"spec change", func() *appsv1.Deployment {
			return patch[appsv1.Deployment](t, env, deployPath("default", "web"), mergePatch, `{"spec":{"replicas":3}}`)
		}, 2},
		{"second spec change", func() *appsv1.Deployment {
			in := get[appsv1.Deployment](t, env, deployPath("default", "web"))
			in.Spec.MinReadySeconds = 5
			return update[appsv1.Deployment](t, env, deployPath("default", "web"), in)
		}, 3},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if got := s.change(); got.Generation != s.want {
				t.Errorf("generation %d in the answer, want %d", got.Generation, s.want)
			}
			if got := get[appsv1.Deployment](t, env, deployPath("default", "web")); got.Generation != s.want {
				t.Errorf("generation %d stored, want %d", got.Generation, s.want)
			}
		})
	}
}

// TestCreateWithResourceVersion sends creates whose object carries a
// resourceVersion, as one read from the server and sent back by mistake
// does. Kubernetes refuses them at the write with a 500 that says why, and
// nothing is written; "0", or what is not a number, it drops; a dry run
// and a create that fails validation first are answered as without it.
func TestCreateWithResourceVersion(t *testing.T) {
	env := testenv.Start(t)
	withRV := func(name, rv string) *corev1.ConfigMap {
		cm := configMap(name, nil, nil)
		cm.ResourceVersion = rv
		return cm
	}

	before := revision(t, env)
	r := do(t, env, http.MethodPost, cmPath("default", ""), jsonType, withRV("stale", "123"))
	st := r.wantStatus(t, http.StatusInternalServerError, metav1.StatusReasonUnknown)
	if st.Message != "resourceVersion should not be set on objects to be created" {
		t.Errorf("message %q, want Kubernetes' %q", st.Message, "resourceVersion should not be set on objects to be created")
	}
	if after := revision(t, env); after != before {
		t.Errorf("etcd revision moved from %d to %d: the refused create wrote", before, after)
	}
	do(t, env, http.MethodGet, cmPath("default", "stale"), "", nil).wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)

	do(t, env, http.MethodPost, cmPath("default", "")+"?dryRun=All", jsonType, withRV("dry", "123")).want(t, http.StatusCreated)
	do(t, env, http.MethodPost, cmPath("default", ""), jsonType, withRV("Not_Valid", "123")).
		wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
	for _, v := range []string{"0", "abc"} {
		got := create[corev1.ConfigMap](t, env, cmPath("default", ""), withRV("rv-"+v, v))
		if rv(t, got.ResourceVersion) <= before {
			t.Errorf("created with resourceVersion %q: got resourceVersion %s", v, got.ResourceVersion)
		}
	}
}
