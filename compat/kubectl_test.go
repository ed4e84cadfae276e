package compat

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestKubectlVersion(t *testing.T) {
	out := kubectl(t, "version")
	if !strings.Contains(out, "Client Version: "+kubectlVersion) {
		t.Errorf("no client version in:\n%s", out)
	}
	if !regexp.MustCompile(`(?m)^Server Version: v1\.36\.\d+`).MatchString(out) {
		t.Errorf("no v1.36 server version in:\n%s", out)
	}
	r := kubectlRun(t, "", nil, "version")
	if strings.Contains(r.stderr, "WARNING") {
		t.Errorf("version skew warning: %s", r.stderr)
	}
}

func TestKubectlAPIResources(t *testing.T) {
	tb := parseTable(t, kubectl(t, "api-resources"))
	wantHeader(t, tb, "NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND")
	for _, want := range [][]string{
		{"pods", "po", "v1", "true", "Pod"},
		{"namespaces", "ns", "v1", "false", "Namespace"},
		{"nodes", "no", "v1", "false", "Node"},
		{"services", "svc", "v1", "true", "Service"},
		{"deployments", "deploy", "apps/v1", "true", "Deployment"},
		{"replicasets", "rs", "apps/v1", "true", "ReplicaSet"},
		{"replicationcontrollers", "rc", "v1", "true", "ReplicationController"},
		{"leases", "", "coordination.k8s.io/v1", "true", "Lease"},
		{"poddisruptionbudgets", "pdb", "policy/v1", "true", "PodDisruptionBudget"},
		{"ingresses", "ing", "networking.k8s.io/v1", "true", "Ingress"},
		{"ingressclasses", "", "networking.k8s.io/v1", "false", "IngressClass"},
		{"networkpolicies", "netpol", "networking.k8s.io/v1", "true", "NetworkPolicy"},
	} {
		got := tb.find(t, "NAME", want[0])
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("api-resources row %q, want %q", got, want)
		}
	}
	// Short names and categories resolve through discovery.
	if out := kubectl(t, "get", "deploy,po,svc,rs", "-n", "kube-system"); out != "" {
		t.Errorf("kube-system is not empty:\n%s", out)
	}
}

func TestKubectlGetNamespaces(t *testing.T) {
	tb := parseTable(t, kubectl(t, "get", "namespaces"))
	wantHeader(t, tb, "NAME", "STATUS", "AGE")
	for _, ns := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		if row := tb.find(t, "NAME", ns); tb.col(t, row, "STATUS") != "Active" {
			t.Errorf("namespace %s: %v", ns, row)
		}
	}
	out := kubectl(t, "get", "ns", "default", "--show-labels")
	if !strings.Contains(out, "kubernetes.io/metadata.name=default") {
		t.Errorf("labels come from the rows' objects:\n%s", out)
	}
}

func TestKubectlGetNodes(t *testing.T) {
	out := kubectl(t, "get", "nodes")
	if strings.TrimSpace(out) == "" {
		t.Fatal("`kubectl get nodes` shows none; minictl up registers 3")
	}
	tb := parseTable(t, out)
	wantHeader(t, tb, "NAME", "STATUS", "ROLES", "AGE", "VERSION")
	for _, row := range tb.rows {
		if tb.col(t, row, "STATUS") != "Ready" || !strings.HasPrefix(tb.col(t, row, "VERSION"), "v1.") {
			t.Errorf("node %v is not Ready with a version", row)
		}
	}
	wide := parseTable(t, kubectl(t, "get", "nodes", "-o", "wide"))
	wantHeader(t, wide, "NAME", "STATUS", "ROLES", "AGE", "VERSION", "INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION", "CONTAINER-RUNTIME")
	for _, row := range wide.rows {
		if ip := wide.col(t, row, "INTERNAL-IP"); ip == "" || ip == "<none>" {
			t.Errorf("node %v has no internal IP", row)
		}
	}
}

