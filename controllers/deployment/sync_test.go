package deployment

import (
	"math"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/controllers/internal/controllertest"
	"github.com/minictl/minictl/informer"
)

// These tests call sync, or the pure helpers, directly: the caches are
// filled by the test, the writes go to a real API server.

type syncEnv struct {
	c                          *Controller
	api                        *cluster
	dIndexer, rsIndexer, podIx informer.Indexer
}

func newSyncEnv(t *testing.T) *syncEnv {
	t.Helper()
	rc := controllertest.Start(t).Client
	withIndexes := func() informer.Indexer {
		return informer.NewIndexer(nil, informer.Indexers{
			informer.NamespaceIndex:       informer.MetaNamespaceIndexFunc,
			controller.ControllerUIDIndex: controller.ControllerUIDIndexFunc,
		})
	}
	s := &syncEnv{dIndexer: withIndexes(), rsIndexer: withIndexes(), podIx: withIndexes()}
	rec := &record.FakeRecorder{}
	s.c = newController(Options{Common: controller.Common{Client: rc, Recorder: rec, Logger: controllertest.Logger(t)}.WithDefaults(Name)}, s.dIndexer, s.rsIndexer, s.podIx)
	t.Cleanup(s.c.queue.ShutDown)
	s.api = &cluster{
		rc: rc, recorder: rec,
		pods:    client.For[*corev1.Pod](rc),
		rss:     client.For[*appsv1.ReplicaSet](rc),
		deploys: client.For[*appsv1.Deployment](rc),
	}
	return s
}

// refresh plays the informers: the caches get what the API holds now.
func (s *syncEnv) refresh(t *testing.T) {
	t.Helper()
	ctx := testCtx(t)
	ds, err := s.api.deploys.List(ctx, ns, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rss, err := s.api.rss.List(ctx, ns, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var dl, rl []any
	for _, d := range ds.Items {
		dl = append(dl, d)
	}
	for _, rs := range rss.Items {
		rl = append(rl, rs)
	}
	if err := s.dIndexer.Replace(dl, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.rsIndexer.Replace(rl, ""); err != nil {
		t.Fatal(err)
	}
}

// ownedRS creates a ReplicaSet of d for template tmpl with the given hash,
// size and annotations.
func (s *syncEnv) ownedRS(t *testing.T, d *appsv1.Deployment, tmpl corev1.PodTemplateSpec, hash string, replicas int32, annotations map[string]string) *appsv1.ReplicaSet {
	t.Helper()
	tmpl = *tmpl.DeepCopy()
	tmpl.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: d.Name + "-" + hash, Namespace: ns, Labels: tmpl.Labels, Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{*controller.NewControllerRef(d, controllerKind)},
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels},
			Template: tmpl,
		},
	}
	out, err := s.api.rss.Create(testCtx(t), rs)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A Deployment resized mid-rollout spreads the difference over its
// ReplicaSets in proportion to their size: 8 old + 5 new of 10 (+3 surge)
// become 14 + 9 of 20 (+3).
func TestProportionalScalingMidRollout(t *testing.T) {
	s := newSyncEnv(t)
	d := s.api.createDeployment(t, rolling(newDeployment("web", 10, "nginx:B"), 3, 2))
	ann := map[string]string{DesiredReplicasAnnotation: "10", MaxReplicasAnnotation: "13"}
	oldTmpl := *d.Spec.Template.DeepCopy()
	oldTmpl.Spec.Containers[0].Image = "nginx:A"
	old := s.ownedRS(t, d, oldTmpl, "aaaaa", 8, ann)
	cur := s.ownedRS(t, d, d.Spec.Template, computeHash(&d.Spec.Template, nil), 5, ann)

	s.api.updateDeployment(t, "web", func(d *appsv1.Deployment) { twenty := int32(20); d.Spec.Replicas = &twenty })
	s.refresh(t)
	if err := s.c.sync(testCtx(t), ns+"/web"); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		rs   *appsv1.ReplicaSet
		want int32
	}{{old, 14}, {cur, 9}} {
		got, err := s.api.rss.Get(testCtx(t), ns, tt.rs.Name)
		if err != nil {
			t.Fatal(err)
		}
		if *got.Spec.Replicas != tt.want || got.Annotations[DesiredReplicasAnnotation] != "20" || got.Annotations[MaxReplicasAnnotation] != "23" {
			t.Errorf("%s: %d replicas, annotations %v; want %d, desired 20, max 23", got.Name, *got.Spec.Replicas, got.Annotations, tt.want)
		}
	}
}

