package api

import (
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
)

// The reviews: questions put to the API server as a create, answered in
// the object's status and never stored (CreateOnly). The API server
// answers them (apiserver/review.go): who a token is, who the caller is,
// and whether someone may do something.
var (
	TokenReviews = &Resource{
		Group: "authentication.k8s.io", Version: "v1", Kind: "TokenReview", Plural: "tokenreviews", Singular: "tokenreview",
		CreateOnly: true, New: func() Object { return &authenticationv1.TokenReview{} },
	}
	SelfSubjectReviews = &Resource{
		Group: "authentication.k8s.io", Version: "v1", Kind: "SelfSubjectReview", Plural: "selfsubjectreviews", Singular: "selfsubjectreview",
		CreateOnly: true, New: func() Object { return &authenticationv1.SelfSubjectReview{} },
	}
	LocalSubjectAccessReviews = &Resource{
		Group: "authorization.k8s.io", Version: "v1", Kind: "LocalSubjectAccessReview", Plural: "localsubjectaccessreviews", Singular: "localsubjectaccessreview",
		Namespaced: true, CreateOnly: true, New: func() Object { return &authorizationv1.LocalSubjectAccessReview{} },
	}
	SelfSubjectAccessReviews = &Resource{
		Group: "authorization.k8s.io", Version: "v1", Kind: "SelfSubjectAccessReview", Plural: "selfsubjectaccessreviews", Singular: "selfsubjectaccessreview",
		CreateOnly: true, New: func() Object { return &authorizationv1.SelfSubjectAccessReview{} },
	}
	SelfSubjectRulesReviews = &Resource{
		Group: "authorization.k8s.io", Version: "v1", Kind: "SelfSubjectRulesReview", Plural: "selfsubjectrulesreviews", Singular: "selfsubjectrulesreview",
		CreateOnly: true, New: func() Object { return &authorizationv1.SelfSubjectRulesReview{} },
	}
	SubjectAccessReviews = &Resource{
		Group: "authorization.k8s.io", Version: "v1", Kind: "SubjectAccessReview", Plural: "subjectaccessreviews", Singular: "subjectaccessreview",
		CreateOnly: true, New: func() Object { return &authorizationv1.SubjectAccessReview{} },
	}
)
