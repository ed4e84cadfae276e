package cloudnode

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/cloud"
)

// updateNodeStatus is one refresh: every initialized Node's addresses are
// compared with its machine's, at most workers Nodes at a time. A Node the
// cloud cannot answer for is left as it is until the next refresh.
func (c *Controller) updateNodeStatus(ctx context.Context, workers int) {
	defer func() {
		if c.refreshes != nil {
			c.refreshes()
		}
	}()
	nodes := c.lister.List(nil)
	work := make(chan *corev1.Node)
	var wg sync.WaitGroup
	for range min(workers, len(nodes)) {
		wg.Go(func() {
			for node := range work {
				if hasCloudTaint(node) {
					continue // not initialized yet: sync does it
				}
				meta, err := c.instances.InstanceMetadata(ctx, node)
				if err != nil {
					c.log.Warn("get instance metadata for node addresses failed", slog.String("object", node.Name), slog.Any("err", err))
					continue
				}
				if meta != nil {
					c.updateNodeAddress(ctx, node, meta)
				}
			}
		})
	}
	for _, node := range nodes {
		select {
		case work <- node:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(work)
	wg.Wait()
}

// updateNodeAddress writes meta's addresses into an initialized node's
// status when they differ from the node's. The cloud's addresses win; the
// kubelet's hostname address is kept when the cloud gives none.
func (c *Controller) updateNodeAddress(ctx context.Context, node *corev1.Node, meta *cloud.InstanceMetadata) {
	if hasCloudTaint(node) || len(meta.NodeAddresses) == 0 {
		return
	}
	want := mergeAddresses(meta.NodeAddresses, node.Status.Addresses)
	if !addressesChanged(node.Status.Addresses, want) {
		return
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"addresses": want}})
	if err != nil {
		c.log.Error("encode addresses", slog.String("object", node.Name), slog.Any("err", err))
		return
	}
	_, err = c.nodes.Patch(ctx, "", node.Name, types.MergePatchType, patch, "status")
	switch {
	case client.IsNotFound(err):
	case err != nil:
		// The next refresh tries again, as kube's does.
		c.log.Warn("patch node with cloud addresses failed", slog.String("object", node.Name), slog.Any("err", err))
	default:
		c.log.Info(fmt.Sprintf("addresses %s → %s", describe(node.Status.Addresses), describe(want)), slog.String("object", node.Name))
	}
}

// mergeAddresses is the cloud's addresses, plus the node's hostname
// addresses when the cloud has none of that type.
func mergeAddresses(fromCloud, current []corev1.NodeAddress) []corev1.NodeAddress {
	out := append([]corev1.NodeAddress(nil), fromCloud...)
	for _, a := range fromCloud {
		if a.Type == corev1.NodeHostName {
			return out
		}
	}
	for _, a := range current {
		if a.Type == corev1.NodeHostName {
			out = append(out, a)
		}
	}
	return out
}

// addressesChanged compares as kube does: by length, then by the address
// of each type (the last one of a type counts), so order alone is no
// change.
func addressesChanged(old, cur []corev1.NodeAddress) bool {
	if len(old) != len(cur) {
		return true
	}
	byType := map[corev1.NodeAddressType]string{}
	for _, a := range old {
		byType[a.Type] = a.Address
	}
	for _, a := range cur {
		if byType[a.Type] != a.Address {
			return true
		}
	}
	return false
}

func describe(addrs []corev1.NodeAddress) string {
	s := "["
	for i, a := range addrs {
		if i > 0 {
			s += " "
		}
		s += string(a.Type) + "=" + a.Address
	}
	return s + "]"
}
