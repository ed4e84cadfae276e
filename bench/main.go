package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"
)

// config is the size of every scenario; -quick shrinks it.
type config struct {
	reps             int
	createPods       int
	lists            int
	watchers         int
	watchPods        int
	replicas         int
	nodes            int
	nsPods           int
	nsNodes          int
	storedPods       int
	applies          int
	crds             int
	jobCompletions   int
	jobParallelism   int
	jobNodes         int
	dsNodes          int
	stsReplicas      int
	services         int
	loadBalancers    int
	hpas             int
	hpaNodes         int
	settle           time.Duration
	reconcileTimeout time.Duration
}

var full = config{
	reps: 3, createPods: 5000, lists: 10, watchers: 1000, watchPods: 200,
	replicas: 2000, nodes: 20, nsPods: 1000, nsNodes: 10, storedPods: 30000, applies: 2000, crds: 20,
	jobCompletions: 1000, jobParallelism: 100, jobNodes: 10, dsNodes: 100, stsReplicas: 100, services: 500, loadBalancers: 50,
	hpas: 200, hpaNodes: 5,
	settle: 2 * time.Second, reconcileTimeout: 180 * time.Second,
}

var quick = config{
	reps: 1, createPods: 1000, lists: 5, watchers: 100, watchPods: 50,
	replicas: 200, nodes: 2, nsPods: 100, nsNodes: 1, storedPods: 3000, applies: 500, crds: 5,
	jobCompletions: 100, jobParallelism: 20, jobNodes: 2, dsNodes: 20, stsReplicas: 100, services: 500, loadBalancers: 20,
	hpas: 50, hpaNodes: 2,
	settle: time.Second, reconcileTimeout: 60 * time.Second,
}

// targets are the requirement's, for the full sizes (2-core machine).
var targets = map[string]*target{
	"create/minictl / raw etcd":                                                   {op: ">=", value: 60},
	"create/create p99":                                                           {op: "<", value: 50},
	"list/5000 pods from watch cache (resourceVersion=0)":                         {op: "<", value: 60},
	"watch/delivery p99 (1000 watchers)":                                          {op: "<", value: 50},
	"watch/missed events":                                                         {op: "==", value: 0, worst: true},
	"watch/etcd watches on pods":                                                  {op: "==", value: 1, worst: true},
	"reconcile/ReplicaSet 0 → 2000: pods created":                                 {op: "<", value: 3},
	"reconcile/ReplicaSet 0 → 2000: all Running":                                  {op: "<", value: 10},
	"reconcile/200 pods deleted: all replaced":                                    {op: "<", value: 1},
	"namespace/namespace with 1000 running pods deleted: gone":                    {op: "<", value: 3},
	"start-up/ready, empty data dir":                                              {op: "<", value: 1000},
	"start-up/ready, 30000 stored pods":                                           {op: "<", value: 3000},
	"memory/minictl up idle RSS":                                                  {op: "<", value: 100},
	"apply/unchanged Deployment p99":                                              {op: "<", value: 10},
	"crcreate/custom objects / pods":                                              {op: ">=", value: 90},
	"crdestablish/definition to first object p99":                                 {op: "<", value: 100},
	"job/Job of 1000 completions: Complete":                                       {op: "<", value: 10},
	"daemonset/DaemonSet on 100 nodes: all Running":                               {op: "<", value: 3},
	"statefulset/Parallel StatefulSet of 100 pods with a claim each: all Running": {op: "<", value: 5},
	"securecreate/secure / plain":                                                 {op: ">=", value: 90},
	"services/Services / pods":                                                    {op: ">=", value: 80},
	"loadbalancer/create to ingress IP p99":                                       {op: "<", value: 200},
	"hpa/one pass over 200 autoscalers, steady":                                   {op: "<", value: 1},
	"hpa/one pass over 200 autoscalers, each rescaling":                           {op: "<", value: 1},
	"testenv/Start to ready, API only":                                            {op: "<", value: 150},
	"testenv/Start to ready, controllers + scheduler + 3 nodes":                   {op: "<", value: 300},
	"testenv/idle Env with controllers: heap":                                     {op: "<", value: 60},
}