// app is a Namespace, a Deployment and a Service in one file, as people
// keep them.
func app(ns, image string) string {
	return strings.NewReplacer("NS", ns, "IMAGE", image).Replace(`apiVersion: v1
kind: Namespace
metadata:
  name: NS
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: NS
  labels: {app: web}
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: IMAGE
        ports:
        - containerPort: 80
        resources:
          requests: {cpu: 100m, memory: 64Mi}
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: NS
spec:
  selector: {app: web}
  ports:
  - port: 80
    targetPort: 80
`)
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func deploymentImages(t *testing.T, ns string) string {
	t.Helper()
	return kubectl(t, "get", "deployment", "web", "-n", ns, "-o", `jsonpath={range .spec.template.spec.containers[*]}{.name}={.image} {end}`)
}

func TestKubectlCreateAndGet(t *testing.T) {
	const ns = "compat-create"
	out := kubectl(t, "create", "-f", writeFile(t, "app.yaml", app(ns, "nginx:1.27")))
	for _, want := range []string{"namespace/" + ns + " created", "deployment.apps/web created", "service/web created"} {
		if !strings.Contains(out, want) {
			t.Errorf("create output lacks %q:\n%s", want, out)
		}
	}
	t.Cleanup(func() { kubectlRun(t, "", nil, "delete", "namespace", ns, "--wait=false") })

	deploys := parseTable(t, kubectl(t, "get", "deployments", "-n", ns))
	wantHeader(t, deploys, "NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE")
	if row := deploys.find(t, "NAME", "web"); !regexp.MustCompile(`^\d/2$`).MatchString(deploys.col(t, row, "READY")) {
		t.Errorf("deployment row %v", row)
	}
	wide := parseTable(t, kubectl(t, "get", "deploy", "-n", ns, "-o", "wide"))
	wantHeader(t, wide, "NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE", "CONTAINERS", "IMAGES", "SELECTOR")
	if row := wide.find(t, "NAME", "web"); wide.col(t, row, "IMAGES") != "nginx:1.27" || wide.col(t, row, "SELECTOR") != "app=web" {
		t.Errorf("wide row %v", row)
	}
	svcs := parseTable(t, kubectl(t, "get", "svc", "-n", ns))
	wantHeader(t, svcs, "NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE")
	if row := svcs.find(t, "NAME", "web"); svcs.col(t, row, "TYPE") != "ClusterIP" || svcs.col(t, row, "PORT(S)") != "80/TCP" {
		t.Errorf("service row %v", row)
	}

	// A second create says the objects exist, as Kubernetes does.
	r := kubectlRun(t, "", nil, "create", "-f", writeFile(t, "again.yaml", app(ns, "nginx:1.27")))
	if r.err == nil || !strings.Contains(r.stderr, `deployments.apps "web" already exists`) {
		t.Errorf("second create: %v\n%s", r.err, r.stderr)
	}

	// `get all` finds every kind in the "all" category.
	all := kubectl(t, "get", "all", "-n", ns)
	for _, want := range []string{"deployment.apps/web", "service/web"} {
		if !strings.Contains(all, want) {
			t.Errorf("get all lacks %s:\n%s", want, all)
		}
	}
	eventually(t, 30*time.Second, "get all shows the replica set and pods", func() (bool, string) {
		all := kubectl(t, "get", "all", "-n", ns)
		return strings.Contains(all, "replicaset.apps/web-") && strings.Contains(all, "pod/web-"), all
	})

	// -o yaml and -o name go through the same API without tables.
	if out := kubectl(t, "get", "deploy", "web", "-n", ns, "-o", "name"); strings.TrimSpace(out) != "deployment.apps/web" {
		t.Errorf("-o name: %q", out)
	}
	if out := kubectl(t, "get", "deploy", "web", "-n", ns, "-o", "yaml"); !strings.Contains(out, "image: nginx:1.27") || !strings.Contains(out, "kind: Deployment") {
		t.Errorf("-o yaml:\n%s", out)
	}
}

func TestKubectlApply(t *testing.T) {
	const ns = "compat-apply"
	out := kubectl(t, "apply", "-f", writeFile(t, "app.yaml", app(ns, "nginx:1.27")))
	for _, want := range []string{"namespace/" + ns + " created", "deployment.apps/web created", "service/web created"} {
		if !strings.Contains(out, want) {
			t.Errorf("apply output lacks %q:\n%s", want, out)
		}
	}
	t.Cleanup(func() { kubectlRun(t, "", nil, "delete", "namespace", ns, "--wait=false") })
	if out := kubectl(t, "apply", "-f", writeFile(t, "same.yaml", app(ns, "nginx:1.27"))); !strings.Contains(out, "deployment.apps/web unchanged") {
		t.Errorf("re-apply of the same file:\n%s", out)
	}

	// Someone else adds a sidecar; the user then applies a new image. The
	// strategic merge patch kubectl computes from minictl's OpenAPI merges
	// containers by name: the image changes and the sidecar stays.
	kubectl(t, "patch", "deployment", "web", "-n", ns, "-p", `{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"busybox:1.36"}]}}}}`)
	if got := deploymentImages(t, ns); got != "sidecar=busybox:1.36 web=nginx:1.27 " {
		t.Fatalf("after the strategic merge patch: %q", got)
	}
	r := kubectlRun(t, "", nil, "apply", "-f", writeFile(t, "new.yaml", app(ns, "nginx:1.28")))
	if r.err != nil || !strings.Contains(r.stdout, "deployment.apps/web configured") {
		t.Fatalf("apply of a new image: %v\n%s\n%s", r.err, r.stdout, r.stderr)
	}
	if strings.Contains(r.stderr, "warning") {
		t.Errorf("apply fell back from the OpenAPI patch: %s", r.stderr)
	}
	if got := deploymentImages(t, ns); got != "sidecar=busybox:1.36 web=nginx:1.28 " {
		t.Errorf("after apply: %q, want the new image and the sidecar kept", got)
	}

	// kubectl edit runs the editor on the object and sends a patch.
	r = kubectlRun(t, "", []string{"KUBE_EDITOR=sed -i -e s/nginx:1.28/nginx:1.29/"}, "edit", "deployment", "web", "-n", ns)
	if r.err != nil || !strings.Contains(r.stdout, "deployment.apps/web edited") {
		t.Errorf("edit: %v\n%s\n%s", r.err, r.stdout, r.stderr)
	}
	if got := deploymentImages(t, ns); got != "sidecar=busybox:1.36 web=nginx:1.29 " {
		t.Errorf("after edit: %q", got)
	}

	// Server-side apply. kubectl's own earlier applies and edits (the
	// last-applied annotation matches them) are taken over without a
	// conflict, as in Kubernetes; replicas another manager changed are a
	// conflict that names the field and the manager, until forced.
	kubectl(t, "patch", "deployment", "web", "-n", ns, "--type=merge", "-p", `{"spec":{"replicas":4}}`, "--field-manager=hpa")
	ssa := writeFile(t, "ssa.yaml", app(ns, "nginx:1.30"))
	r = kubectlRun(t, "", nil, "apply", "--server-side", "-f", ssa)
	if r.err == nil || !strings.Contains(r.stderr, `Apply failed with 1 conflict: conflict with "hpa" using apps/v1: .spec.replicas`) {
		t.Errorf("apply --server-side over hpa's replicas: %v\n%s", r.err, r.stderr)
	}
	r = kubectlRun(t, "", nil, "apply", "--server-side", "--force-conflicts", "-f", ssa)
	if r.err != nil || !strings.Contains(r.stdout, "deployment.apps/web serverside-applied") {
		t.Fatalf("apply --server-side --force-conflicts: %v\n%s\n%s", r.err, r.stdout, r.stderr)
	}
	if got := deploymentImages(t, ns); got != "sidecar=busybox:1.36 web=nginx:1.30 " {
		t.Errorf("after server-side apply: %q, want the new image and the sidecar kept", got)
	}
	if out := kubectl(t, "get", "deploy", "web", "-n", ns, "-o", "yaml", "--show-managed-fields"); !strings.Contains(out, "manager: kubectl\n    operation: Apply") {
		t.Errorf("managedFields lack kubectl's Apply entry:\n%s", out)
	}
	if out := kubectl(t, "apply", "--server-side", "-f", ssa); !strings.Contains(out, "deployment.apps/web serverside-applied") {
		t.Errorf("server-side apply again: %s", out)
	}

	out = kubectl(t, "scale", "deployment", "web", "-n", ns, "--replicas=3")
	if !strings.Contains(out, "deployment.apps/web scaled") {
		t.Errorf("scale: %s", out)
	}
	if got := kubectl(t, "get", "deploy", "web", "-n", ns, "-o", "jsonpath={.spec.replicas}"); got != "3" {
		t.Errorf("replicas %s after scale, want 3", got)
	}
	eventually(t, 60*time.Second, "deployment READY 3/3", func() (bool, string) {
		tb := parseTable(t, kubectl(t, "get", "deploy", "web", "-n", ns))
		return tb.col(t, tb.rows[0], "READY") == "3/3", strings.Join(tb.rows[0], " ")
	})
}

func TestKubectlValidation(t *testing.T) {
	bad := `apiVersion: v1
kind: ConfigMap
metadata:
  name: NAME
  namespace: default
data: {a: b}
bogus: 1
`
	r := kubectlRun(t, strings.Replace(bad, "NAME", "cm-strict", 1), nil, "create", "-f", "-")
	if r.err == nil || !strings.Contains(r.stderr, `strict decoding error: unknown field "bogus"`) {
		t.Errorf("create with an unknown field: %v\n%s", r.err, r.stderr)
	}
	r = kubectlRun(t, strings.Replace(bad, "NAME", "cm-warn", 1), nil, "create", "--validate=warn", "-f", "-")
	if r.err != nil || !strings.Contains(r.stderr, `Warning: unknown field "bogus"`) {
		t.Errorf("--validate=warn: %v\n%s", r.err, r.stderr)
	}
	kubectlIn(t, strings.Replace(bad, "NAME", "cm-off", 1), "create", "--validate=false", "-f", "-")
	kubectl(t, "delete", "configmap", "cm-warn", "cm-off")
}

func TestKubectlExplain(t *testing.T) {
	out := kubectl(t, "explain", "pods")
	for _, want := range []string{"KIND:       Pod", "VERSION:    v1", "FIELDS:", "spec\t<PodSpec>", "collection of containers"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain pods lacks %q:\n%s", want, out)
		}
	}
	out = kubectl(t, "explain", "deployment.spec.replicas")
	if !strings.Contains(out, "FIELD: replicas <integer>") || !strings.Contains(out, "GROUP:      apps") {
		t.Errorf("explain deployment.spec.replicas:\n%s", out)
	}
}

