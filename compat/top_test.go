package compat

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestKubectlTop: kubectl top finds the resource metrics API and prints
// what the simulated containers use: a pod annotated 350m and 200Mi shows
// 350m and 200Mi, a two-container pod its annotation shared by its
// containers, a new annotation once the metrics catch up; kubectl top
// node shows every node with its share of its allocatable.
func TestKubectlTop(t *testing.T) {
	const ns = "compat-top"
	kubectl(t, "create", "namespace", ns)
	t.Cleanup(func() { kubectlRun(t, "", nil, "delete", "namespace", ns, "--wait=false") })
	kubectlIn(t, `apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: `+ns+`
  labels: {app: web}
  annotations: {sim.minictl.io/cpu-usage: 350m, sim.minictl.io/memory-usage: 200Mi}
spec:
  containers: [{name: web, image: nginx, resources: {requests: {cpu: 500m, memory: 256Mi}}}]
---
apiVersion: v1
kind: Pod
metadata:
  name: pair
  namespace: `+ns+`
  labels: {app: pair}
  annotations: {sim.minictl.io/cpu-usage: 600m, sim.minictl.io/memory-usage: 64Mi}
spec:
  containers: [{name: a, image: nginx}, {name: b, image: nginx}]
`, "create", "-f", "-")

	top := func(args ...string) (table, string) {
		r := kubectlRun(t, "", nil, append([]string{"top"}, args...)...)
		if r.err != nil {
			return table{}, r.stderr
		}
		return parseTable(t, r.stdout), r.stdout
	}
	podsShow := func(want map[string]string, args ...string) {
		t.Helper()
		eventually(t, 60*time.Second, fmt.Sprintf("kubectl top pod %s shows %v", strings.Join(args, " "), want), func() (bool, string) {
			tb, out := top(append([]string{"pod", "-n", ns}, args...)...)
			if tb.header == nil {
				return false, out
			}
			wantHeader(t, tb, "NAME", "CPU(cores)", "MEMORY(bytes)")
			got := map[string]string{}
			for _, r := range tb.rows {
				got[tb.col(t, r, "NAME")] = tb.col(t, r, "CPU(cores)") + " " + tb.col(t, r, "MEMORY(bytes)")
			}
			return fmt.Sprint(got) == fmt.Sprint(want), out
		})
	}
	podsShow(map[string]string{"web": "350m 200Mi", "pair": "600m 64Mi"})
	podsShow(map[string]string{"web": "350m 200Mi"}, "-l", "app=web")

	tb, out := top("pod", "pair", "-n", ns, "--containers")
	wantHeader(t, tb, "POD", "NAME", "CPU(cores)", "MEMORY(bytes)")
	if len(tb.rows) != 2 || strings.Join(tb.rows[0], " ") != "pair a 300m 32Mi" || strings.Join(tb.rows[1], " ") != "pair b 300m 32Mi" {
		t.Errorf("kubectl top pod pair --containers:\n%s", out)
	}

	// One patch pushes the load up.
	kubectl(t, "annotate", "pod", "web", "-n", ns, "--overwrite", "sim.minictl.io/cpu-usage=900m")
	podsShow(map[string]string{"web": "900m 200Mi"}, "-l", "app=web")

	node := kubectl(t, "get", "pod", "web", "-n", ns, "-o", "jsonpath={.spec.nodeName}")
	eventually(t, 60*time.Second, "kubectl top node shows the three nodes", func() (bool, string) {
		tb, out := top("node")
		if tb.header == nil || len(tb.rows) != 3 {
			return false, out
		}
		wantHeader(t, tb, "NAME", "CPU(cores)", "CPU(%)", "MEMORY(bytes)", "MEMORY(%)")
		for _, r := range tb.rows {
			name := tb.col(t, r, "NAME")
			cpu := number(tb.col(t, r, "CPU(cores)"), "m")
			mem := number(tb.col(t, r, "MEMORY(bytes)"), "Mi")
			// Every node uses 50m and 200Mi of its own; out of 4 cpus and
			// 8Gi, kubectl prints the share in whole percents.
			if cpu < 50 || mem < 200 || number(tb.col(t, r, "CPU(%)"), "%") != cpu*100/4000 || number(tb.col(t, r, "MEMORY(%)"), "%") != mem*100/8192 {
				t.Fatalf("node %s: %v\n%s", name, r, out)
			}
			if name == node && cpu < 950 {
				return false, out // web's 900m is not in yet
			}
		}
		return true, out
	})
}

// number reads a cell such as "350m" without its unit; -1 if it is not one.
func number(cell, unit string) int64 {
	n, err := strconv.ParseInt(strings.TrimSuffix(cell, unit), 10, 64)
	if err != nil || !strings.HasSuffix(cell, unit) {
		return -1
	}
	return n
}