// notes say how a figure was set up, where the name does not.
var notes = map[string]string{
	"testenv/Start to ready, API only":                                            "in the bench process; envtest's kube-apiserver + etcd not run: no binaries here",
	"create/pods created":                                                         "32 clients",
	"create/raw etcd txn puts":                                                    "32 clients, same etcd, same size",
	"reconcile/ReplicaSet 0 → 2000: pods created":                                 "--nodes 20",
	"namespace/namespace with 1000 running pods deleted: gone":                    "--nodes 10",
	"memory/minictl up idle RSS":                                                  "defaults, 3 nodes",
	"apply/unchanged Deployment p50":                                              "server-side apply, one client",
	"apply/unchanged Deployment p99":                                              "server-side apply, one client",
	"crcreate/pods created":                                                       "32 clients, alternating with the custom objects",
	"crcreate/custom objects created":                                             "32 clients, pod-sized, every field in the schema",
	"crdestablish/definition to first object p50":                                 "one definition at a time",
	"crdestablish/definition to first object p99":                                 "one definition at a time",
	"job/Job of 1000 completions: Complete":                                       "parallelism 100, --nodes 10, each pod exit 0",
	"daemonset/DaemonSet on 100 nodes: all Running":                               "--nodes 100",
	"statefulset/Parallel StatefulSet of 100 pods with a claim each: all Running": "--nodes 10 (2 quick), the standard class provisioning each claim",
	"securecreate/pods created, secure port":                                      "32 clients with a user's client certificate, RBAC among 1000 other RoleBindings",
	"services/pods created":                                                       "32 clients, alternating with the Services",
	"services/Services created":                                                   "32 clients, each given a cluster IP",
	"loadbalancer/create to ingress IP p50":                                       "one Service at a time, --nodes 3, the simulated cloud",
	"loadbalancer/create to ingress IP p99":                                       "one Service at a time, --nodes 3, the simulated cloud",
	"hpa/one pass over 200 autoscalers, steady":                                   "the controller's last_pass_duration_seconds, 5 workers, --nodes 5",
	"hpa/one pass over 200 autoscalers, each rescaling":                           "the controller's last_pass_duration_seconds: 200 scale writes, statuses and events",
	"hpa/one rescaling autoscaler's sync, mean":                                   "reconciliation_duration_seconds{action=\"scale_up\"}: read the scale, write it, write the status",
}

type harness struct {
	cfg      config
	bin      string
	tmp      string
	res      *results
	pprofDir string
	logDir   string
	scale    scaleConfig
}

// loadGeneratorGOGC is the harness's own garbage collector setting. The
// load generator shares the machine's CPUs with minictl and etcd, so
// every cycle it spends collecting is taken from what it measures; it
// keeps little alive, so collecting rarely costs it only memory.
const loadGeneratorGOGC = 400

