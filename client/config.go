package client

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// DefaultServer is where a client goes when neither a flag nor a kubeconfig
// names a server: the insecure port `minictl up` listens on.
const DefaultServer = "http://127.0.0.1:8080"

// Config says how to reach and authenticate to an API server.
type Config struct {
	Server      string // "http://127.0.0.1:8080"; a bare host:port gets http://, or https:// when TLS settings are given
	BearerToken string
	// TokenSource, when set, gives the bearer token of each request
	// instead of BearerToken: a token that expires and is renewed, such
	// as a ServiceAccount's from the TokenRequest API.
	TokenSource TokenSource

	CAFile string // PEM roots to verify the server with; CAData wins when both are set
	CAData []byte
	// CertFile/CertData and KeyFile/KeyData are a client certificate, for
	// kubeconfigs that authenticate with one instead of a token.
	CertFile, KeyFile string
	CertData, KeyData []byte
	Insecure          bool // skip TLS verification

	UserAgent string
	Timeout   time.Duration // per non-watch request; 0 = none
	QPS       float32       // client-side rate limit; 0 = unlimited
	Burst     int           // bucket size when QPS > 0; at least 1

	// Namespace is the kubeconfig context's namespace, "" when it names
	// none. The client does not use it; commands default to it.
	Namespace string
}

// The kubeconfig subset minictl reads. Field names are the kubeconfig's own.
type kubeconfig struct {
	CurrentContext string         `json:"current-context"`
	Clusters       []namedCluster `json:"clusters"`
	Users          []namedUser    `json:"users"`
	Contexts       []namedContext `json:"contexts"`
}

type namedCluster struct {
	Name    string `json:"name"`
	Cluster struct {
		Server                   string `json:"server"`
		CertificateAuthority     string `json:"certificate-authority"`
		CertificateAuthorityData []byte `json:"certificate-authority-data"`
		InsecureSkipTLSVerify    bool   `json:"insecure-skip-tls-verify"`
	} `json:"cluster"`
	dir string // of the file it came from, for relative paths
}

type namedUser struct {
	Name string `json:"name"`
	User struct {
		Token                 string `json:"token"`
		TokenFile             string `json:"tokenFile"`
		ClientCertificate     string `json:"client-certificate"`
		ClientCertificateData []byte `json:"client-certificate-data"`
		ClientKey             string `json:"client-key"`
		ClientKeyData         []byte `json:"client-key-data"`
	} `json:"user"`
	dir string
}

type namedContext struct {
	Name    string `json:"name"`
	Context struct {
		Cluster   string `json:"cluster"`
		User      string `json:"user"`
		Namespace string `json:"namespace"`
	} `json:"context"`
}

// LoadKubeconfig reads a kubeconfig and returns the Config of contextName, or
// of its current-context when contextName is "". Like kubectl, path may list
// several files separated by the OS list separator (":" on Unix): they are
// merged, the first file to name a cluster, user or context winning, and
// files that do not exist are skipped; when none exists the error wraps
// fs.ErrNotExist. Relative file paths in a kubeconfig are relative to the
// file. A tokenFile is read once, here.
func LoadKubeconfig(path, contextName string) (*Config, error) {
	kc, err := readKubeconfigs(path)
	if err != nil {
		return nil, err
	}
	if contextName == "" {
		contextName = kc.CurrentContext
	}
	if contextName == "" {
		return nil, fmt.Errorf("kubeconfig %s: no current-context and no context given", path)
	}
	ctx, ok := find(kc.Contexts, func(c namedContext) string { return c.Name }, contextName)
	if !ok {
		return nil, fmt.Errorf("kubeconfig %s: context %q not found", path, contextName)
	}
	cluster, ok := find(kc.Clusters, func(c namedCluster) string { return c.Name }, ctx.Context.Cluster)
	if !ok {
		return nil, fmt.Errorf("kubeconfig %s: context %q: cluster %q not found", path, contextName, ctx.Context.Cluster)
	}
	if cluster.Cluster.Server == "" {
		return nil, fmt.Errorf("kubeconfig %s: cluster %q has no server", path, cluster.Name)
	}
	cfg := &Config{
		Server:    cluster.Cluster.Server,
		CAFile:    resolve(cluster.dir, cluster.Cluster.CertificateAuthority),
		CAData:    cluster.Cluster.CertificateAuthorityData,
		Insecure:  cluster.Cluster.InsecureSkipTLSVerify,
		Namespace: ctx.Context.Namespace,
	}
	if ctx.Context.User == "" {
		return cfg, nil
	}
	user, ok := find(kc.Users, func(u namedUser) string { return u.Name }, ctx.Context.User)
	if !ok {
		return nil, fmt.Errorf("kubeconfig %s: context %q: user %q not found", path, contextName, ctx.Context.User)
	}
	u := user.User
	cfg.BearerToken = u.Token
	if cfg.BearerToken == "" && u.TokenFile != "" {
		b, err := os.ReadFile(resolve(user.dir, u.TokenFile))
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: user %q: %w", path, user.Name, err)
		}
		cfg.BearerToken = strings.TrimSpace(string(b))
	}
	cfg.CertFile, cfg.CertData = resolve(user.dir, u.ClientCertificate), u.ClientCertificateData
	cfg.KeyFile, cfg.KeyData = resolve(user.dir, u.ClientKey), u.ClientKeyData
	return cfg, nil
}

