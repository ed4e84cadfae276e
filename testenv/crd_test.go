package testenv_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/testenv"
)

// TestCRDsAreEstablished: CRDs from a directory (other kinds in its files
// skipped) and from objects are served when Start returns: a custom
// object can be created at once.
func TestCRDsAreEstablished(t *testing.T) {
	gizmos := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gizmos.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Scope: apiextensionsv1.ClusterScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Gizmo", Plural: "gizmos"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptrTo(true),
				}},
			}},
		},
	}
	env := testenv.Start(t, testenv.CRDDirectoryPaths("testdata/crds", "testdata/does-not-exist"), testenv.CRDs(gizmos))
	ctx := context.Background()
	rc := env.Client()
	for _, obj := range []string{
		`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","namespace":"default"},"spec":{"size":2}}`,
		`{"apiVersion":"example.com/v1","kind":"Gizmo","metadata":{"name":"g"}}`,
	} {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON([]byte(obj)); err != nil {
			t.Fatal(err)
		}
		res := &api.Resource{Group: "example.com", Version: "v1", Kind: u.GetKind(), Plural: strings.ToLower(u.GetKind()) + "s",
			Namespaced: u.GetNamespace() != "", New: api.NewUnstructured}
		if _, err := client.ForResource(rc, res).Create(ctx, u); err != nil {
			t.Fatalf("create %s right after Start: %v", u.GetKind(), err)
		}
	}
	if _, err := client.For[*apiextensionsv1.CustomResourceDefinition](rc).Get(ctx, "", "configmaps"); !client.IsNotFound(err) {
		t.Fatalf("the ConfigMap in the CRD file was not skipped: %v", err)
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestBadUse: each misuse ends the test with t.Fatal and a message that
// says what is wrong, and stops what was started.
func TestBadUse(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	port := taken.Addr().(*net.TCPAddr).Port
	empty := t.TempDir()
	unparsable := filepath.Join(t.TempDir(), "broken.yaml")
	if err := os.WriteFile(unparsable, []byte("kind: [CustomResourceDefinition\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts []testenv.Option
		want string
	}{
		{"missing CRD directory", []testenv.Option{testenv.CRDDirectoryPaths("testdata/no-such-dir"), testenv.ErrorIfCRDPathMissing()},
			`CRD path "testdata/no-such-dir" does not exist (ErrorIfCRDPathMissing is set)`},
		{"directory without CRDs", []testenv.Option{testenv.CRDDirectoryPaths(empty), testenv.ErrorIfCRDPathMissing()},
			"holds no CustomResourceDefinition"},
		{"invalid CRD", []testenv.Option{testenv.CRDDirectoryPaths("testdata/invalid")},
			`install CRD "gadgets.example.com" (from testdata/invalid/gadgets.yaml): CustomResourceDefinition.apiextensions.k8s.io "gadgets.example.com" is invalid: [spec.versions: Invalid value: ["v1"]: must have exactly one version marked as storage version`},
		{"unparsable CRD file", []testenv.Option{testenv.CRDDirectoryPaths(unparsable)},
			"broken.yaml: document 1:"},
		{"port clash", []testenv.Option{testenv.WithPort(port)},
			fmt.Sprintf("the secure port 127.0.0.1:%d is taken", port)},
		{"unknown controller", []testenv.Option{testenv.WithControllers("*", "no-such-controller")},
			"no-such-controller"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := startFails(t, tc.opts...)
			if !strings.Contains(msg, tc.want) {
				t.Fatalf("Start failed with\n  %s\nwant it to say\n  %s", msg, tc.want)
			}
		})
	}
}

// startFails runs Start with a testing.TB that records t.Fatal instead
// of failing the test, runs the cleanups Start registered, and returns
// the message; a Start that succeeds fails the test.
func startFails(t *testing.T, opts ...testenv.Option) string {
	t.Helper()
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		testenv.Start(r, opts...)
	}()
	<-done
	r.cleanup()
	if len(r.fatals) == 0 {
		t.Fatal("Start succeeded")
	}
	return r.fatals[0]
}

// recorder is a testing.TB whose Fatal records the message and ends the
// calling goroutine, as testing's does, and whose cleanups run when the
// caller says.
type recorder struct {
	testing.TB
	mu       sync.Mutex
	fatals   []string
	cleanups []func()
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.fatals = append(r.fatals, fmt.Sprintf(format, args...))
	r.mu.Unlock()
	runtime.Goexit()
}

func (r *recorder) Fatal(args ...any) { r.Fatalf("%s", fmt.Sprint(args...)) }

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	r.fatals = append(r.fatals, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

func (r *recorder) Cleanup(f func()) {
	r.mu.Lock()
	r.cleanups = append(r.cleanups, f)
	r.mu.Unlock()
}

func (r *recorder) cleanup() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}
