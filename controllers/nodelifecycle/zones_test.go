package nodelifecycle

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// Nodes labelled with their machines' region and zone (by the cloud-node
// controller) count in their zone. One zone going silent while another is
// healthy is that zone's FullDisruption: a zone cut off, whose nodes are
// still tainted at the normal rate, as in kube. A zone of no more than
// --large-cluster-size-threshold nodes with most of them down is in
// PartialDisruption, and taints nothing.
func TestZoneDisruptionFollowsTheCloudsZones(t *testing.T) {
	f := newFixture(t)
	zoneA := []string{"a-1", "a-2", "a-3"}
	zoneB := []string{"b-1", "b-2", "b-3", "b-4"}
	for _, names := range [][]string{zoneA, zoneB} {
		for _, n := range names {
			f.createNode(n)
			node := f.node(n)
			node.Labels = map[string]string{
				corev1.LabelTopologyRegion: "region-x", corev1.LabelFailureDomainBetaRegion: "region-x",
				corev1.LabelTopologyZone: "zone-" + n[:1], corev1.LabelFailureDomainBetaZone: "zone-" + n[:1],
			}
			if _, err := f.nodes.Update(ctx(t), node); err != nil {
				t.Fatal(err)
			}
		}
	}
	f.run()
	f.waitLog(`zone "region-x:\x00:zone-a" → Normal: 0/3 nodes not ready`)
	f.waitLog(`zone "region-x:\x00:zone-b" → Normal: 0/4 nodes not ready`)

	// Zone a goes silent; zone b keeps renewing.
	for range grace/period + 1 {
		f.heartbeat(zoneB...)
		f.pass(period)
	}
	f.waitLog(`zone "region-x:\x00:zone-a" → FullDisruption: 3/3 nodes not ready; NoExecute taints at most 0.1 nodes/s`)
	if s := f.ctrl.zoneState("region-x:\x00:zone-b"); s != stateNormal {
		t.Fatalf("zone b is %s, want Normal", s)
	}
	f.waitTaint("a-1", corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute, true)

	// Three of zone b's four go silent too: PartialDisruption, and in a
	// zone this small, no more taints there.
	for range grace/period + 1 {
		f.heartbeat("b-4")
		f.pass(period)
	}
	f.waitLog(`zone "region-x:\x00:zone-b" → PartialDisruption: 3/4 nodes not ready; no NoExecute taints (zone of 4 nodes, not more than 50)`)
	for _, n := range zoneB {
		if f.hasTaintNow(n, corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute) {
			t.Errorf("%s tainted in a small zone in PartialDisruption", n)
		}
	}
}
