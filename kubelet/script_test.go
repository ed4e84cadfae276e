package kubelet

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// story writes a script as what a user would see: each printed line at
// its time, then how it ends.
func (s script) story() string {
	var b strings.Builder
	for _, l := range s.lines {
		fmt.Fprintf(&b, "%s %q; ", l.at, l.text)
	}
	switch {
	case s.ends:
		fmt.Fprintf(&b, "exit %d at %s", s.exitCode, s.exitAfter)
	case s.sleepsForever:
		fmt.Fprintf(&b, "sleeps forever from %s", s.exitAfter)
	default:
		b.WriteString("runs until stopped")
	}
	return b.String()
}

func TestContainerScript(t *testing.T) {
	sh := func(script string) []string { return []string{"sh", "-c", script} }
	env := []corev1.EnvVar{{Name: "NAME", Value: "world"}, {Name: "N", Value: "7"},
		{Name: "GREETING", Value: "hi $(NAME)"},
		{Name: "INDEX", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}},
		{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "SECRET", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "k"}}},
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "work-2", Annotations: map[string]string{"batch.kubernetes.io/job-completion-index": "2"}}}
	for _, tt := range []struct {
		command, args []string
		want          string
	}{
		// What is not simulated runs until stopped.
		{nil, nil, "runs until stopped"},
		{nil, []string{"sleep", "1"}, "exit 0 at 1s"}, // args alone, as with no entrypoint
		{nil, []string{"sh", "-c", "exit 2"}, "exit 2 at 0s"},
		{[]string{"nginx", "-g", "daemon off;"}, nil, "runs until stopped"},
		{[]string{"sh"}, nil, "runs until stopped"},
		{sh("cat /etc/hosts | grep x"), nil, "runs until stopped"},
		{sh("sleep 5 &"), nil, "runs until stopped"},
		{sh("echo $(date)"), nil, "runs until stopped"},
		{sh("echo 'open"), nil, "runs until stopped"},
		{sh("&& true"), nil, "runs until stopped"},
		{sh("echo start; nginx; exit 1"), nil, `0s "start"; runs until stopped`},

		// The words directly, or sh -c, bash -c, with args.
		{[]string{"sleep", "1.5"}, nil, "exit 0 at 1.5s"},
		{[]string{"sleep"}, []string{"2"}, "exit 0 at 2s"},
		{[]string{"/bin/sh", "-c"}, []string{"exit 3"}, "exit 3 at 0s"},
		{[]string{"bash", "-ec", "true"}, nil, "exit 0 at 0s"},
		{[]string{"false"}, nil, "exit 1 at 0s"},
		{sh("sleep 1; exit 0"), nil, "exit 0 at 1s"},
		{sh("sleep 1m 30"), nil, "exit 0 at 1m30s"},
		{sh("sleep infinity"), nil, "sleeps forever from 0s"},
		{sh("echo up; sleep 3600d; sleep 100000d"), nil, `0s "up"; sleeps forever from 86400h0m0s`},
		{sh("sleep x"), nil, `0s "sleep: invalid time interval"; exit 1 at 0s`},
		{sh("exit 256"), nil, "exit 0 at 0s"},
		{sh("exit -1"), nil, "exit 255 at 0s"},
		{sh("false; exit"), nil, "exit 1 at 0s"},

		// Sequences, && and ||, comments and line breaks.
		{sh("false && echo no; echo yes"), nil, `0s "yes"; exit 0 at 0s`},
		{sh("false || echo recovered && exit 4"), nil, `0s "recovered"; exit 4 at 0s`},
		{sh("true || echo no"), nil, "exit 0 at 0s"},
		{sh("echo a\nsleep 2 # wait\n\necho b &&\n  exit 5"), nil, `0s "a"; 2s "b"; exit 5 at 2s`},
		{sh("sleep 1; false"), nil, "exit 1 at 1s"},

		// Quotes and variables.
		{sh(`echo "hello, $NAME" '$NAME' ${N}x \$N $`), nil, `0s "hello, world $NAME 7x $N $"; exit 0 at 0s`},
		{sh(`echo -n "a  b"   c`), nil, `0s "a  b c"; exit 0 at 0s`},
		{sh(`echo $MISSING.`), nil, `0s "."; exit 0 at 0s`},

		// The environment as the kubelet sets it: $(VAR) in values, command
		// and args; the downward API's fields; what it does not read unset.
		{sh(`echo "$POD is index $INDEX: $GREETING"`), nil, `0s "work-2 is index 2: hi world"; exit 0 at 0s`},
		{[]string{"echo", "$(NAME)", "$(NOPE)", "$$(NAME)", "[$SECRET]"}, nil, `0s "world $(NOPE) $(NAME) [$SECRET]"; exit 0 at 0s`},
		{[]string{"sh", "-c"}, []string{"echo [$SECRET]; exit $(N)"}, `0s "[]"; exit 7 at 0s`},
	} {
		c := &corev1.Container{Name: "app", Image: "busybox", Command: tt.command, Args: tt.args, Env: env}
		if got := containerScript(pod, c).story(); got != tt.want {
			t.Errorf("%q %q:\n got %s\nwant %s", tt.command, tt.args, got, tt.want)
		}
	}
}

func TestScriptBounds(t *testing.T) {
	long := strings.Repeat("echo x; ", maxScriptLines+10) + "exit 2"
	s := parseScript(long, nil)
	if !s.ends || s.exitCode != 2 || len(s.lines) != maxScriptLines {
		t.Errorf("a long script: ends %v, code %d, %d lines", s.ends, s.exitCode, len(s.lines))
	}
	if s := parseScript(strings.Repeat("true;", maxScriptCommands+1), nil); s.ends {
		t.Error("a script of too many commands ends")
	}
	if s := parseScript(strings.Repeat(" ", maxScriptBytes+1)+"exit 1", nil); s.ends {
		t.Error("a script too long ends")
	}
	if s := parseScript("sleep 1e300", nil); s.ends || !s.sleepsForever {
		t.Errorf("sleep 1e300: %s", s.story())
	}
}

func FuzzScript(f *testing.F) {
	for _, seed := range []string{
		"sleep 1; exit 0", "echo \"a $B ${C}\" 'd' && false || exit 3", "sleep 0.5 1m\nsleep infinity",
		"echo \\\n x # y", "${", "$(", "\"\\", "exit 99999999999999999999", "sleep -1", ";;&&||",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		s := parseScript(text, map[string]string{"B": "b", "C": strings.Repeat("c", 100)})
		if len(s.lines) > maxScriptLines {
			t.Fatalf("%d lines", len(s.lines))
		}
		if s.exitAfter < 0 || s.exitAfter > maxSleep {
			t.Fatalf("exit after %s", s.exitAfter)
		}
		var prev time.Duration
		for _, l := range s.lines {
			if l.at < prev || l.at > s.exitAfter && s.ends {
				t.Fatalf("line %q at %s, after %s, run ends at %s", l.text, l.at, prev, s.exitAfter)
			}
			prev = l.at
		}
		if s.ends && s.sleepsForever {
			t.Fatal("ends and sleeps forever")
		}
	})
}
