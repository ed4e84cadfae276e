package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/minictl/minictl/client"
)

// sourcedCRD is a CRD and where it came from, for messages.
type sourcedCRD struct {
	crd  *apiextensionsv1.CustomResourceDefinition
	from string
}

// installCRDs creates every CRD the options name and waits until each is
// Established: served, so that the test may create its objects at once.
func (e *Env) installCRDs(ctx context.Context, rc *client.RESTClient) {
	e.t.Helper()
	crds, err := readCRDPaths(e.cfg.crdPaths, e.cfg.errorIfCRDPathMissing)
	if err != nil {
		e.t.Fatalf("testenv: %v", err)
	}
	for _, c := range e.cfg.crds {
		crds = append(crds, sourcedCRD{crd: c.DeepCopy(), from: "the CRDs option"})
	}
	crdClient := client.For[*apiextensionsv1.CustomResourceDefinition](rc)
	for _, c := range crds {
		c.crd.ResourceVersion = ""
		if _, err := crdClient.Create(ctx, c.crd); err != nil {
			e.t.Fatalf("testenv: install CRD %q (from %s): %v", c.crd.Name, c.from, err)
		}
	}
	for _, c := range crds {
		if err := waitEstablished(ctx, crdClient, c.crd.Name); err != nil {
			e.t.Fatalf("testenv: CRD %q (from %s): %v", c.crd.Name, c.from, err)
		}
	}
}

// waitEstablished polls the CRD until its Established condition is True.
func waitEstablished(ctx context.Context, crds *client.Client[*apiextensionsv1.CustomResourceDefinition], name string) error {
	var last string
	for {
		crd, err := crds.Get(ctx, "", name)
		if err != nil && ctx.Err() == nil {
			return err
		}
		if err == nil {
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return nil
				}
				if c.Type == apiextensionsv1.NamesAccepted && c.Status == apiextensionsv1.ConditionFalse {
					return fmt.Errorf("names not accepted: %s", c.Message)
				}
			}
			last = conditionsString(crd.Status.Conditions)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not Established after %s (conditions: %s)", readyTimeout, last)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func conditionsString(cs []apiextensionsv1.CustomResourceDefinitionCondition) string {
	if len(cs) == 0 {
		return "none"
	}
	var parts []string
	for _, c := range cs {
		parts = append(parts, fmt.Sprintf("%s=%s %s", c.Type, c.Status, c.Message))
	}
	return strings.Join(parts, "; ")
}

// crdExtensions are the files a CRD path's directory is read for, as
// envtest reads them.
var crdExtensions = []string{".json", ".yaml", ".yml"}

// readCRDPaths reads the CRDs of each path: a file, or the files of a
// directory (not its subdirectories). A path that does not exist is
// skipped, or an error when mustExist; so is one that holds no CRD.
func readCRDPaths(paths []string, mustExist bool) ([]sourcedCRD, error) {
	var out []sourcedCRD
	for _, p := range paths {
		files, err := crdFiles(p)
		if errors.Is(err, fs.ErrNotExist) {
			if mustExist {
				return nil, fmt.Errorf("CRD path %q does not exist (ErrorIfCRDPathMissing is set)", p)
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("CRD path %q: %w", p, err)
		}
		n := len(out)
		for _, f := range files {
			crds, err := readCRDFile(f)
			if err != nil {
				return nil, err
			}
			out = append(out, crds...)
		}
		if mustExist && len(out) == n {
			return nil, fmt.Errorf("CRD path %q holds no CustomResourceDefinition (ErrorIfCRDPathMissing is set)", p)
		}
	}
	return out, nil
}

func crdFiles(path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, en := range entries {
		if !en.IsDir() && slices.Contains(crdExtensions, filepath.Ext(en.Name())) {
			files = append(files, filepath.Join(path, en.Name()))
		}
	}
	return files, nil
}

// documentSeparator splits a YAML stream into its documents.
var documentSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// readCRDFile reads every CustomResourceDefinition in file; documents of
// other kinds are skipped, one that is not YAML or JSON is an error
// naming the file.
func readCRDFile(file string) ([]sourcedCRD, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var out []sourcedCRD
	for i, doc := range documentSeparator.Split(string(data), -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		j, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", file, i+1, err)
		}
		if bytes.Equal(bytes.TrimSpace(j), []byte("null")) {
			continue // only comments
		}
		var tm metav1.TypeMeta
		if err := json.Unmarshal(j, &tm); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", file, i+1, err)
		}
		if tm.Kind != "CustomResourceDefinition" {
			continue
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := json.Unmarshal(j, crd); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", file, i+1, err)
		}
		out = append(out, sourcedCRD{crd: crd, from: file})
	}
	return out, nil
}
