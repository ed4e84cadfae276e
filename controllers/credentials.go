package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
)

// With --use-service-account-credentials, as kube-controller-manager's,
// each controller talks to the API server as a ServiceAccount of its own
// in kube-system (system:serviceaccount:kube-system:replicaset-controller,
// ...), whose ClusterRole system:controller:<account> grants exactly what
// it uses: a controller that oversteps it gets a 403, in its log. The
// manager's own identity keeps the shared informers and asks for the
// accounts' tokens through the TokenRequest API, as kube's dynamic client
// builder does.

// saTokenLifetime is how long each token asked for lasts; it is renewed
// when four fifths of that have passed.
const saTokenLifetime = time.Hour

// serviceAccountToken is a TokenSource for one ServiceAccount of
// kube-system: it makes sure the account exists, asks for a token, and
// asks again before the token expires.
type serviceAccountToken struct {
	rc   *client.RESTClient // the manager's own identity
	name string

	mu      sync.Mutex
	token   string
	renewAt time.Time
}

func (t *serviceAccountToken) Token(ctx context.Context) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.token != "" && time.Now().Before(t.renewAt) {
		return t.token, nil
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: t.name}}
	if _, err := client.For[*corev1.ServiceAccount](t.rc).Create(ctx, sa); err != nil && !client.IsAlreadyExists(err) {
		return "", fmt.Errorf("service account kube-system/%s: %w", t.name, err)
	}
	seconds := int64(saTokenLifetime / time.Second)
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}
	path := fmt.Sprintf("/api/v1/namespaces/%s/serviceaccounts/%s/token", metav1.NamespaceSystem, t.name)
	body, err := json.Marshal(req)
	if err != nil {
		return "", err
	}
	var got authenticationv1.TokenRequest
	if err := t.rc.Do(ctx, http.MethodPost, path, nil, "application/json", body, &got); err != nil {
		return "", fmt.Errorf("token for service account kube-system/%s: %w", t.name, err)
	}
	now := time.Now()
	lifetime := got.Status.ExpirationTimestamp.Sub(now)
	t.token, t.renewAt = got.Status.Token, now.Add(lifetime*4/5)
	return t.token, nil
}

// controllerClient is the client a controller acts through: its own
// ServiceAccount's with --use-service-account-credentials, else the
// manager's.
func (m *Manager) controllerClient(d descriptor) (*client.RESTClient, error) {
	if !m.cfg.UseServiceAccountCredentials || d.serviceAccount == "" {
		return m.rc, nil
	}
	if m.cfg.ServiceAccountClient == nil {
		return nil, fmt.Errorf("--use-service-account-credentials needs a way to reach the API server with a token alone")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if rc, ok := m.saClients[d.serviceAccount]; ok {
		return rc, nil
	}
	rc, err := m.cfg.ServiceAccountClient(&serviceAccountToken{rc: m.rc, name: d.serviceAccount})
	if err != nil {
		return nil, err
	}
	if m.saClients == nil {
		m.saClients = map[string]*client.RESTClient{}
	}
	m.saClients[d.serviceAccount] = rc
	return rc, nil
}
