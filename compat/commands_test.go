package compat

import (
	"strings"
	"testing"
	"time"
)

// TestKubectlContainerCommands: pods made by kubectl run with a command
// show in kubectl get pods as they would in a real cluster: Completed,
// Error, CrashLoopBackOff with restarts, Init:0/1 while an init container
// sleeps.
func TestKubectlContainerCommands(t *testing.T) {
	const ns = "compat-commands"
	kubectl(t, "create", "namespace", ns)
	t.Cleanup(func() { kubectlRun(t, "", nil, "delete", "namespace", ns, "--wait=false") })

	kubectl(t, "run", "done", "-n", ns, "--image=busybox", "--restart=Never", "--", "sh", "-c", "sleep 1; exit 0")
	kubectl(t, "run", "fails", "-n", ns, "--image=busybox", "--restart=Never", "--", "sh", "-c", "exit 3")
	kubectl(t, "run", "crash", "-n", ns, "--image=busybox", "--", "sh", "-c", "echo starting; exit 1")
	kubectlIn(t, `apiVersion: v1
kind: Pod
metadata: {name: waits, namespace: `+ns+`}
spec:
  initContainers: [{name: wait, image: busybox, command: [sh, -c, "sleep infinity"]}]
  containers: [{name: app, image: nginx}]
`, "create", "-f", "-")

	want := map[string]string{"done": "0/1 Completed", "fails": "0/1 Error", "crash": "0/1 CrashLoopBackOff", "waits": "0/1 Init:0/1"}
	eventually(t, 60*time.Second, "each pod's STATUS", func() (bool, string) {
		tb := parseTable(t, kubectl(t, "get", "pods", "-n", ns))
		var got []string
		ok := true
		for name, status := range want {
			row := tb.find(t, "NAME", name)
			cell := tb.col(t, row, "READY") + " " + tb.col(t, row, "STATUS")
			got = append(got, name+": "+cell+" restarts "+tb.col(t, row, "RESTARTS"))
			if cell != status || (name == "crash") != !strings.HasPrefix(tb.col(t, row, "RESTARTS"), "0") {
				ok = false
			}
		}
		return ok, strings.Join(got, "; ")
	})
	if out := kubectl(t, "describe", "pod", "crash", "-n", ns); !strings.Contains(out, "Back-off restarting failed container crash") {
		t.Errorf("describe pod crash has no BackOff event:\n%s", out)
	}
}