// Another template whose ReplicaSet took the name first: the collision is
// counted, and the next sync creates the ReplicaSet under another hash.
func TestHashCollisionBumpsCollisionCount(t *testing.T) {
	s := newSyncEnv(t)
	d := s.api.createDeployment(t, newDeployment("web", 1, "nginx:A"))
	hash := computeHash(&d.Spec.Template, nil)
	squatter := newDeployment("squatter", 0, "busybox")
	squatter.Spec.Template.Labels = map[string]string{"app": "other"}
	if _, err := s.api.rss.Create(testCtx(t), &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-" + hash, Namespace: ns, Labels: map[string]string{"app": "other"}},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: new(int32),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}},
			Template: squatter.Spec.Template,
		},
	}); err != nil {
		t.Fatal(err)
	}

	s.refresh(t)
	if err := s.c.sync(testCtx(t), ns+"/web"); !client.IsAlreadyExists(err) {
		t.Fatalf("sync: %v, want the AlreadyExists of the collision", err)
	}
	d = s.api.getDeployment(t, "web")
	if d.Status.CollisionCount == nil || *d.Status.CollisionCount != 1 {
		t.Fatalf("collisionCount %v, want 1", d.Status.CollisionCount)
	}
	s.refresh(t)
	if err := s.c.sync(testCtx(t), ns+"/web"); err != nil {
		t.Fatal(err)
	}
	want := "web-" + computeHash(&d.Spec.Template, d.Status.CollisionCount)
	if _, err := s.api.rss.Get(testCtx(t), ns, want); err != nil {
		t.Fatalf("replica set %s: %v", want, err)
	}
}

func TestComputeHash(t *testing.T) {
	tmpl := newDeployment("web", 1, "nginx:A").Spec.Template
	h := computeHash(&tmpl, nil)
	if h != computeHash(tmpl.DeepCopy(), nil) {
		t.Error("the hash of one template differs between calls")
	}
	if strings.Trim(h, "bcdfghjklmnpqrstvwxz2456789") != "" || len(h) < 5 {
		t.Errorf("hash %q is not in the safe alphabet", h)
	}
	one := int32(1)
	if computeHash(&tmpl, &one) == h {
		t.Error("collisionCount does not change the hash")
	}
	other := *tmpl.DeepCopy()
	other.Spec.Containers[0].Image = "nginx:B"
	if computeHash(&other, nil) == h {
		t.Error("another image has the same hash")
	}
	// The hash label itself is ignored when telling templates apart.
	labelled := *tmpl.DeepCopy()
	labelled.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = h
	if !equalIgnoreHash(&labelled, &tmpl) || equalIgnoreHash(&other, &tmpl) {
		t.Error("equalIgnoreHash")
	}
}

func TestResolveFenceposts(t *testing.T) {
	tests := []struct {
		replicas                  int32
		surge, unavailable        intstr.IntOrString
		wantSurge, wantUnavailble int32
	}{
		{10, intstr.FromString("25%"), intstr.FromString("25%"), 3, 2},
		{3, intstr.FromString("25%"), intstr.FromString("25%"), 1, 0},
		{3, intstr.FromInt(1), intstr.FromInt(0), 1, 0},
		{3, intstr.FromInt(0), intstr.FromInt(0), 0, 1}, // never both zero
		{1, intstr.FromString("0%"), intstr.FromString("100%"), 0, 1},
	}
	for _, tt := range tests {
		d := newDeployment("web", tt.replicas, "x")
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &tt.surge, MaxUnavailable: &tt.unavailable}}
		s, u, err := resolveFenceposts(d)
		if err != nil || s != tt.wantSurge || u != tt.wantUnavailble {
			t.Errorf("%d replicas, surge %s, unavailable %s: got %d, %d, %v; want %d, %d",
				tt.replicas, tt.surge.String(), tt.unavailable.String(), s, u, err, tt.wantSurge, tt.wantUnavailble)
		}
	}
}

func rsWith(spec, statusReplicas, available int32) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		Spec:   appsv1.ReplicaSetSpec{Replicas: &spec},
		Status: appsv1.ReplicaSetStatus{Replicas: statusReplicas, AvailableReplicas: available},
	}
}