func TestKubectlPodsAndEvents(t *testing.T) {
	const ns = "compat-pods"
	kubectl(t, "create", "namespace", ns)
	t.Cleanup(func() { kubectlRun(t, "", nil, "delete", "namespace", ns, "--wait=false") })

	// A pod no node can take stays Pending and unscheduled; deleting it
	// is immediate.
	kubectlIn(t, `apiVersion: v1
kind: Pod
metadata: {name: stuck, namespace: `+ns+`}
spec:
  nodeSelector: {compat.minictl.io/nowhere: "true"}
  containers: [{name: c, image: busybox}]
`, "create", "-f", "-")
	pods := parseTable(t, kubectl(t, "get", "pods", "-n", ns))
	wantHeader(t, pods, "NAME", "READY", "STATUS", "RESTARTS", "AGE")
	if row := pods.find(t, "NAME", "stuck"); strings.Join(row[1:4], " ") != "0/1 Pending 0" {
		t.Errorf("stuck pod row %v", row)
	}
	wide := parseTable(t, kubectl(t, "get", "pods", "-n", ns, "-o", "wide"))
	wantHeader(t, wide, "NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED NODE", "READINESS GATES")
	if row := wide.find(t, "NAME", "stuck"); wide.col(t, row, "NODE") != "<none>" || wide.col(t, row, "IP") != "<none>" {
		t.Errorf("stuck pod wide row %v", row)
	}
	everywhere := parseTable(t, kubectl(t, "get", "pods", "-A"))
	wantHeader(t, everywhere, "NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE")
	if row := everywhere.find(t, "NAME", "stuck"); everywhere.col(t, row, "NAMESPACE") != ns {
		t.Errorf("get pods -A row %v", row)
	}
	start := time.Now()
	if out := kubectl(t, "delete", "pod", "stuck", "-n", ns); !strings.Contains(out, `pod "stuck" deleted`) {
		t.Errorf("delete: %s", out)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("deleting an unscheduled pod took %v", d)
	}

	out := kubectl(t, "describe", "pod", "-n", ns)
	if strings.TrimSpace(out) != "" && !strings.Contains(out, "No resources found") {
		t.Errorf("pods left after delete:\n%s", out)
	}

	kubectl(t, "run", "solo", "-n", ns, "--image=nginx:1.27")
	eventually(t, 30*time.Second, "pod solo Running", func() (bool, string) {
		tb := parseTable(t, kubectl(t, "get", "pod", "solo", "-n", ns, "-o", "wide"))
		row := tb.rows[0]
		return tb.col(t, row, "STATUS") == "Running" && tb.col(t, row, "READY") == "1/1" && tb.col(t, row, "NODE") != "<none>", strings.Join(row, " ")
	})
	out = kubectl(t, "describe", "pod", "solo", "-n", ns)
	for _, want := range []string{"Name:", "solo", "Status:", "Running", "Containers:", "Events:", "Scheduled"} {
		if !strings.Contains(out, want) {
			t.Errorf("describe pod lacks %q:\n%s", want, out)
		}
	}
	events := parseTable(t, kubectl(t, "get", "events", "-n", ns))
	wantHeader(t, events, "LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE")
	if row := events.find(t, "REASON", "Scheduled"); events.col(t, row, "OBJECT") != "pod/solo" {
		t.Errorf("Scheduled event row %v", row)
	}

	start = time.Now()
	if out := kubectl(t, "delete", "pod", "solo", "-n", ns); !strings.Contains(out, `pod "solo" deleted`) {
		t.Errorf("delete: %s", out)
	}
	if d := time.Since(start); d > 35*time.Second {
		t.Errorf("deleting a running pod took %v", d)
	}
}

