package controller

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/informer"
)

// recordingPatcher records patches and answers them with err.
type recordingPatcher struct {
	mu      sync.Mutex
	patches map[string]string // pod name → patch
	err     error
}

func (p *recordingPatcher) Patch(_ context.Context, _, name string, pt types.PatchType, data []byte, _ ...string) (*corev1.Pod, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pt != types.StrategicMergePatchType {
		return nil, errors.New("unexpected patch type " + string(pt))
	}
	if p.patches == nil {
		p.patches = map[string]string{}
	}
	p.patches[name] = string(data)
	return nil, p.err
}

var rsKind = appsv1.SchemeGroupVersion.WithKind("ReplicaSet")

func owner() *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "rs-uid"}}
}

func claimPod(name, ns string, lbls map[string]string, controllerUID types.UID) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: lbls, UID: types.UID("uid-" + name)}}
	if controllerUID != "" {
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "x", UID: controllerUID, Controller: &yes}}
	}
	return p
}

func TestRefManagerClaim(t *testing.T) {
	web := map[string]string{"app": "web"}
	other := map[string]string{"app": "db"}
	deleting := claimPod("orphan-deleting", "default", web, "")
	deleting.DeletionTimestamp = &metav1.Time{}
	pods := []*corev1.Pod{
		claimPod("owned", "default", web, "rs-uid"),
		claimPod("owned-unmatched", "default", other, "rs-uid"),
		claimPod("orphan", "default", web, ""),
		claimPod("orphan-unmatched", "default", other, ""),
		claimPod("orphan-elsewhere", "kube-system", web, ""),
		claimPod("someone-elses", "default", web, "other-uid"),
		deleting,
	}
	p := &recordingPatcher{}
	checks := 0
	m := &RefManager[*corev1.Pod]{
		Owner: owner(), OwnerKind: rsKind, Selector: labels.SelectorFromSet(web), Client: p,
		CanAdopt: func(context.Context) error { checks++; return nil },
	}
	claimed, err := m.Claim(context.Background(), pods)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range claimed {
		names = append(names, c.Name)
	}
	if want := []string{"owned", "orphan"}; !slices.Equal(names, want) {
		t.Errorf("claimed %v, want %v", names, want)
	}
	if len(p.patches) != 2 {
		t.Errorf("patched %v, want orphan (adopt) and owned-unmatched (release)", p.patches)
	}
	if checks != 1 {
		t.Errorf("CanAdopt asked %d times, want once", checks)
	}

	var adopt struct {
		Metadata struct {
			UID             types.UID               `json:"uid"`
			OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(p.patches["orphan"]), &adopt); err != nil {
		t.Fatal(err)
	}
	ref := adopt.Metadata.OwnerReferences
	if adopt.Metadata.UID != "uid-orphan" || len(ref) != 1 || ref[0].UID != "rs-uid" || ref[0].Kind != "ReplicaSet" ||
		ref[0].APIVersion != "apps/v1" || !*ref[0].Controller || !*ref[0].BlockOwnerDeletion {
		t.Errorf("adopt patch %s", p.patches["orphan"])
	}
	release := p.patches["owned-unmatched"]
	if !strings.Contains(release, `"$patch":"delete"`) || !strings.Contains(release, `"uid":"rs-uid"`) ||
		!strings.Contains(release, `"uid":"uid-owned-unmatched"`) {
		t.Errorf("release patch %s", release)
	}
}

func TestRefManagerDoesNotAdoptWhenTheOwnerCannot(t *testing.T) {
	web := map[string]string{"app": "web"}
	p := &recordingPatcher{}
	m := &RefManager[*corev1.Pod]{
		Owner: owner(), OwnerKind: rsKind, Selector: labels.SelectorFromSet(web), Client: p,
		CanAdopt: RecheckOwner(func(context.Context) (*appsv1.ReplicaSet, error) {
			fresh := owner()
			fresh.UID = "a-new-web" // deleted and created again meanwhile
			return fresh, nil
		}, "rs-uid"),
	}
	claimed, err := m.Claim(context.Background(), []*corev1.Pod{claimPod("orphan", "default", web, "")})
	if err == nil || len(claimed) != 0 || len(p.patches) != 0 {
		t.Fatalf("claimed %d, patches %v, err %v: want no adoption and an error", len(claimed), p.patches, err)
	}

	// An owner being deleted neither adopts nor releases.
	dying := owner()
	dying.DeletionTimestamp = &metav1.Time{}
	m = &RefManager[*corev1.Pod]{Owner: dying, OwnerKind: rsKind, Selector: labels.SelectorFromSet(web), Client: p}
	claimed, err = m.Claim(context.Background(), []*corev1.Pod{
		claimPod("orphan", "default", web, ""),
		claimPod("owned-unmatched", "default", nil, "rs-uid"),
		claimPod("owned", "default", web, "rs-uid"),
	})
	if err != nil || len(claimed) != 1 || len(p.patches) != 0 {
		t.Fatalf("claimed %d, patches %v, err %v: want only the owned, matching pod", len(claimed), p.patches, err)
	}
}

func TestControllerUIDIndex(t *testing.T) {
	owned := claimPod("owned", "default", nil, "rs-uid")
	orphan := claimPod("orphan", "default", nil, "")
	elsewhere := claimPod("orphan", "other", nil, "")
	for _, tt := range []struct {
		pod  *corev1.Pod
		want string
	}{{owned, "rs-uid"}, {orphan, OrphanIndexValue("default")}, {elsewhere, OrphanIndexValue("other")}} {
		got, err := ControllerUIDIndexFunc(tt.pod)
		if err != nil || len(got) != 1 || got[0] != tt.want {
			t.Errorf("%s/%s indexed under %v, %v; want %s", tt.pod.Namespace, tt.pod.Name, got, err, tt.want)
		}
	}
}

// fakeInformer is what EnsureControllerUIDIndex needs of an informer.
type fakeInformer struct{ indexer informer.Indexer }

func (f fakeInformer) GetIndexer() informer.Indexer           { return f.indexer }
func (f fakeInformer) AddIndexers(ix informer.Indexers) error { return f.indexer.AddIndexers(ix) }

func TestOwnedAndOrphans(t *testing.T) {
	inf := fakeInformer{informer.NewIndexer(nil, nil)}
	for _, p := range []*corev1.Pod{
		claimPod("owned", "default", nil, "rs-uid"),
		claimPod("orphan", "default", nil, ""),
		claimPod("orphan", "other", nil, ""),
		claimPod("someone-elses", "default", nil, "other-uid"),
	} {
		if err := inf.indexer.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	// Twice: a second controller sharing the informer finds the index there.
	for range 2 {
		if err := EnsureControllerUIDIndex(inf); err != nil {
			t.Fatal(err)
		}
	}
	got, err := OwnedAndOrphans[*corev1.Pod](inf.indexer, "default", "rs-uid")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range got {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	slices.Sort(names)
	if want := []string{"default/orphan", "default/owned"}; !slices.Equal(names, want) {
		t.Errorf("got %v, want %v", names, want)
	}
}

// TestRefManagerFinalizers: finalizers go on with an adoption and come
// off with a release, in the same patch.
func TestRefManagerFinalizers(t *testing.T) {
	web := map[string]string{"app": "web"}
	p := &recordingPatcher{}
	m := &RefManager[*corev1.Pod]{
		Owner: owner(), OwnerKind: rsKind, Selector: labels.SelectorFromSet(web), Client: p,
		Finalizers: []string{"example.com/track"},
	}
	if _, err := m.Claim(context.Background(), []*corev1.Pod{
		claimPod("orphan", "default", web, ""),
		claimPod("owned-unmatched", "default", map[string]string{"app": "db"}, "rs-uid"),
	}); err != nil {
		t.Fatal(err)
	}
	if got := p.patches["orphan"]; !strings.Contains(got, `"finalizers":["example.com/track"]`) {
		t.Errorf("adoption patch %s, want the finalizer added", got)
	}
	if got := p.patches["owned-unmatched"]; !strings.Contains(got, `"$deleteFromPrimitiveList/finalizers":["example.com/track"]`) {
		t.Errorf("release patch %s, want the finalizer removed", got)
	}
}
