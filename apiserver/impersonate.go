package apiserver

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/validation"

	"github.com/minictl/minictl/auth/audit"
	"github.com/minictl/minictl/auth/authorizer"
	"github.com/minictl/minictl/auth/user"
)

// impersonate lets a user who may act as another do so, with kube's
// Impersonate-User, Impersonate-Group, Impersonate-Uid and
// Impersonate-Extra-<key> headers (`kubectl --as bob --as-group dev`).
// Each thing asked for is authorized on its own, as the verb impersonate
// on users, groups, uids, userextras/<key>, or the ServiceAccount a
// system:serviceaccount:<ns>:<name> user is; the first refused ends the
// request with 403. The request then goes on as the impersonated user,
// and the audit log keeps both.
func (s *Server) impersonate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asks, err := impersonationRequests(r.Header)
		if err != nil {
			writeStatus(w, apierrors.NewInternalError(err))
			return
		}
		if len(asks) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		ctx := r.Context()
		requestor, ok := user.From(ctx)
		if !ok {
			writeStatus(w, apierrors.NewInternalError(errors.New("no user found for request")))
			return
		}
		// Groups asked for are the impersonated user's groups, all of
		// them; without any, a ServiceAccount has its own.
		groupsSpecified := len(r.Header.Values(authenticationv1.ImpersonateGroupHeader)) > 0
		as := &user.Info{Groups: []string{}}
		for _, ask := range asks {
			a := authorizer.Attributes{
				User: requestor, Verb: "impersonate", ResourceRequest: true,
				Namespace: ask.Namespace, Name: ask.Name,
			}
			switch ask.Kind {
			case "ServiceAccount":
				a.Resource = "serviceaccounts"
				as.Name = user.ServiceAccountUsername(ask.Namespace, ask.Name)
				if !groupsSpecified {
					as.Groups = user.ServiceAccountGroups(ask.Namespace)
					as.Groups = slices.DeleteFunc(as.Groups, func(g string) bool { return g == user.AllAuthenticated })
				}
			case "User":
				a.Resource = "users"
				as.Name = ask.Name
			case "Group":
				a.Resource = "groups"
				as.Groups = append(as.Groups, ask.Name)
			case "UserExtra":
				a.APIGroup, a.APIVersion = authenticationv1.SchemeGroupVersion.Group, authenticationv1.SchemeGroupVersion.Version
				a.Resource, a.Subresource = "userextras", ask.FieldPath
				if as.Extra == nil {
					as.Extra = map[string][]string{}
				}
				as.Extra[ask.FieldPath] = append(as.Extra[ask.FieldPath], ask.Name)
			case "UID":
				a.APIGroup, a.APIVersion = authenticationv1.SchemeGroupVersion.Group, authenticationv1.SchemeGroupVersion.Version
				a.Resource = "uids"
				as.UID = ask.Name
			}
			d, reason, err := s.authorizer.Authorize(ctx, a)
			if err != nil || d != authorizer.Allow {
				if err != nil {
					s.log.Debug("impersonation refused", "user", requestor.Name, "err", err)
				}
				writeStatus(w, authorizer.Forbidden(a, reason))
				return
			}
		}
		as.Groups = withAuthenticatedGroup(as.Name, as.Groups)
		audit.LogImpersonatedUser(ctx, as)
		// The headers have done their work: nothing further (a proxied
		// request, a log) sees them.
		for name := range r.Header {
			if isImpersonationHeader(name) {
				r.Header.Del(name)
			}
		}
		next.ServeHTTP(w, r.WithContext(user.WithUser(ctx, as)))
	})
}

// withAuthenticatedGroup adds system:authenticated to the groups of an
// impersonated user, unless they name it or system:unauthenticated
// already; system:anonymous gets system:unauthenticated instead.
func withAuthenticatedGroup(name string, groups []string) []string {
	if name == user.Anonymous {
		if !slices.Contains(groups, user.AllUnauthenticated) {
			groups = append(groups, user.AllUnauthenticated)
		}
		return groups
	}
	if !slices.Contains(groups, user.AllAuthenticated) && !slices.Contains(groups, user.AllUnauthenticated) {
		groups = append(groups, user.AllAuthenticated)
	}
	return groups
}

func isImpersonationHeader(name string) bool {
	switch name {
	case authenticationv1.ImpersonateUserHeader, authenticationv1.ImpersonateGroupHeader, authenticationv1.ImpersonateUIDHeader:
		return true
	}
	return strings.HasPrefix(name, authenticationv1.ImpersonateUserExtraHeaderPrefix)
}

// impersonationRequests reads what the headers ask to act as, one
// reference each: the user (a ServiceAccount when the name is one's),
// each group, each value of each extra, the UID. Groups, extras or a UID
// without a user are an error.
func impersonationRequests(h http.Header) ([]corev1.ObjectReference, error) {
	var asks []corev1.ObjectReference
	name := h.Get(authenticationv1.ImpersonateUserHeader)
	if name != "" {
		if ns, sa, ok := splitServiceAccountUsername(name); ok {
			asks = append(asks, corev1.ObjectReference{Kind: "ServiceAccount", Namespace: ns, Name: sa})
		} else {
			asks = append(asks, corev1.ObjectReference{Kind: "User", Name: name})
		}
	}
	others := false
	for _, g := range h.Values(authenticationv1.ImpersonateGroupHeader) {
		others = true
		asks = append(asks, corev1.ObjectReference{Kind: "Group", Name: g})
	}
	// Extras in a stable order: the headers are a map.
	var extraHeaders []string
	for k := range h {
		if strings.HasPrefix(k, authenticationv1.ImpersonateUserExtraHeaderPrefix) {
			extraHeaders = append(extraHeaders, k)
		}
	}
	slices.Sort(extraHeaders)
	for _, k := range extraHeaders {
		others = true
		key := unescapeExtraKey(strings.ToLower(k[len(authenticationv1.ImpersonateUserExtraHeaderPrefix):]))
		for _, v := range h[k] {
			asks = append(asks, corev1.ObjectReference{
				Kind: "UserExtra", APIVersion: authenticationv1.SchemeGroupVersion.String(), Name: v, FieldPath: key,
			})
		}
	}
	if uid := h.Get(authenticationv1.ImpersonateUIDHeader); uid != "" {
		others = true
		asks = append(asks, corev1.ObjectReference{Kind: "UID", APIVersion: authenticationv1.SchemeGroupVersion.String(), Name: uid})
	}
	if others && name == "" {
		return nil, fmt.Errorf("requested %v without impersonating a user", asks)
	}
	return asks, nil
}

// unescapeExtraKey undoes the percent-encoding an extra's key needs in a
// header name (kubectl escapes what a header name may not hold).
func unescapeExtraKey(key string) string {
	k, err := url.PathUnescape(key)
	if err != nil {
		return key
	}
	return k
}

// splitServiceAccountUsername reads system:serviceaccount:<ns>:<name>.
func splitServiceAccountUsername(name string) (namespace, sa string, ok bool) {
	rest, found := strings.CutPrefix(name, user.ServiceAccountUsernamePrefix)
	if !found {
		return "", "", false
	}
	namespace, sa, found = strings.Cut(rest, ":")
	if !found || strings.Contains(sa, ":") {
		return "", "", false
	}
	if len(validation.ValidateNamespaceName(namespace, false)) > 0 || len(validation.ValidateServiceAccountName(sa, false)) > 0 {
		return "", "", false
	}
	return namespace, sa, true
}