func main() {
	debug.SetGCPercent(loadGeneratorGOGC)
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	bin := flag.String("bin", "bin/minictl", "the minictl binary to measure (make bench builds it)")
	isQuick := flag.Bool("quick", false, "smaller counts and one repetition, for a fast look")
	reps := flag.Int("reps", 0, "repetitions of each scenario (default 3, 1 with -quick)")
	jsonPath := flag.String("json", "", "also write the results as JSON to this file")
	only := flag.String("only", "", "comma-separated scenarios to run (create, watch, reconcile, namespace, startup, apply, crcreate, crdestablish, job, daemonset, statefulset, securecreate, services, loadbalancer, hpa, testenv, scale); default all but scale")
	pprofDir := flag.String("pprof", "", "start minictl with --profiling and save CPU and allocation profiles of each scenario's first repetition here")
	logDir := flag.String("logs", "", "keep each minictl's stderr log (and its /metrics at the end) in this directory")
	createPods := flag.Int("create-pods", 0, "pods the create scenario creates (default 5000, 1000 with -quick)")
	scaleSteps := flag.String("scale-steps", "", "the scale scenario's steps, pods/nodes each, one `minictl up` per step (default "+defaultScaleSteps+", "+quickScaleSteps+" with -quick)")
	scaleRate := flag.Float64("scale-rate", 100, "pods per second the scale scenario asks for")
	scaleRSSize := flag.Int("scale-replicaset-size", 100, "replicas of each ReplicaSet the scale scenario creates")
	scaleRSSLimit := flag.Float64("scale-rss-limit", 16, "GiB: a scale step stops when minictl's RSS passes this, and no larger step runs")
	scaleTimeout := flag.Duration("scale-step-timeout", 0, "how long one scale step may take from its cluster's start to every pod Running (default: its creates at -scale-rate, plus 10 minutes)")
	scaleSettle := flag.Duration("scale-settle", 90*time.Second, "how long the scale scenario waits, all pods Running, before the steady memory figures (then until RSS stops falling)")
	scaleIdle := flag.Duration("scale-idle", 30*time.Second, "the window over which the idle cluster's CPU is measured")
	scaleHeapDir := flag.String("scale-heap-dir", "bin", "where the scale scenario saves each step's heap profile, scale-<pods>.heap.pb.gz")
	flag.Parse()

	cfg := full
	if *isQuick {
		cfg = quick
	}
	if *reps > 0 {
		cfg.reps = *reps
	}
	if *createPods > 0 {
		cfg.createPods = *createPods
	}
	abs, err := filepath.Abs(*bin)
	if err != nil {
		return err
	}
	if _, err := os.Stat(abs); err != nil {
		return fmt.Errorf("minictl binary: %w (run `make build` first)", err)
	}
	tmp, err := os.MkdirTemp("", "minictl-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if *pprofDir != "" {
		if err := os.MkdirAll(*pprofDir, 0o755); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if *scaleSteps == "" {
		*scaleSteps = map[bool]string{false: defaultScaleSteps, true: quickScaleSteps}[*isQuick]
	}
	steps, err := parseScaleSteps(*scaleSteps)
	if err != nil {
		return err
	}
	if *scaleRate <= 0 || *scaleRSSize <= 0 || *scaleRSSLimit <= 0 {
		return fmt.Errorf("-scale-rate, -scale-replicaset-size and -scale-rss-limit must be positive")
	}
	h := &harness{cfg: cfg, bin: abs, tmp: tmp, res: newResults(targets, notes), pprofDir: *pprofDir, logDir: *logDir,
		scale: scaleConfig{steps: steps, rate: *scaleRate, rsSize: *scaleRSSize, rssLimitMB: *scaleRSSLimit * 1024,
			stepTimeout: *scaleTimeout, settle: *scaleSettle, idle: *scaleIdle, heapDir: *scaleHeapDir}}
	scenarios := []struct {
		name string
		run  func(context.Context, int) error
	}{
		{"create", h.runCreate},
		{"watch", h.runWatch},
		{"reconcile", h.runReconcile},
		{"namespace", h.runNamespace},
		{"startup", h.runStartup},
		{"apply", h.runApply},
		{"crcreate", h.runCRCreate},
		{"crdestablish", h.runCRDEstablish},
		{"job", h.runJob},
		{"daemonset", h.runDaemonSet},
		{"statefulset", h.runStatefulSet},
		{"securecreate", h.runSecureCreate},
		{"services", h.runServices},
		{"loadbalancer", h.runLoadBalancer},
		{"hpa", h.runHPA},
		{"testenv", h.runTestenv},
		{"scale", h.runScale},
	}
	// alone are run only when -only names them: scale takes up to 15
	// minutes a step (make bench-scale).
	alone := map[string]bool{"scale": true}
	selected := map[string]bool{}
	for _, s := range strings.Split(*only, ",") {
		if s = strings.TrimSpace(s); s != "" {
			selected[s] = true
		}
	}
	m := describeMachine()
	started := time.Now()
	busy, own := cpuBusy(), ownCPU()
	fmt.Printf("minictl bench: %d repetition(s)%s on %s\n", cfg.reps, map[bool]string{true: ", quick", false: ""}[*isQuick], m)
	for _, s := range scenarios {
		if len(selected) > 0 && !selected[s.name] || len(selected) == 0 && alone[s.name] {
			continue
		}
		for rep := range cfg.reps {
			t := time.Now()
			if err := s.run(ctx, rep); err != nil {
				return fmt.Errorf("%s (repetition %d): %w", s.name, rep+1, err)
			}
			fmt.Printf("  %-9s repetition %d done in %s\n", s.name, rep+1, time.Since(t).Round(100*time.Millisecond))
		}
	}
	h.res.finish()
	elapsed := time.Since(started)
	others := (cpuBusy() - busy - (ownCPU() - own)).Seconds() / elapsed.Seconds()
	fmt.Println()
	h.res.table(os.Stdout)
	fmt.Printf("\n%d repetition(s) in %s; other processes used %.2f of %d CPUs meanwhile\n",
		cfg.reps, elapsed.Round(time.Second), max(others, 0), m.CPUs)
	if *jsonPath != "" {
		rep := report{
			Command: "go run ./bench " + strings.Join(os.Args[1:], " "), Machine: m, Started: started,
			Duration: elapsed.Round(time.Second).String(), Reps: cfg.reps, Quick: *isQuick,
			OtherCPUs: max(others, 0), Figures: h.res.figures,
		}
		if err := writeJSON(*jsonPath, rep); err != nil {
			return err
		}
	}
	return nil
}

// machine is what the figures were measured on.
type machine struct {
	CPUs     int    `json:"nproc"`
	CPU      string `json:"cpu"`
	MemoryGB string `json:"memory"`
	Kernel   string `json:"kernel"`
	Go       string `json:"go"`
}

func (m machine) String() string {
	return fmt.Sprintf("%d × %s, %s RAM, %s, %s", m.CPUs, m.CPU, m.MemoryGB, m.Kernel, m.Go)
}

func describeMachine() machine {
	m := machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), CPU: "unknown", MemoryGB: "unknown", Kernel: runtime.GOOS}
	if out, err := exec.Command("nproc").Output(); err == nil {
		fmt.Sscan(string(out), &m.CPUs)
	}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(data)) {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				m.CPU = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.Lines(string(data)) {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				var kb float64
				fmt.Sscan(v, &kb)
				m.MemoryGB = fmt.Sprintf("%.1f GiB", kb/1024/1024)
			}
		}
	}
	if out, err := exec.Command("uname", "-sr").Output(); err == nil {
		m.Kernel = strings.TrimSpace(string(out))
	}
	return m
}

