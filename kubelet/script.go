package kubelet

import (
	"math"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// script is what one run of a simulated container does, read from its
// command and args: the lines it prints and when, and whether and when it
// exits by itself. A command minictl does not simulate runs until it is
// stopped, as a server does.
type script struct {
	// lines are what the run prints, in order, each at its time since
	// the start.
	lines []scriptLine
	// ends says whether the run exits by itself: after exitAfter, with
	// exitCode. A run that does not ends only when stopped; exitAfter is
	// then when it blocks for good.
	ends      bool
	exitAfter time.Duration
	exitCode  int32
	// sleepsForever says that a run that does not end sleeps forever (a
	// simulated command), rather than running a command minictl does
	// not simulate.
	sleepsForever bool
}

type scriptLine struct {
	at   time.Duration
	text string
}

// Bounds on what a script may be, so that any command is read in bounded
// time and memory.
const (
	maxScriptBytes    = 64 << 10
	maxScriptCommands = 10000
	maxScriptLines    = 1000
	// maxSleep is the longest sleep counted; a longer one (or infinity)
	// sleeps forever.
	maxSleep = 100 * 365 * 24 * time.Hour
)

// shells are the programs whose -c argument is read as a script.
var shells = map[string]bool{"sh": true, "/bin/sh": true, "bash": true, "/bin/bash": true, "/usr/bin/sh": true, "/usr/bin/bash": true}

// containerScript reads c's command and args, as pod runs it: the words
// of both, or the args alone when c has no command, as for an image with
// no entrypoint (with neither, the image's own command is not known: it
// runs until stopped). $(VAR) in them expands as the kubelet expands it;
// `sh -c "<script>"` (or bash) runs the script, where $VAR and ${VAR}
// expand as a shell does; other words run as one simple command. The
// variables are c's environment (containerEnv).
func containerScript(pod *corev1.Pod, c *corev1.Container) script {
	words := append(append([]string(nil), c.Command...), c.Args...)
	if len(words) == 0 {
		return script{}
	}
	env := containerEnv(pod, c)
	for i, w := range words {
		words[i] = expandRefs(w, env)
	}
	if shells[words[0]] {
		if len(words) < 3 || !isCFlag(words[1]) {
			return script{} // reads stdin or a file: not simulated
		}
		return parseScript(words[2], env)
	}
	var s script
	var r runner
	if r.run(&s, words) {
		s.ends, s.exitAfter, s.exitCode = true, r.elapsed, r.status
	} else if !s.ends {
		s.exitAfter = r.elapsed
	}
	return s
}

// containerEnv is c's environment as the kubelet sets it: each variable's
// value, its $(VAR) references to the variables before it expanded, or,
// from valueFrom, the pod's own fields the downward API gives
// (metadata.name, namespace, uid, labels['k'], annotations['k'],
// spec.nodeName, spec.serviceAccountName, status.hostIP, status.podIP).
// Values from ConfigMaps, Secrets and resources are not read: those
// variables stay unset.
func containerEnv(pod *corev1.Pod, c *corev1.Container) map[string]string {
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = expandRefs(e.Value, env)
		case e.ValueFrom.FieldRef != nil:
			if v, ok := podField(pod, e.ValueFrom.FieldRef.FieldPath); ok {
				env[e.Name] = v
			}
		}
	}
	return env
}

// podField is the value of one downward API field path of pod.
func podField(pod *corev1.Pod, path string) (string, bool) {
	if key, ok := subscript(path, "metadata.labels"); ok {
		v, ok := pod.Labels[key]
		return v, ok
	}
	if key, ok := subscript(path, "metadata.annotations"); ok {
		v, ok := pod.Annotations[key]
		return v, ok
	}
	switch path {
	case "metadata.name":
		return pod.Name, true
	case "metadata.namespace":
		return pod.Namespace, true
	case "metadata.uid":
		return string(pod.UID), true
	case "spec.nodeName":
		return pod.Spec.NodeName, true
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, true
	case "status.hostIP":
		return pod.Status.HostIP, true
	case "status.podIP":
		return pod.Status.PodIP, true
	}
	return "", false
}

// subscript reads path as prefix['key'].
func subscript(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"['")
	if !ok || !strings.HasSuffix(rest, "']") {
		return "", false
	}
	return strings.TrimSuffix(rest, "']"), true
}