// The surge bound counts pods an old ReplicaSet still has although its
// spec says fewer: its controller has not deleted them yet.
func TestNewRSNewReplicasCountsPodsNotYetDeleted(t *testing.T) {
	d := rolling(newDeployment("web", 3, "x"), 1, 0)
	tests := []struct {
		name     string
		old, new *appsv1.ReplicaSet
		want     int32
	}{
		{"room for one surge pod", rsWith(3, 3, 3), rsWith(0, 0, 0), 1},
		{"old scaled down, its pod still there", rsWith(2, 3, 3), rsWith(1, 1, 1), 1},
		{"old scaled down and caught up", rsWith(2, 2, 2), rsWith(1, 1, 1), 2},
		{"never past replicas", rsWith(0, 0, 0), rsWith(2, 2, 2), 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := newRSNewReplicas(d, []*appsv1.ReplicaSet{tt.old, tt.new}, tt.new)
			if err != nil || got != tt.want {
				t.Errorf("got %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

// The availability bound counts, of a ReplicaSet just scaled down, only
// the available pods its spec keeps.
func TestSurelyAvailable(t *testing.T) {
	for _, tt := range []struct {
		rs   *appsv1.ReplicaSet
		want int32
	}{
		{rsWith(3, 3, 3), 3},
		{rsWith(2, 3, 3), 2}, // scaled down, status not caught up
		{rsWith(3, 3, 1), 1},
		{nil, 0},
	} {
		if got := surelyAvailable(tt.rs); got != tt.want {
			t.Errorf("surelyAvailable(%v) = %d, want %d", tt.rs, got, tt.want)
		}
	}
}

func TestAppendRevisionHistory(t *testing.T) {
	if got := appendRevisionHistory("", "1"); got != "1" {
		t.Errorf("got %q", got)
	}
	if got := appendRevisionHistory("1,3", "5"); got != "1,3,5" {
		t.Errorf("got %q", got)
	}
	long := strings.Repeat("12345678,", maxRevisionHistoryChars/9) + "1"
	if got := appendRevisionHistory(long, "99"); len(got) > maxRevisionHistoryChars || !strings.HasSuffix(got, ",99") {
		t.Errorf("history of %d chars, want at most %d ending in 99", len(got), maxRevisionHistoryChars)
	}
}

// Near the int32 limit, spec.replicas + maxSurge and the sums of the
// ReplicaSets' sizes are more than an int32: none of them may wrap around.
func TestSizesNearTheInt32Limit(t *testing.T) {
	const huge = 2_000_000_000 // + 25% is more than math.MaxInt32
	d := newDeployment("web", huge, "x")
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: new(intstr.FromString("25%")), MaxUnavailable: new(intstr.FromString("25%"))}}

	newRS := rsWith(0, 0, 0)
	if got, err := newRSNewReplicas(d, []*appsv1.ReplicaSet{newRS}, newRS); err != nil || got != huge {
		t.Errorf("a new ReplicaSet of a %d Deployment: size %d, %v; want %d", huge, got, err, huge)
	}
	// Mid-rollout, 1.5e9 old and 0.5e9 new pods: the surge lets the new
	// one grow by 0.5e9.
	old, half := rsWith(1_500_000_000, 1_500_000_000, 1_500_000_000), rsWith(500_000_000, 0, 0)
	if got, _ := newRSNewReplicas(d, []*appsv1.ReplicaSet{old, half}, half); got != 1_000_000_000 {
		t.Errorf("mid-rollout: the new ReplicaSet grows to %d, want 1000000000 (the 25%% surge)", got)
	}
	old = rsWith(huge, huge, huge)
	if got := maxTotalPods(d); got != 2_500_000_000 {
		t.Errorf("maxTotalPods %d, want 2500000000", got)
	}
	if got := sumSpecReplicas([]*appsv1.ReplicaSet{old, old}); got != 2*huge {
		t.Errorf("sum of two ReplicaSets of %d: %d", huge, got)
	}
	twice := newDeployment("web", huge, "x")
	twice.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: new(intstr.FromString("200%")), MaxUnavailable: new(intstr.FromInt(0))}}
	if s, _, err := resolveFenceposts(twice); err != nil || s != math.MaxInt32 {
		t.Errorf("a surge of 200%% of %d: %d, %v; want math.MaxInt32", huge, s, err)
	}
	for n, want := range map[int64]int32{-5: 0, 7: 7, 5_000_000_000: math.MaxInt32} {
		if got := clampReplicas(n); got != want {
			t.Errorf("clampReplicas(%d) = %d, want %d", n, got, want)
		}
	}
}
