package apiserver

import (
	"slices"
	"testing"
)

// TestAdmissionChainOrder: the chain runs minictl's plugins in the order
// kube-apiserver runs the same plugins, ResourceQuota last, and every step
// is a named plugin with a mutating half, a validating half or both.
func TestAdmissionChainOrder(t *testing.T) {
	// kube-apiserver's recommended plugin order (AllOrderedPlugins), the
	// plugins minictl has or could have among them.
	kubeOrder := []string{
		"NamespaceLifecycle", "LimitRanger", "ServiceAccount", "NodeRestriction", "Priority", "DefaultTolerationSeconds",
		"PodTolerationRestriction", "DefaultStorageClass", "CertificateApproval", "CertificateSigning",
		"CertificateSubjectRestriction", "DefaultIngressClass", "MutatingAdmissionWebhook", "ValidatingAdmissionPolicy",
		"ValidatingAdmissionWebhook", "ResourceQuota",
	}
	var names []string
	seen := map[string]bool{}
	for _, p := range admissionChain {
		if p.name == "" || (p.admit == nil && p.validate == nil) {
			t.Errorf("step %+v: want a name and at least one half", p)
		}
		if seen[p.name] {
			t.Errorf("%s is in the chain twice", p.name)
		}
		seen[p.name] = true
		if !slices.Contains(kubeOrder, p.name) {
			t.Errorf("%s is not a kube-apiserver admission plugin", p.name)
		}
		names = append(names, p.name)
	}
	if !slices.IsSortedFunc(names, func(a, b string) int {
		return slices.Index(kubeOrder, a) - slices.Index(kubeOrder, b)
	}) {
		t.Errorf("chain %v is not in kube-apiserver's order %v", names, kubeOrder)
	}
	if names[len(names)-1] != "ResourceQuota" {
		t.Errorf("chain %v: ResourceQuota must be last, to charge only what every other step let through", names)
	}
}
