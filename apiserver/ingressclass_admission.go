package apiserver

import (
	"context"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/minictl/minictl/api"
)

// admitDefaultIngressClass is kube-apiserver's DefaultIngressClass: a new
// Ingress that names no class, neither by spec.ingressClassName nor by
// the older kubernetes.io/ingress.class annotation, gets the class
// annotated ingressclass.kubernetes.io/is-default-class: "true". With
// several such classes it gets the newest (the first by name among
// classes created in the same instant); with none it keeps no class.
// Updates are left alone: an Ingress's class is settled when it is made.
func (s *Server) admitDefaultIngressClass(_ context.Context, a *attributes) error {
	ing, ok := a.obj.(*networkingv1.Ingress)
	if a.op != opCreate || !ok || a.subresource != "" || ing.Spec.IngressClassName != nil {
		return nil
	}
	if _, set := ing.Annotations[api.AnnotationIngressClass]; set {
		return nil
	}
	if class := s.defaultIngressClass(); class != "" {
		ing.Spec.IngressClassName = &class
	}
	return nil
}

// defaultIngressClass names the newest IngressClass annotated as the
// default, "" if there is none.
func (s *Server) defaultIngressClass() string {
	items, _ := s.serving().caches[api.IngressClasses].list(&filter{})
	var defaults []*networkingv1.IngressClass
	for _, it := range items {
		ic := it.object().(*networkingv1.IngressClass)
		if ic.Annotations[networkingv1.AnnotationIsDefaultIngressClass] == "true" {
			defaults = append(defaults, ic)
		}
	}
	if len(defaults) == 0 {
		return ""
	}
	newest := slices.MinFunc(defaults, func(a, b *networkingv1.IngressClass) int {
		if c := b.CreationTimestamp.Compare(a.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return newest.Name
}
