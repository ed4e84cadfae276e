package sim

import (
	"net/http"
	"os"
	"strings"
	"testing"
)

// TestReadmeCurls runs, in order, every curl of the README's section on
// the simulated cloud against a cloud holding the two nodes' machines up
// would have made, and expects each to succeed: the README cannot drift
// from the API it teaches.
func TestReadmeCurls(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	section, ok := between(string(b), "## The simulated cloud\n", "\n## ")
	if !ok {
		t.Fatal("README has no section \"The simulated cloud\"")
	}
	_, cl := start(t, Options{})
	mustCreate(t, cl, InstanceSpec{Name: "node-1"})
	mustCreate(t, cl, InstanceSpec{Name: "node-2"})

	var n int
	for _, block := range strings.Split(section, "```sh\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		for _, args := range shellWords(block) {
			if len(args) == 0 || args[0] != "curl" {
				continue
			}
			method, path, body := curlRequest(t, args)
			code, out := call(t, cl, method, path, body)
			if code < 200 || code > 299 {
				t.Errorf("%s: %d %s", strings.Join(args, " "), code, out)
			}
			n++
		}
	}
	if n < 15 {
		t.Fatalf("only %d curls found in the README's cloud section", n)
	}
}

func between(s, from, to string) (string, bool) {
	i := strings.Index(s, from)
	if i < 0 {
		return "", false
	}
	s = s[i+len(from):]
	if j := strings.Index(s, to); j >= 0 {
		s = s[:j]
	}
	return s, true
}

// shellWords splits a script into commands of words: single quotes
// (which may span lines), comments from # to the end of the line, and
// nothing else of the shell; an assignment line (CLOUD=...) is a command
// of its own.
func shellWords(script string) [][]string {
	var (
		cmds  [][]string
		words []string
		word  strings.Builder
		inW   bool
	)
	endWord := func() {
		if inW {
			words = append(words, word.String())
			word.Reset()
			inW = false
		}
	}
	for i := 0; i < len(script); i++ {
		switch ch := script[i]; {
		case ch == '\'':
			j := strings.IndexByte(script[i+1:], '\'')
			if j < 0 {
				j = len(script) - i - 1
			}
			word.WriteString(script[i+1 : i+1+j])
			inW = true
			i += j + 1
		case ch == '#' && !inW:
			for i < len(script) && script[i] != '\n' {
				i++
			}
			i--
		case ch == '\n':
			endWord()
			if len(words) > 0 {
				cmds = append(cmds, words)
				words = nil
			}
		case ch == ' ' || ch == '\t':
			endWord()
		default:
			word.WriteByte(ch)
			inW = true
		}
	}
	endWord()
	if len(words) > 0 {
		cmds = append(cmds, words)
	}
	return cmds
}

// curlRequest reads the method, the path after $CLOUD and the body of a
// README curl.
func curlRequest(t *testing.T, args []string) (method, path, body string) {
	method = http.MethodGet
	for i := 1; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-X" && i+1 < len(args):
			method = args[i+1]
			i++
		case a == "-d" && i+1 < len(args):
			body = args[i+1]
			if method == http.MethodGet {
				method = http.MethodPost
			}
			i++
		case strings.HasPrefix(a, "$CLOUD"):
			path = strings.TrimPrefix(a, "$CLOUD")
		case a == "-s":
		default:
			t.Fatalf("README curl %q: cannot read %q", strings.Join(args, " "), a)
		}
	}
	if path == "" {
		t.Fatalf("README curl %q has no $CLOUD URL", strings.Join(args, " "))
	}
	return method, path, body
}