func TestKubectlDescribeDeployment(t *testing.T) {
	const ns = "compat-describe"
	kubectl(t, "apply", "-f", writeFile(t, "app.yaml", app(ns, "nginx:1.27")))
	t.Cleanup(func() { kubectlRun(t, "", nil, "delete", "namespace", ns, "--wait=false") })
	out := kubectl(t, "describe", "deployment", "web", "-n", ns)
	for _, want := range []string{"Name:", "web", "Namespace:", ns, "Selector:", "app=web", "Replicas:", "Pod Template:", "nginx:1.27", "Events:"} {
		if !strings.Contains(out, want) {
			t.Errorf("describe deployment lacks %q:\n%s", want, out)
		}
	}
	eventually(t, 30*time.Second, "describe deployment shows the controller's events", func() (bool, string) {
		out := kubectl(t, "describe", "deployment", "web", "-n", ns)
		return strings.Contains(out, "ScalingReplicaSet") && strings.Contains(out, "NewReplicaSet:"), out
	})
}

// TestKubectlWatch runs `kubectl get pods -w` and reads a pod's
// transitions as they come.
func TestKubectlWatch(t *testing.T) {
	const ns = "compat-watch"
	kubectl(t, "create", "namespace", ns)
	t.Cleanup(func() { kubectlRun(t, "", nil, "delete", "namespace", ns, "--wait=false") })

	before := podWatchers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := kubectlCmd(ctx, "get", "pods", "-n", ns, "-w", "--output-watch-events")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncWriter{} // kubectl writes it while the test reads it
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	var seen []string
	// await reads lines until one matches re.
	await := func(what string, re *regexp.Regexp) {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("kubectl get -w ended before %s; saw:\n%s\nstderr: %s", what, strings.Join(seen, "\n"), stderr.String())
				}
				seen = append(seen, l)
				if re.MatchString(l) {
					return
				}
			case <-timeout:
				t.Fatalf("no %s within 30s; saw:\n%s\nstderr: %s", what, strings.Join(seen, "\n"), stderr.String())
			}
		}
	}
	// An empty namespace prints nothing until the first event, so wait
	// until the server counts kubectl's watch before creating the pod.
	eventually(t, 20*time.Second, "kubectl's watch is open", func() (bool, string) {
		n := podWatchers(t)
		return n > before, fmt.Sprintf("%d pod watchers, %d before kubectl", n, before)
	})
	kubectl(t, "run", "w1", "-n", ns, "--image=nginx:1.27", "--restart=Never")
	await("the header", regexp.MustCompile(`^EVENT\s+NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE$`))
	await("ADDED w1 Pending", regexp.MustCompile(`^ADDED\s+w1\s+0/1\s+Pending\s+0\s+\d+s$`))
	await("w1 Running", regexp.MustCompile(`^MODIFIED\s+w1\s+1/1\s+Running\s+0\s+\d+s$`))
	kubectl(t, "delete", "pod", "w1", "-n", ns, "--wait=false")
	await("w1 Terminating", regexp.MustCompile(`^MODIFIED\s+w1\s+\d/1\s+Terminating\s+`))
	await("DELETED w1", regexp.MustCompile(`^DELETED\s+w1\s+`))
	t.Logf("kubectl get pods -w --output-watch-events printed:\n%s", strings.Join(seen, "\n"))
}