// cpuBusy is the CPU time every process on the machine has used since
// boot (user, nice, system, irq, softirq, steal from /proc/stat).
func cpuBusy() time.Duration {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	var ticks int64
	for i, v := range f[1:] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		var n int64
		fmt.Sscan(v, &n)
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond // USER_HZ is 100
}

// ownCPU is the CPU time of the harness and of the minictl processes it
// started and waited for.
func ownCPU() time.Duration {
	return rusageCPU(syscall.RUSAGE_SELF) + rusageCPU(syscall.RUSAGE_CHILDREN)
}

// profiling reports whether clusters start with --profiling.
func (h *harness) profiling() bool { return h.pprofDir != "" }

// profileRun is a CPU profile being taken.
type profileRun struct{ done chan struct{} }

func (p *profileRun) wait() {
	if p != nil {
		<-p.done
	}
}

// cpuProfile starts a CPU profile of seconds on the first repetition when
// -pprof is set; wait returns once it is saved.
func (h *harness) cpuProfile(ctx context.Context, c *cluster, rep int, name string, seconds int) *profileRun {
	if h.pprofDir == "" || rep != 0 {
		return nil
	}
	p := &profileRun{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		if err := c.profile(ctx, h.pprofDir, name+"-cpu", "profile", max(seconds, 1)); err != nil {
			fmt.Fprintln(os.Stderr, "bench: cpu profile:", err)
		}
	}()
	return p
}

// allocProfile saves the allocation profile on the first repetition when
// -pprof is set.
func (h *harness) allocProfile(ctx context.Context, c *cluster, rep int, name string) {
	if h.pprofDir == "" || rep != 0 {
		return
	}
	if err := c.profile(ctx, h.pprofDir, name+"-allocs", "allocs", 0); err != nil {
		fmt.Fprintln(os.Stderr, "bench: alloc profile:", err)
	}
}
