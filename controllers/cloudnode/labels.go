package cloudnode

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/client"
)

// labelPairs are the labels kube still writes twice, beta first: the beta
// label is the source of truth, and its GA twin must exist and agree.
var labelPairs = []struct{ beta, ga string }{
	{corev1.LabelFailureDomainBetaZone, corev1.LabelTopologyZone},
	{corev1.LabelFailureDomainBetaRegion, corev1.LabelTopologyRegion},
	{corev1.LabelInstanceType, corev1.LabelInstanceTypeStable},
}

// reconcileLabels sets each GA label of an initialized node that is
// missing or differs from its beta twin to the beta label's value.
func (c *Controller) reconcileLabels(ctx context.Context, node *corev1.Node) error {
	fix := map[string]string{}
	for _, p := range labelPairs {
		beta, ok := node.Labels[p.beta]
		if !ok {
			continue // nothing to follow; someone removed it, or it never was
		}
		if ga, ok := node.Labels[p.ga]; !ok || ga != beta {
			fix[p.ga] = beta
		}
	}
	if len(fix) == 0 {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": fix}})
	if err != nil {
		return err
	}
	_, err = c.nodes.Patch(ctx, "", node.Name, types.MergePatchType, patch)
	if client.IsNotFound(err) {
		return nil // deleted: nothing to reconcile
	}
	if err != nil {
		return fmt.Errorf("update labels of node %s: %w", node.Name, err)
	}
	c.log.Info(fmt.Sprintf("GA labels follow their beta twins → set %v", fix), slog.String("object", node.Name))
	return nil
}