// podWatchers reads apiserver_registered_watchers for pods from /metrics.
func podWatchers(t *testing.T) int {
	t.Helper()
	for _, l := range strings.Split(kubectl(t, "get", "--raw", "/metrics"), "\n") {
		if v, ok := strings.CutPrefix(l, `apiserver_registered_watchers{resource="pods"} `); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("metric line %q", l)
			}
			return n
		}
	}
	return 0
}

// TestKubectlReplicationControllerAndExec: kubectl creates, scales, prints
// and deletes a ReplicationController, and `kubectl exec` into one of its
// pods prints the server's answer: the containers are simulated.
func TestKubectlReplicationControllerAndExec(t *testing.T) {
	const ns = "compat-rc"
	kubectl(t, "create", "namespace", ns)
	t.Cleanup(func() { kubectlRun(t, "", nil, "delete", "namespace", ns, "--wait=false") })
	kubectlIn(t, `apiVersion: v1
kind: ReplicationController
metadata: {name: hello, namespace: `+ns+`}
spec:
  replicas: 2
  template:
    metadata: {labels: {app: hello}}
    spec: {containers: [{name: hello, image: nginx:1.27}]}
`, "create", "-f", "-")
	kubectl(t, "scale", "rc", "hello", "-n", ns, "--replicas=3")
	eventually(t, 30*time.Second, "rc hello 3 ready", func() (bool, string) {
		tb := parseTable(t, kubectl(t, "get", "rc", "hello", "-n", ns, "-o", "wide"))
		wantHeader(t, tb, "NAME", "DESIRED", "CURRENT", "READY", "AGE", "CONTAINERS", "IMAGES", "SELECTOR")
		row := tb.rows[0]
		return strings.Join(row[1:4], " ") == "3 3 3" && tb.col(t, row, "SELECTOR") == "app=hello", strings.Join(row, " ")
	})

	// kubectl asks for a WebSocket first and reports a refused upgrade as
	// "error: unable to upgrade connection: <the Status's message>" (the
	// SPDY path of older kubectl says "Error from server (BadRequest): ...").
	pod := strings.TrimPrefix(strings.Fields(kubectl(t, "get", "pods", "-n", ns, "-l", "app=hello", "-o", "name"))[0], "pod/")
	r := kubectlRun(t, "", nil, "exec", pod, "-n", ns, "--", "ls")
	want := `minictl's containers are simulated: pod "` + pod + `" has no process to exec into`
	if r.err == nil || !strings.Contains(r.stderr, want) {
		t.Errorf("kubectl exec: err %v, stderr:\n%s\nwant %q", r.err, r.stderr, want)
	}

	kubectl(t, "delete", "rc", "hello", "-n", ns)
	eventually(t, 30*time.Second, "the RC's pods deleted with it", func() (bool, string) {
		out := kubectl(t, "get", "pods", "-n", ns, "-l", "app=hello", "-o", "name")
		return strings.TrimSpace(out) == "", out
	})
}

// TestKubectlLogs: kubectl logs reads a container's output through the
// API server's pods/log from the pod's kubelet: all of it, the last lines
// (--tail), with timestamps, and with -f until the container's run ends;
// and a container the pod lacks, or a previous run there never was, is
// the server's error.
func TestKubectlLogs(t *testing.T) {
	const ns = "compat-logs"
	kubectl(t, "create", "namespace", ns)
	t.Cleanup(func() { kubectlRun(t, "", nil, "delete", "namespace", ns, "--wait=false") })
	kubectlIn(t, `apiVersion: v1
kind: Pod
metadata: {name: talker, namespace: `+ns+`}
spec:
  restartPolicy: Never
  containers:
  - name: talk
    image: busybox
    command: [sh, -c, "echo hello from minictl; sleep 2; echo bye"]
`, "create", "-f", "-")
	eventually(t, 30*time.Second, "pod talker started", func() (bool, string) {
		phase := kubectl(t, "get", "pod", "talker", "-n", ns, "-o", "jsonpath={.status.phase}")
		return phase == "Running" || phase == "Succeeded", phase
	})

	// Followed from the start, the log ends with the run: what the
	// container echoed, between the lines its simulated kubelet writes
	// when it starts and stops it.
	const whole = "[minictl] started: sh -c \"echo hello from minictl; sleep 2; echo bye\"\n" +
		"hello from minictl\nbye\n[minictl] exited with code 0\n"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	follow := kubectlCmd(ctx, "logs", "-f", "talker", "-n", ns)
	var out, errOut strings.Builder
	follow.Stdout, follow.Stderr = &out, &errOut
	if err := follow.Run(); err != nil || ctx.Err() != nil {
		t.Errorf("kubectl logs -f did not end with the run: %v (%v)\nstdout:\n%s\nstderr:\n%s", err, ctx.Err(), out.String(), errOut.String())
	} else if got := out.String(); got != whole {
		t.Errorf("kubectl logs -f printed %q, want %q", got, whole)
	}

	if got := kubectl(t, "logs", "talker", "-n", ns); got != whole {
		t.Errorf("kubectl logs printed %q, want %q", got, whole)
	}
	if got := kubectl(t, "logs", "talker", "-n", ns, "--tail=2"); got != "bye\n[minictl] exited with code 0\n" {
		t.Errorf("kubectl logs --tail=2 printed %q", got)
	}
	stamped := regexp.MustCompile(`^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z \S.*\n){1}\S+ hello from minictl\n\S+ bye\n\S+ \[minictl\] exited with code 0\n$`)
	if got := kubectl(t, "logs", "talker", "-n", ns, "--timestamps"); !stamped.MatchString(got) {
		t.Errorf("kubectl logs --timestamps printed %q", got)
	}

	r := kubectlRun(t, "", nil, "logs", "talker", "-n", ns, "-c", "nope")
	if r.err == nil || !strings.Contains(r.stderr, "container nope is not valid for pod talker") {
		t.Errorf("kubectl logs -c nope: err %v, stderr:\n%s", r.err, r.stderr)
	}
	r = kubectlRun(t, "", nil, "logs", "talker", "-n", ns, "--previous")
	if want := `previous terminated container "talk" in pod "talker" not found`; r.err == nil || !strings.Contains(r.stderr, want) {
		t.Errorf("kubectl logs --previous: err %v, stderr:\n%s\nwant %q", r.err, r.stderr, want)
	}
}

