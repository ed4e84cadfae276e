package apiserver

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/minictl/minictl/api"
)

func schemaGroupKind(res *api.Resource) schema.GroupKind {
	return schema.GroupKind{Group: res.Group, Kind: res.Kind}
}

func schemaGroupKindOf(group, kind string) schema.GroupKind {
	return schema.GroupKind{Group: group, Kind: kind}
}