// expandRefs expands $(VAR) in s as the kubelet does in a container's
// command, args and env values: a defined VAR is replaced by its value,
// an undefined one is left as written, and $$ is a literal $.
func expandRefs(s string, env map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch next := s[i+1]; {
		case next == '$':
			b.WriteByte('$')
			i++
		case next == '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := env[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// isCFlag reports whether a shell's first argument is -c, alone or with
// other one-letter options (-ec, -xc).
func isCFlag(arg string) bool {
	if len(arg) < 2 || arg[0] != '-' || arg[1] == '-' {
		return false
	}
	return strings.HasSuffix(arg, "c") && strings.Trim(arg[1:], "abcefhmnuvxCEHT") == ""
}

// parseScript reads text as a small shell script: simple commands joined
// by ;, newlines, && and ||, with quotes, backslashes, # comments and
// $VAR expansion. Any other shell syntax (pipes, redirections,
// subshells, background jobs) makes the script unknown: it runs until
// stopped.
func parseScript(text string, env map[string]string) script {
	if len(text) > maxScriptBytes {
		return script{}
	}
	cmds, ok := tokenize(text, env)
	if !ok || len(cmds) > maxScriptCommands {
		return script{}
	}
	var s script
	var r runner
	for _, c := range cmds {
		if (c.op == "&&" && r.status != 0) || (c.op == "||" && r.status == 0) {
			continue
		}
		if !r.run(&s, c.words) {
			if !s.ends {
				s.exitAfter = r.elapsed // where it blocks
			}
			return s
		}
	}
	s.ends, s.exitAfter, s.exitCode = true, r.elapsed, r.status
	return s
}

// runner is the state of a script being run: the time it has slept and
// the status of its last command.
type runner struct {
	elapsed time.Duration
	status  int32
}

// run runs one simple command, adding to s what it prints, and reports
// whether the script goes on. A command not known blocks forever; exit
// ends the script.
func (r *runner) run(s *script, words []string) bool {
	if len(words) == 0 {
		return true
	}
	args := words[1:]
	switch words[0] {
	case "true", ":":
		r.status = 0
	case "false":
		r.status = 1
	case "echo":
		if len(args) > 0 && args[0] == "-n" {
			args = args[1:]
		}
		r.print(s, strings.Join(args, " "))
		r.status = 0
	case "sleep":
		d, ok := sleepDuration(args)
		if !ok {
			r.print(s, "sleep: invalid time interval")
			r.status = 1
			break
		}
		if d >= maxSleep-r.elapsed {
			s.sleepsForever = true
			return false
		}
		r.elapsed += d
		r.status = 0
	case "exit":
		if len(args) > 0 {
			n, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil {
				n = 2 // sh: exit: Illegal number
			}
			r.status = int32(uint8(n))
		}
		s.ends, s.exitAfter, s.exitCode = true, r.elapsed, r.status
		return false
	default:
		return false // not simulated: runs until stopped
	}
	return true
}

func (r *runner) print(s *script, text string) {
	if len(s.lines) < maxScriptLines {
		s.lines = append(s.lines, scriptLine{at: r.elapsed, text: text})
	}
}

// sleepDuration is what `sleep args` sleeps: the sum of its arguments,
// seconds with decimals and an optional s, m, h or d suffix, as GNU sleep
// reads them; infinity or more than maxSleep is maxSleep.
func sleepDuration(args []string) (time.Duration, bool) {
	if len(args) == 0 {
		return 0, false
	}
	total := 0.0
	for _, a := range args {
		unit := 1.0
		switch {
		case a == "infinity" || a == "inf":
			return maxSleep, true
		case strings.HasSuffix(a, "s"):
			a = a[:len(a)-1]
		case strings.HasSuffix(a, "m"):
			a, unit = a[:len(a)-1], 60
		case strings.HasSuffix(a, "h"):
			a, unit = a[:len(a)-1], 3600
		case strings.HasSuffix(a, "d"):
			a, unit = a[:len(a)-1], 86400
		}
		f, err := strconv.ParseFloat(a, 64)
		if err != nil || f < 0 || math.IsNaN(f) || strings.ContainsAny(a, "xXpPnN_") {
			return 0, false
		}
		total += f * unit
	}
	if total >= maxSleep.Seconds() {
		return maxSleep, true
	}
	return time.Duration(total * float64(time.Second)), true
}

// command is one simple command of a script and the operator before it
// ("" at the start or after ;).
type command struct {
	op    string
	words []string
}

// tokenize splits text into commands. It reports false for shell syntax
// it does not read.
func tokenize(text string, env map[string]string) ([]command, bool) {
	var cmds []command
	cur := command{}
	var word strings.Builder
	inWord := false
	endWord := func() {
		if inWord {
			cur.words = append(cur.words, word.String())
			word.Reset()
			inWord = false
		}
	}
	endCommand := func(nextOp string) bool {
		endWord()
		if len(cur.words) == 0 {
			// `a && ; b` and a leading && are syntax errors; empty
			// commands between semicolons and newlines are not.
			if cur.op == "&&" || cur.op == "||" || nextOp != "" {
				return false
			}
			cur = command{op: cur.op}
			return true
		}
		cmds = append(cmds, cur)
		cur = command{op: nextOp}
		return true
	}
	for i := 0; i < len(text); i++ {
		ch := text[i]
		switch {
		case ch == ' ' || ch == '\t':
			endWord()
		case ch == '\n' || ch == ';':
			if cur.op != "" && len(cur.words) == 0 && !inWord && ch == '\n' {
				continue // a line may end after && or ||
			}
			if !endCommand("") {
				return nil, false
			}
		case ch == '&' || ch == '|':
			if i+1 >= len(text) || text[i+1] != ch {
				return nil, false // background job or pipe
			}
			i++
			if !endCommand(string([]byte{ch, ch})) {
				return nil, false
			}
		case ch == '#' && !inWord:
			for i < len(text) && text[i] != '\n' {
				i++
			}
			i-- // the newline ends the command
		case ch == '\'':
			end := strings.IndexByte(text[i+1:], '\'')
			if end < 0 {
				return nil, false
			}
			word.WriteString(text[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case ch == '"':
			j, ok := doubleQuoted(text, i+1, env, &word)
			if !ok {
				return nil, false
			}
			i = j
			inWord = true
		case ch == '\\':
			if i+1 < len(text) {
				i++
				if text[i] != '\n' {
					word.WriteByte(text[i])
					inWord = true
				}
			}
		case ch == '$':
			j, ok := expand(text, i, env, &word)
			if !ok {
				return nil, false
			}
			i = j
			inWord = true
		case strings.IndexByte("<>()`{}", ch) >= 0 && !inWord:
			return nil, false
		case strings.IndexByte("<>()`", ch) >= 0:
			return nil, false
		default:
			word.WriteByte(ch)
			inWord = true
		}
	}
	if !endCommand("") {
		return nil, false
	}
	return cmds, true
}

// doubleQuoted reads a "..." string starting after its opening quote at
// i into word, expanding variables, and returns the index of its closing
// quote.
func doubleQuoted(text string, i int, env map[string]string, word *strings.Builder) (int, bool) {
	for ; i < len(text); i++ {
		switch ch := text[i]; ch {
		case '"':
			return i, true
		case '\\':
			if i+1 < len(text) && strings.IndexByte("$`\"\\\n", text[i+1]) >= 0 {
				i++
				if text[i] != '\n' {
					word.WriteByte(text[i])
				}
				continue
			}
			word.WriteByte(ch)
		case '`':
			return 0, false
		case '$':
			j, ok := expand(text, i, env, word)
			if !ok {
				return 0, false
			}
			i = j
		default:
			word.WriteByte(ch)
		}
	}
	return 0, false // unterminated
}

// expand reads the variable reference at text[i] ('$') into word and
// returns the index of its last byte. $NAME and ${NAME} are read; $( and
// other parameter forms are not; a $ before anything else is itself.
func expand(text string, i int, env map[string]string, word *strings.Builder) (int, bool) {
	rest := text[i+1:]
	switch {
	case strings.HasPrefix(rest, "{"):
		end := strings.IndexByte(rest, '}')
		if end < 0 || !isName(rest[1:end]) {
			return 0, false
		}
		word.WriteString(env[rest[1:end]])
		return i + 1 + end, true
	case strings.HasPrefix(rest, "("):
		return 0, false
	}
	n := 0
	for n < len(rest) && (rest[n] == '_' || isAlpha(rest[n]) || (n > 0 && isDigit(rest[n]))) {
		n++
	}
	if n == 0 {
		word.WriteByte('$')
		return i, true
	}
	word.WriteString(env[rest[:n]])
	return i + n, true
}

func isName(s string) bool {
	if s == "" || isDigit(s[0]) {
		return false
	}
	for i := range len(s) {
		if s[i] != '_' && !isAlpha(s[i]) && !isDigit(s[i]) {
			return false
		}
	}
	return true
}

func isAlpha(b byte) bool { return (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') }
func isDigit(b byte) bool { return b >= '0' && b <= '9' }