// TestKubectlDrain: `kubectl drain` cordons a node and evicts its pods
// through the eviction subresource, waiting on the budget: with a budget
// that allows a disruption the node's pods go and their ReplicaSet makes
// them again elsewhere; with one that allows none, drain keeps being
// refused with the budget's message until its timeout. `kubectl get pdb`
// prints kube-apiserver's columns.
func TestKubectlDrain(t *testing.T) {
	const ns = "compat-drain"
	kubectl(t, "create", "namespace", ns)
	t.Cleanup(func() { kubectlRun(t, "", nil, "delete", "namespace", ns, "--wait=false") })
	kubectlIn(t, `apiVersion: apps/v1
kind: Deployment
metadata: {name: drainme, namespace: `+ns+`}
spec:
  replicas: 3
  selector: {matchLabels: {app: drainme}}
  template:
    metadata: {labels: {app: drainme}}
    spec: {containers: [{name: app, image: nginx:1.27}]}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: drainme, namespace: `+ns+`}
spec:
  maxUnavailable: 1
  selector: {matchLabels: {app: drainme}}
`, "create", "-f", "-")

	// podNodes waits for 3 Ready pods and the budget allowing want
	// disruptions, and returns the node of each pod.
	podNodes := func(allowed string) map[string]string {
		t.Helper()
		var nodes map[string]string
		eventually(t, 60*time.Second, "3 pods ready and the budget allowing "+allowed, func() (bool, string) {
			out := kubectl(t, "get", "pods", "-n", ns, "-l", "app=drainme", "-o",
				`jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName} {.status.conditions[?(@.type=="Ready")].status} {.metadata.deletionTimestamp}{"\n"}{end}`)
			nodes = map[string]string{}
			for line := range strings.Lines(out) {
				if f := strings.Fields(line); len(f) == 3 && f[2] == "True" {
					nodes[f[0]] = f[1]
				}
			}
			pdb := kubectl(t, "get", "pdb", "drainme", "-n", ns, "-o", "jsonpath={.status.disruptionsAllowed}")
			return len(nodes) == 3 && pdb == allowed, fmt.Sprintf("pods %v, disruptionsAllowed %q", nodes, pdb)
		})
		return nodes
	}
	nodes := podNodes("1")

	tb := parseTable(t, kubectl(t, "get", "pdb", "-n", ns))
	wantHeader(t, tb, "NAME", "MIN AVAILABLE", "MAX UNAVAILABLE", "ALLOWED DISRUPTIONS", "AGE")
	if row := tb.find(t, "NAME", "drainme"); strings.Join(row[1:4], " ") != "N/A 1 1" {
		t.Errorf("pdb row %q, want N/A 1 1", row)
	}

	var victim, node string
	for pod, n := range nodes {
		victim, node = pod, n
		break
	}
	t.Cleanup(func() { kubectlRun(t, "", nil, "uncordon", node) })
	// The selector keeps drain to this test's pods: the node may also run
	// other tests' pods, which are not drain's to evict here.
	r := kubectlRun(t, "", nil, "drain", node, "--ignore-daemonsets", "--delete-emptydir-data",
		"--pod-selector=app=drainme", "--timeout=60s")
	if r.err != nil {
		t.Fatalf("kubectl drain: %v\nstdout:\n%s\nstderr:\n%s", r.err, r.stdout, r.stderr)
	}
	for _, want := range []string{"node/" + node + " cordoned", "evicting pod " + ns + "/" + victim, "pod/" + victim + " evicted", "node/" + node + " drained"} {
		if !strings.Contains(r.stdout+r.stderr, want) {
			t.Errorf("kubectl drain printed no %q:\n%s%s", want, r.stdout, r.stderr)
		}
	}
	if got := kubectl(t, "get", "node", node, "-o", "jsonpath={.spec.unschedulable}"); got != "true" {
		t.Errorf("node %s unschedulable %q after drain, want true", node, got)
	}
	for pod, n := range podNodes("1") {
		if n == node || pod == victim {
			t.Errorf("pod %s on %s: the drained node's pods are replaced elsewhere", pod, n)
		}
	}
	kubectl(t, "uncordon", node)

	// A budget that allows no disruption: drain is refused until it gives up.
	kubectl(t, "patch", "pdb", "drainme", "-n", ns, "--type=merge", "-p", `{"spec":{"maxUnavailable":0}}`)
	nodes = podNodes("0")
	for _, n := range nodes {
		node = n
		break
	}
	r = kubectlRun(t, "", nil, "drain", node, "--ignore-daemonsets", "--delete-emptydir-data",
		"--pod-selector=app=drainme", "--timeout=8s")
	if r.err == nil {
		t.Fatalf("kubectl drain succeeded past a budget allowing nothing:\n%s%s", r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "Cannot evict pod as it would violate the pod's disruption budget") {
		t.Errorf("kubectl drain stderr lacks the budget's refusal:\n%s", r.stderr)
	}
	if len(podNodes("0")) != 3 {
		t.Error("a refused drain evicted a pod")
	}
}

func TestKubectlCronJob(t *testing.T) {
	const ns = "compat-cj"
	kubectl(t, "create", "namespace", ns)
	t.Cleanup(func() { kubectlRun(t, "", nil, "delete", "namespace", ns, "--wait=false") })
	kubectl(t, "create", "cronjob", "tick", "-n", ns, "--image=busybox", "--schedule=*/1 * * * *", "--", "date")

	tb := parseTable(t, kubectl(t, "get", "cronjobs", "-n", ns, "-o", "wide"))
	wantHeader(t, tb, "NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST SCHEDULE", "AGE", "CONTAINERS", "IMAGES", "SELECTOR")
	if len(tb.rows) != 1 {
		t.Fatalf("%d rows, want 1", len(tb.rows))
	}
	row := tb.rows[0]
	for col, want := range map[string]string{
		"NAME": "tick", "SCHEDULE": "*/1 * * * *", "TIMEZONE": "<none>", "SUSPEND": "False",
		"CONTAINERS": "tick", "IMAGES": "busybox", "SELECTOR": "<none>",
	} {
		if got := tb.col(t, row, col); got != want {
			t.Errorf("%s = %q, want %q (row %q)", col, got, want, row)
		}
	}
	policy := kubectl(t, "get", "cronjob", "tick", "-n", ns, "-o", "jsonpath={.spec.concurrencyPolicy} {.spec.successfulJobsHistoryLimit} {.spec.jobTemplate.spec.template.spec.restartPolicy}")
	if policy != "Allow 3 OnFailure" {
		t.Errorf("defaults %q, want Allow 3 OnFailure", policy)
	}

	// A Job made now from the CronJob's template, as kubectl makes it:
	// owned by the CronJob, annotated as a manual run.
	kubectl(t, "create", "job", "--from=cronjob/tick", "tick-now", "-n", ns)
	owner := kubectl(t, "get", "job", "tick-now", "-n", ns, "-o",
		`jsonpath={.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name} {.metadata.annotations.cronjob\.kubernetes\.io/instantiate}`)
	if owner != "CronJob/tick manual" {
		t.Errorf("job tick-now: %q, want CronJob/tick manual", owner)
	}

	r := kubectlRun(t, "", nil, "create", "cronjob", "bad", "-n", ns, "--image=busybox", "--schedule=61 * * * *")
	if r.err == nil || !strings.Contains(r.stderr, "spec.schedule") || !strings.Contains(r.stderr, "end of range (61) above maximum (59)") {
		t.Errorf("a minute of 61: err %v, stderr:\n%s", r.err, r.stderr)
	}
}

func TestKubectlDaemonSetRollout(t *testing.T) {
	const ns = "compat-ds"
	kubectl(t, "create", "namespace", ns)
	t.Cleanup(func() { kubectlRun(t, "", nil, "delete", "namespace", ns, "--wait=false") })
	kubectlIn(t, `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: `+ns+`}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec: {containers: [{name: agent, image: agent:1}]}
`, "create", "-f", "-")
	if out := kubectl(t, "rollout", "status", "ds/agent", "-n", ns, "--timeout=60s"); !strings.Contains(out, `daemon set "agent" successfully rolled out`) {
		t.Fatalf("rollout status: %s", out)
	}
	tb := parseTable(t, kubectl(t, "get", "ds", "-n", ns, "-o", "wide"))
	wantHeader(t, tb, "NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE", "NODE SELECTOR", "AGE", "CONTAINERS", "IMAGES", "SELECTOR")
	row := tb.rows[0]
	if got := strings.Join(row[1:6], " "); got != "3 3 3 3 3" || tb.col(t, row, "NODE SELECTOR") != "<none>" || tb.col(t, row, "SELECTOR") != "app=agent" {
		t.Errorf("ds row %q, want 3 of each, no node selector, selector app=agent", row)
	}

	kubectl(t, "set", "image", "ds/agent", "-n", ns, "agent=agent:2")
	if out := kubectl(t, "rollout", "status", "ds/agent", "-n", ns, "--timeout=60s"); !strings.Contains(out, "successfully rolled out") {
		t.Fatalf("rollout status after set image: %s", out)
	}
	tb = parseTable(t, kubectl(t, "get", "controllerrevisions", "-n", ns))
	wantHeader(t, tb, "NAME", "CONTROLLER", "REVISION", "AGE")
	if len(tb.rows) != 2 || tb.col(t, tb.rows[0], "CONTROLLER") != "daemonset.apps/agent" {
		t.Errorf("controllerrevisions %q", tb.rows)
	}
	history := kubectl(t, "rollout", "history", "ds/agent", "-n", ns)
	if !regexp.MustCompile(`(?m)^1\s+<none>\n2\s+<none>`).MatchString(history) {
		t.Errorf("rollout history:\n%s\nwant revisions 1 and 2", history)
	}
	if one := kubectl(t, "rollout", "history", "ds/agent", "-n", ns, "--revision=1"); !strings.Contains(one, "Image:\tagent:1") && !strings.Contains(one, "agent:1") {
		t.Errorf("rollout history --revision=1:\n%s\nwant image agent:1", one)
	}

	if out := kubectl(t, "rollout", "undo", "ds/agent", "-n", ns); !strings.Contains(out, "daemonset.apps/agent rolled back") {
		t.Errorf("rollout undo: %s", out)
	}
	if out := kubectl(t, "rollout", "status", "ds/agent", "-n", ns, "--timeout=60s"); !strings.Contains(out, "successfully rolled out") {
		t.Fatalf("rollout status after undo: %s", out)
	}
	if img := kubectl(t, "get", "ds", "agent", "-n", ns, "-o", "jsonpath={.spec.template.spec.containers[0].image}"); img != "agent:1" {
		t.Errorf("image after undo %q, want agent:1", img)
	}
	history = kubectl(t, "rollout", "history", "ds/agent", "-n", ns)
	if !regexp.MustCompile(`(?m)^2\s+<none>\n3\s+<none>`).MatchString(history) {
		t.Errorf("rollout history after undo:\n%s\nwant revisions 2 and 3", history)
	}
	// kubectl compares the revision's data with the patch it computes
	// from the DaemonSet, byte for byte: the current revision matches.
	if out := kubectl(t, "rollout", "undo", "ds/agent", "-n", ns, "--to-revision=3"); !strings.Contains(out, "skipped rollback (current template already matches revision 3)") {
		t.Errorf("rollout undo to the current revision: %s", out)
	}
	if out := kubectl(t, "describe", "ds", "agent", "-n", ns); !strings.Contains(out, "Desired Number of Nodes Scheduled: 3") ||
		!strings.Contains(out, "SuccessfulCreate") {
		t.Errorf("describe ds:\n%s", out)
	}
	eventually(t, 30*time.Second, "every pod back on agent:1", func() (bool, string) {
		out := kubectl(t, "get", "pods", "-n", ns, "-l", "app=agent", "-o", "jsonpath={.items[*].spec.containers[0].image}")
		return out == "agent:1 agent:1 agent:1", out
	})
}

// TestKubectlJobs: kubectl creates Jobs, prints them with the server's
// columns, and waits for one to complete: its pods exit through the
// simulated kubelet's exit-code annotation.
func TestKubectlJobs(t *testing.T) {
	const ns = "compat-job"
	kubectl(t, "create", "namespace", ns)
	t.Cleanup(func() { kubectlRun(t, "", nil, "delete", "namespace", ns, "--wait=false") })

	kubectl(t, "create", "job", "forever", "-n", ns, "--image=busybox")
	kubectlIn(t, `apiVersion: batch/v1
kind: Job
metadata: {name: done, namespace: `+ns+`}
spec:
  completions: 2
  template:
    metadata: {annotations: {sim.minictl.io/exit-code: "0"}}
    spec: {restartPolicy: Never, containers: [{name: work, image: busybox}]}
`, "create", "-f", "-")
	kubectl(t, "wait", "--for=condition=complete", "job/done", "-n", ns, "--timeout=60s")

	tb := parseTable(t, kubectl(t, "get", "jobs", "-n", ns, "-o", "wide"))
	wantHeader(t, tb, "NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE", "CONTAINERS", "IMAGES", "SELECTOR")
	rows := map[string][]string{}
	for _, row := range tb.rows {
		rows[row[0]] = row
	}
	if row := rows["done"]; row == nil || tb.col(t, row, "STATUS") != "Complete" || tb.col(t, row, "COMPLETIONS") != "2/2" ||
		!strings.HasPrefix(tb.col(t, row, "SELECTOR"), "batch.kubernetes.io/controller-uid=") {
		t.Errorf("job done: %v, want Complete 2/2 with the generated selector", row)
	}
	if row := rows["forever"]; row == nil || tb.col(t, row, "STATUS") != "Running" || tb.col(t, row, "COMPLETIONS") != "0/1" ||
		tb.col(t, row, "IMAGES") != "busybox" {
		t.Errorf("job forever: %v, want Running 0/1 of busybox", row)
	}
	kubectl(t, "delete", "job", "forever", "-n", ns)
}
