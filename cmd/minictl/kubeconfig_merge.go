package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// mergedName is the name of the cluster, the user and the context
// `minictl kubeconfig --merge` puts in a kubeconfig.
const mergedName = "minictl"

// mergeTarget is the kubeconfig --merge writes: path when given, else the
// first file of $KUBECONFIG, else ~/.kube/config, as kubectl config
// commands choose.
func mergeTarget(path string) (string, error) {
	if path != "" {
		return path, nil
	}
	for _, p := range filepath.SplitList(os.Getenv("KUBECONFIG")) {
		if p != "" {
			return p, nil
		}
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no home directory for ~/.kube/config: give --kubeconfig: %w", err)
	}
	return filepath.Join(home, ".kube", "config"), nil
}

// mergeKubeconfigFile merges kc's cluster and user into the kubeconfig at
// path as "minictl", with a context of that name made current, and writes
// it in one step; the file's other bytes stay as they were.
func mergeKubeconfigFile(path, kc string) error {
	old, err := os.ReadFile(path)
	perm := fs.FileMode(0o600)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return err
		}
	case err != nil:
		return err
	default:
		if st, err := os.Stat(path); err == nil {
			perm = st.Mode().Perm()
		}
	}
	merged, err := mergeKubeconfig(old, kc)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return writeFileAtomic(path, merged, perm)
}

// mergeKubeconfig is old with kc's first cluster and user added as
// "minictl" (replacing entries of that name), a context "minictl" of
// both, and current-context minictl. It edits old's text rather than
// re-encoding it, so that every other entry, comment and blank line stays
// byte for byte.
func mergeKubeconfig(old []byte, kc string) ([]byte, error) {
	var ours struct {
		Clusters []struct {
			Cluster map[string]any `yaml:"cluster"`
		} `yaml:"clusters"`
		Users []struct {
			User map[string]any `yaml:"user"`
		} `yaml:"users"`
	}
	if err := yaml.Unmarshal([]byte(kc), &ours); err != nil || len(ours.Clusters) == 0 || len(ours.Users) == 0 {
		return nil, fmt.Errorf("minictl's kubeconfig has no cluster or user: %v", err)
	}
	user := ours.Users[0].User
	if user == nil {
		user = map[string]any{}
	}
	items := map[string]map[string]any{
		"clusters": {"name": mergedName, "cluster": ours.Clusters[0].Cluster},
		"users":    {"name": mergedName, "user": user},
		"contexts": {"name": mergedName, "context": map[string]any{"cluster": mergedName, "user": mergedName}},
	}
	if len(bytes.TrimSpace(old)) == 0 {
		old = []byte("apiVersion: v1\nkind: Config\npreferences: {}\n")
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(old, &doc); err != nil {
		return nil, fmt.Errorf("not a kubeconfig: %w", err)
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("not a kubeconfig: its top level is not a mapping")
	}
	root := doc.Content[0]
	lines := strings.SplitAfter(string(old), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if !strings.HasSuffix(lines[len(lines)-1], "\n") {
		lines[len(lines)-1] += "\n"
	}
	var edits []lineEdit
	for _, key := range []string{"clusters", "users", "contexts"} {
		e, err := listEdit(root, lines, key, items[key])
		if err != nil {
			return nil, err
		}
		edits = append(edits, e)
	}
	edits = append(edits, currentContextEdit(root, lines))
	// Later lines first, so that each edit's line numbers still hold
	// (and, at one line, the later edit first, to keep their order).
	slices.Reverse(edits)
	sort.SliceStable(edits, func(i, j int) bool { return edits[i].from > edits[j].from })
	for _, e := range edits {
		rest := append([]string{e.text}, lines[e.to:]...)
		lines = append(lines[:e.from], rest...)
	}
	return []byte(strings.Join(lines, "")), nil
}

// lineEdit replaces lines [from, to) (0-based) with text; from == to
// inserts.
type lineEdit struct {
	from, to int
	text     string
}

// listEdit is the edit that puts item into the list key of root: in place
// of the entry of the same name, else after the last entry, else as a new
// list.
func listEdit(root *yaml.Node, lines []string, key string, item map[string]any) (lineEdit, error) {
	k, v, next := lookup(root, key, len(lines))
	if k == nil {
		return lineEdit{from: len(lines), to: len(lines), text: key + ":\n" + render(item, 0)}, nil
	}
	if v.Kind == yaml.ScalarNode && (v.Tag == "!!null") || (v.Kind == yaml.SequenceNode && len(v.Content) == 0) {
		// "clusters:", "clusters: null" or "clusters: []": the key's
		// line becomes the list.
		if v.Line != k.Line && v.Kind == yaml.SequenceNode {
			return lineEdit{}, fmt.Errorf("%s: write the empty list on the key's line", key)
		}
		return lineEdit{from: k.Line - 1, to: k.Line, text: key + ":\n" + render(item, k.Column-1)}, nil
	}
	if v.Kind != yaml.SequenceNode || v.Style&yaml.FlowStyle != 0 {
		return lineEdit{}, fmt.Errorf("%s is not a list minictl can edit (a block list of entries)", key)
	}
	for i, e := range v.Content {
		if e.Kind != yaml.MappingNode {
			return lineEdit{}, fmt.Errorf("%s: entry %d is not a mapping", key, i)
		}
	}
	indent := max(v.Content[0].Column-3, 0) // the dash is two columns before the entry
	end := func(i int) int {
		if i+1 < len(v.Content) {
			return v.Content[i+1].Line - 1
		}
		return trimTail(lines, v.Content[i].Line, next)
	}
	for i, e := range v.Content {
		if nameOf(e) == mergedName {
			return lineEdit{from: e.Line - 1, to: end(i), text: render(item, indent)}, nil
		}
	}
	last := end(len(v.Content) - 1)
	return lineEdit{from: last, to: last, text: render(item, indent)}, nil
}

// currentContextEdit sets current-context to minictl.
func currentContextEdit(root *yaml.Node, lines []string) lineEdit {
	k, v, _ := lookup(root, "current-context", len(lines))
	text := "current-context: " + mergedName + "\n"
	if k == nil || v.Line != k.Line || v.Kind != yaml.ScalarNode {
		return lineEdit{from: len(lines), to: len(lines), text: text}
	}
	return lineEdit{from: k.Line - 1, to: k.Line, text: strings.Repeat(" ", k.Column-1) + text}
}

// lookup finds key in the mapping root: its key and value nodes, and the
// 0-based line where what follows the value starts (the next key's line,
// or end).
func lookup(root *yaml.Node, key string, end int) (k, v *yaml.Node, next int) {
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == key {
			next = end
			if i+2 < len(root.Content) {
				next = root.Content[i+2].Line - 1
			}
			return root.Content[i], root.Content[i+1], next
		}
	}
	return nil, nil, end
}

// trimTail is the end of an entry that starts on (1-based) line start and
// runs at most to next: before the blank lines and top-level comments
// that precede what follows it.
func trimTail(lines []string, start, next int) int {
	for next > start {
		l := lines[next-1]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			next--
			continue
		}
		break
	}
	return next
}

func nameOf(m *yaml.Node) string {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == "name" {
			return m.Content[i+1].Value
		}
	}
	return ""
}

// render is item as a block list entry ("- cluster: ..."), indented.
func render(item map[string]any, indent int) string {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	_ = enc.Encode([]any{item})
	_ = enc.Close()
	pad := strings.Repeat(" ", indent)
	var out strings.Builder
	for _, l := range strings.SplitAfter(b.String(), "\n") {
		if l != "" {
			out.WriteString(pad + l)
		}
	}
	return out.String()
}
