package testenv

import (
	"log/slog"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Option changes what Start starts.
type Option func(*config)

// config is what the options say.
type config struct {
	crdPaths              []string
	crds                  []*apiextensionsv1.CustomResourceDefinition
	errorIfCRDPathMissing bool
	webhooks              *WebhookInstallOptions

	controllers []string // nil: no controller manager
	scheduler   bool
	nodes       int
	fast        bool

	etcdEndpoints []string // empty: an embedded etcd
	port          int      // the secure port; 0: a free one
	logger        *slog.Logger
}

// CRDDirectoryPaths installs the CustomResourceDefinitions in the YAML
// and JSON files (.yaml, .yml, .json; several documents per file) of each
// directory, or in each file named, as envtest's option of the same name.
// Documents of other kinds are skipped. A path that does not exist is
// skipped too, unless ErrorIfCRDPathMissing.
func CRDDirectoryPaths(paths ...string) Option {
	return func(c *config) { c.crdPaths = append(c.crdPaths, paths...) }
}

// CRDs installs these CustomResourceDefinitions.
func CRDs(crds ...*apiextensionsv1.CustomResourceDefinition) Option {
	return func(c *config) { c.crds = append(c.crds, crds...) }
}

// ErrorIfCRDPathMissing makes a CRD path that does not exist, or holds
// no CustomResourceDefinition, end the test, as envtest's option of the
// same name.
func ErrorIfCRDPathMissing() Option {
	return func(c *config) { c.errorIfCRDPathMissing = true }
}

// WebhookInstallOptions are the admission webhooks to install, pointed
// at a server the test runs, as envtest's type of the same name. Start
// fills in LocalServingHost, LocalServingPort, LocalServingCertDir and
// LocalServingCAData (Env.WebhookInstallOptions), and rewrites each
// webhook's clientConfig to call https://LocalServingHost:LocalServingPort
// at its service's path, trusting LocalServingCAData.
type WebhookInstallOptions struct {
	MutatingWebhooks   []*admissionregistrationv1.MutatingWebhookConfiguration
	ValidatingWebhooks []*admissionregistrationv1.ValidatingWebhookConfiguration

	// LocalServingHost is the address the test's webhook server listens
	// on (default 127.0.0.1); LocalServingPort its port (0: a free one,
	// chosen by Start).
	LocalServingHost string
	LocalServingPort int
	// LocalServingCertDir holds tls.crt and tls.key, a serving
	// certificate for LocalServingHost signed by the cluster's CA, the
	// names controller-runtime's webhook server reads.
	LocalServingCertDir string
	// LocalServingCAData is the CA (PEM) the API server trusts the
	// webhook server with: the cluster's.
	LocalServingCAData []byte
}

// Webhooks installs admission webhooks served by the test itself.
func Webhooks(w WebhookInstallOptions) Option {
	return func(c *config) { c.webhooks = &w }
}

// WithControllers runs the controller manager with the named controllers
// in kube-controller-manager's --controllers syntax ("*" all default-on,
// "foo" one more, "-foo" one less); none named: "*".
func WithControllers(names ...string) Option {
	return func(c *config) {
		if len(names) == 0 {
			names = []string{"*"}
		}
		c.controllers = names
	}
}

// WithScheduler runs the default scheduler.
func WithScheduler() Option {
	return func(c *config) { c.scheduler = true }
}

// WithNodes runs n simulated nodes, node-1 to node-n, whose kubelets run
// the pods bound to them (no containers: pods become Running and Ready).
func WithNodes(n int) Option {
	return func(c *config) { c.nodes = n }
}

// WithFast scales every timing down as `minictl up --fast` does:
// heartbeats every second, a node Unknown after 5s of silence, pods
// evicted 5s after that, a failed Job retried after seconds.
func WithFast() Option {
	return func(c *config) { c.fast = true }
}

// WithoutEmbeddedEtcd keeps the objects in the etcd at endpoints instead
// of an embedded one. Each Env needs an etcd of its own: keys are not
// prefixed, so two environments on one etcd would see each other's
// objects.
func WithoutEmbeddedEtcd(endpoints ...string) Option {
	return func(c *config) { c.etcdEndpoints = endpoints }
}

// WithPort serves the secure port on 127.0.0.1:port rather than a free
// port. A port that is taken ends the test.
func WithPort(port int) Option {
	return func(c *config) { c.port = port }
}

// WithLogger sends every component's logs to log; by default they are
// discarded. (A logger that writes to t.Log must not outlive the test:
// Start stops every component before the test ends, so it does not.)
func WithLogger(log *slog.Logger) Option {
	return func(c *config) { c.logger = log }
}