// readKubeconfigs reads and merges the files of a path list.
func readKubeconfigs(path string) (*kubeconfig, error) {
	if path == "" {
		return nil, errors.New("kubeconfig: no path given")
	}
	var merged kubeconfig
	found := false
	for _, file := range filepath.SplitList(path) {
		if file == "" {
			continue
		}
		b, err := os.ReadFile(file)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("kubeconfig: %w", err)
		}
		found = true
		var kc kubeconfig
		if err := yaml.Unmarshal(b, &kc); err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", file, err)
		}
		dir := filepath.Dir(file)
		if merged.CurrentContext == "" {
			merged.CurrentContext = kc.CurrentContext
		}
		for _, c := range kc.Clusters {
			if _, dup := find(merged.Clusters, func(c namedCluster) string { return c.Name }, c.Name); !dup {
				c.dir = dir
				merged.Clusters = append(merged.Clusters, c)
			}
		}
		for _, u := range kc.Users {
			if _, dup := find(merged.Users, func(u namedUser) string { return u.Name }, u.Name); !dup {
				u.dir = dir
				merged.Users = append(merged.Users, u)
			}
		}
		for _, c := range kc.Contexts {
			if _, dup := find(merged.Contexts, func(c namedContext) string { return c.Name }, c.Name); !dup {
				merged.Contexts = append(merged.Contexts, c)
			}
		}
	}
	if !found {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, fs.ErrNotExist)
	}
	return &merged, nil
}

func find[E any](list []E, name func(E) string, want string) (E, bool) {
	for _, e := range list {
		if name(e) == want {
			return e, true
		}
	}
	var zero E
	return zero, false
}

// resolve makes a kubeconfig's relative path relative to its file.
func resolve(dir, path string) string {
	if path == "" || filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(dir, path)
}

// BindFlags defines the connection flags on flags and returns the function that,
// after flags is parsed, resolves them into a Config:
//
//	--kubeconfig                (default $KUBECONFIG)
//	--context                   (default the kubeconfig's current-context)
//	--server                    (default the kubeconfig's, else DefaultServer)
//	--token
//	--certificate-authority
//	--insecure-skip-tls-verify
//
// A flag that is set wins over the kubeconfig. A --kubeconfig flag must name
// a file that exists; a $KUBECONFIG whose files are all missing is ignored,
// as kubectl ignores it.
func BindFlags(flags *flag.FlagSet) func() (*Config, error) {
	envKubeconfig := os.Getenv("KUBECONFIG")
	kubeconfigPath := flags.String("kubeconfig", envKubeconfig, "path to a kubeconfig file, or a list of them (defaults to $KUBECONFIG)")
	contextName := flags.String("context", "", "kubeconfig context to use (default its current-context)")
	server := flags.String("server", "", "API server URL (default from the kubeconfig, else "+DefaultServer+")")
	token := flags.String("token", "", "bearer token for the API server")
	caFile := flags.String("certificate-authority", "", "PEM file of the CA that signed the API server's certificate")
	insecure := flags.Bool("insecure-skip-tls-verify", false, "do not verify the API server's certificate (insecure)")

	return func() (*Config, error) {
		set := map[string]bool{}
		flags.Visit(func(f *flag.Flag) { set[f.Name] = true })

		cfg := &Config{}
		if *kubeconfigPath != "" {
			loaded, err := LoadKubeconfig(*kubeconfigPath, *contextName)
			switch {
			case err == nil:
				cfg = loaded
			case !set["kubeconfig"] && errors.Is(err, fs.ErrNotExist):
				// $KUBECONFIG names nothing that exists: no kubeconfig.
			default:
				return nil, err
			}
		}
		if *contextName != "" && cfg.Server == "" {
			return nil, fmt.Errorf("--context %q needs a kubeconfig", *contextName)
		}
		if set["server"] {
			cfg.Server = *server
		}
		if set["token"] {
			cfg.BearerToken = *token
		}
		if set["certificate-authority"] {
			cfg.CAFile, cfg.CAData = *caFile, nil
			cfg.Insecure = false
		}
		if set["insecure-skip-tls-verify"] {
			cfg.Insecure = *insecure
			if *insecure {
				cfg.CAFile, cfg.CAData = "", nil
			}
		}
		if set["certificate-authority"] && set["insecure-skip-tls-verify"] && *insecure && *caFile != "" {
			return nil, errors.New("--certificate-authority and --insecure-skip-tls-verify=true contradict each other")
		}
		if cfg.Server == "" {
			cfg.Server = DefaultServer
		}
		return cfg, nil
	}
}

// TokenSource gives a bearer token, renewing it as it needs; it is called
// for every request and must be safe for concurrent use.
type TokenSource interface {
	Token(ctx context.Context) (string, error)
}
