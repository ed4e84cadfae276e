package apiserver_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/auth/user"
)

// whoami is `kubectl auth whoami` with the given headers.
func (e *secureEnv) whoami(t *testing.T, token string, headers ...string) authenticationv1.UserInfo {
	t.Helper()
	var me authenticationv1.SelfSubjectReview
	e.as(t, token, "POST", ssrPath, &authenticationv1.SelfSubjectReview{}, headers...).want(t, http.StatusCreated).into(t, &me)
	return me.Status.UserInfo
}

// TestImpersonation is `kubectl --as bob --as-group dev`: alice may act as
// bob, in the group dev, and is then bob, authenticated; what she may not
// act as is refused with kube's sentence.
func TestImpersonation(t *testing.T) {
	env := startReviewEnv(t, nil)

	u := env.whoami(t, "alice-token", "Impersonate-User", "bob")
	if u.Username != "bob" || u.UID != "" || !slices.Equal(u.Groups, []string{user.AllAuthenticated}) {
		t.Errorf("alice as bob: %+v", u)
	}
	u = env.whoami(t, "alice-token", "Impersonate-User", "bob", "Impersonate-Group", "dev", "Impersonate-Extra-Scopes", "view")
	if u.Username != "bob" || !slices.Equal(u.Groups, []string{"dev", user.AllAuthenticated}) || !slices.Equal(u.Extra["scopes"], []string{"view"}) {
		t.Errorf("alice as bob in dev: %+v", u)
	}
	// Bob, in dev, lists configmaps, which alice may not.
	env.as(t, "alice-token", "GET", "/api/v1/namespaces/default/configmaps", nil).wantStatus(t, http.StatusForbidden, metav1.StatusReasonForbidden)
	env.as(t, "alice-token", "GET", "/api/v1/namespaces/default/configmaps", nil, "Impersonate-User", "bob", "Impersonate-Group", "dev").want(t, http.StatusOK)
	// ... and as bob she no longer reads pods: the request is bob's alone.
	env.as(t, "alice-token", "GET", "/api/v1/namespaces/default/pods", nil, "Impersonate-User", "bob").wantStatus(t, http.StatusForbidden, metav1.StatusReasonForbidden)

	// A ServiceAccount's user name is impersonated as the ServiceAccount,
	// with its groups.
	u = env.whoami(t, "alice-token", "Impersonate-User", "system:serviceaccount:default:builder")
	if u.Username != "system:serviceaccount:default:builder" || !slices.Equal(u.Groups, []string{"system:serviceaccounts", "system:serviceaccounts:default", user.AllAuthenticated}) {
		t.Errorf("alice as a ServiceAccount: %+v", u)
	}

	for _, tc := range []struct {
		token   string
		headers []string
		msg     string
	}{
		{"alice-token", []string{"Impersonate-User", "carol"},
			`users "carol" is forbidden: User "alice" cannot impersonate resource "users" in API group "" at the cluster scope: ` + noRule},
		{"alice-token", []string{"Impersonate-User", "bob", "Impersonate-Group", "system:masters"},
			`groups "system:masters" is forbidden: User "alice" cannot impersonate resource "groups" in API group "" at the cluster scope: ` + noRule},
		{"alice-token", []string{"Impersonate-User", "system:serviceaccount:kube-system:admin"},
			`serviceaccounts "admin" is forbidden: User "alice" cannot impersonate resource "serviceaccounts" in API group "" in the namespace "kube-system": ` + noRule},
		{"alice-token", []string{"Impersonate-User", "bob", "Impersonate-Extra-Scopes", "admin"},
			`userextras.authentication.k8s.io "admin" is forbidden: User "alice" cannot impersonate resource "userextras/scopes" in API group "authentication.k8s.io" at the cluster scope: ` + noRule},
		{"alice-token", []string{"Impersonate-User", "bob", "Impersonate-Uid", "1234"},
			`uids.authentication.k8s.io "1234" is forbidden: User "alice" cannot impersonate resource "uids" in API group "authentication.k8s.io" at the cluster scope: ` + noRule},
		{"mallory-token", []string{"Impersonate-User", "bob"},
			`users "bob" is forbidden: User "mallory" cannot impersonate resource "users" in API group "" at the cluster scope: ` + noRule},
	} {
		st := env.as(t, tc.token, "POST", ssrPath, &authenticationv1.SelfSubjectReview{}, tc.headers...).wantStatus(t, http.StatusForbidden, metav1.StatusReasonForbidden)
		if st.Message != tc.msg {
			t.Errorf("%v:\n got  %s\n want %s", tc.headers, st.Message, tc.msg)
		}
	}

	// Groups without a user are not an impersonation kube understands.
	st := env.as(t, "alice-token", "POST", ssrPath, &authenticationv1.SelfSubjectReview{}, "Impersonate-Group", "dev").
		wantStatus(t, http.StatusInternalServerError, metav1.StatusReasonInternalError)
	if want := "Internal error occurred: requested [{Group  dev    }] without impersonating a user"; st.Message != want {
		t.Errorf("got  %s\nwant %s", st.Message, want)
	}

	// The admin, in system:masters, may be anyone.
	req, err := http.NewRequest("POST", env.URL+ssrPath, strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", jsonType)
	req.Header.Set("Impersonate-User", "carol")
	resp, err := env.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var me authenticationv1.SelfSubjectReview
	if err := json.NewDecoder(resp.Body).Decode(&me); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("HTTP %d, %v", resp.StatusCode, err)
	}
	if me.Status.UserInfo.Username != "carol" {
		t.Errorf("the admin as carol: %+v", me.Status.UserInfo)
	}
}
