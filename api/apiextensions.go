package api

import (
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"

	"github.com/minictl/minictl/api/crd"
)

// CustomResourceCleanupFinalizer holds a CustomResourceDefinition until
// every one of its custom objects is deleted, as kube-apiserver's
// apiextensions finalizer controller does.
const CustomResourceCleanupFinalizer = "customresourcecleanup.apiextensions.k8s.io"

// CustomResourceDefinitions are the definitions of the kinds the API
// server serves besides the built-ins (apiextensions.k8s.io/v1). The rules
// of a definition itself are package crd's; what the server does with one
// (names, establishing, serving, cleanup) is the API server's.
var CustomResourceDefinitions = &Resource{
	Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition",
	Plural: "customresourcedefinitions", Singular: "customresourcedefinition",
	ShortNames: []string{"crd", "crds"}, Categories: []string{"api-extensions"}, Subresources: []string{"status"},
	New:              func() Object { return &apiextensionsv1.CustomResourceDefinition{} },
	DeleteFinalizers: []string{CustomResourceCleanupFinalizer},
	Default:          defaulter(crd.Default),
	Validate:         validator(crd.Validate),
	ValidateUpdate:   updateValidator(crd.ValidateUpdate),
	PrepareForCreate: defaulter(prepareCRDForCreate), PrepareForUpdate: updatePreparer(prepareCRDForUpdate),
}

// prepareCRDForCreate is kube's strategy: no status from the client,
// generation 1, the storage version recorded as stored.
func prepareCRDForCreate(c *apiextensionsv1.CustomResourceDefinition) {
	c.Status = apiextensionsv1.CustomResourceDefinitionStatus{}
	c.Generation = 1
	addStoredVersion(c)
}

// prepareCRDForUpdate keeps the status, moves the generation when the spec
// changed, and records a new storage version as stored.
func prepareCRDForUpdate(c, old *apiextensionsv1.CustomResourceDefinition) {
	c.Status = old.Status
	if !apiequality.Semantic.DeepEqual(c.Spec, old.Spec) {
		c.Generation = old.Generation + 1
	}
	addStoredVersion(c)
}

func addStoredVersion(c *apiextensionsv1.CustomResourceDefinition) {
	for _, v := range c.Spec.Versions {
		if v.Storage {
			if !slices.Contains(c.Status.StoredVersions, v.Name) {
				c.Status.StoredVersions = append(c.Status.StoredVersions, v.Name)
			}
			return
		}
	}
}
