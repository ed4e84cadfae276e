package timeline

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestFromRecord: the entry comes from the attributes alone, whatever the
// message says.
func TestFromRecord(t *testing.T) {
	cm := []slog.Attr{slog.String("component", "controller-manager"), slog.String("controller", "replicaset")}
	kubelet := []slog.Attr{slog.String("component", "kubelet"), slog.String("node", "node-1")}
	for _, tc := range []struct {
		name   string
		logger []slog.Attr // the logger's, as WithAttrs gives them
		level  slog.Level
		msg    string
		attrs  []any // the record's
		want   Entry
	}{
		{"a controller's decision", cm, slog.LevelInfo, "want 3, have 2 → create 1",
			[]any{slog.String("object", "default/web"), slog.Int("want", 3), slog.Int("have", 2)},
			Entry{Component: "replicaset", Object: "default/web", Message: "want 3, have 2 → create 1"}},
		{"no object", cm, slog.LevelInfo, "starting", []any{slog.Int("workers", 5)},
			Entry{Component: "replicaset", Message: "starting"}},
		{"a component without controller", []slog.Attr{slog.String("component", "apiserver")}, slog.LevelInfo, "api server ready", nil,
			Entry{Component: "apiserver", Message: "api server ready"}},
		{"neither", nil, slog.LevelInfo, "plain", nil, Entry{Component: "minictl", Message: "plain"}},
		{"a message shaped like the old ones stays whole", nil, slog.LevelInfo, "scheduler default/web: 3 nodes", nil,
			Entry{Component: "minictl", Message: "scheduler default/web: 3 nodes"}},
		{"a pod on a node", kubelet, slog.LevelInfo, "Pending → Running (ip 10.244.0.2)",
			[]any{slog.String("object", "default/web-x"), slog.String("from", "Pending"), slog.String("to", "Running")},
			Entry{Component: "kubelet", Object: "default/web-x", Message: "(on node-1) Pending → Running (ip 10.244.0.2)"}},
		{"the node itself", kubelet, slog.LevelInfo, "registered node", []any{slog.String("object", "node-1")},
			Entry{Component: "kubelet", Object: "node-1", Message: "registered node"}},
		{"the record's node", cm, slog.LevelInfo, "tolerates unreachable for 5s → evict at 15:29:33",
			[]any{slog.String("object", "default/web-x"), slog.String("node", "node-2")},
			Entry{Component: "replicaset", Object: "default/web-x", Message: "(on node-2) tolerates unreachable for 5s → evict at 15:29:33"}},
		{"a warning's error", cm, slog.LevelWarn, "sync failed, will retry",
			[]any{slog.String("object", "default/web"), slog.String("err", `replicasets.apps is forbidden: User "x" cannot create`)},
			Entry{Component: "replicaset", Object: "default/web", Message: `sync failed, will retry: replicasets.apps is forbidden: User "x" cannot create`}},
		{"an error at info stays off the line", cm, slog.LevelInfo, "gave up", []any{slog.String("err", "boom")},
			Entry{Component: "replicaset", Message: "gave up"}},
	} {
		r := slog.NewRecord(time.Time{}, tc.level, tc.msg, 0)
		r.Add(tc.attrs...)
		got := FromRecord(r, tc.logger)
		if got.Component != tc.want.Component || got.Object != tc.want.Object || got.Message != tc.want.Message {
			t.Errorf("%s: got %q %q %q, want %q %q %q", tc.name, got.Component, got.Object, got.Message,
				tc.want.Component, tc.want.Object, tc.want.Message)
		}
	}
}

func TestFilter(t *testing.T) {
	e := Entry{Component: "replicaset", Object: "team-a/web"}
	stage := Entry{Component: "pods", Object: "team-a/web-x", Stage: "indexer updated"}
	for _, tc := range []struct {
		f     Filter
		e     Entry
		match bool
	}{
		{Filter{}, e, true},
		{Filter{Component: "replicaset"}, e, true},
		{Filter{Component: "scheduler"}, e, false},
		{Filter{Namespace: "team-a"}, e, true},
		{Filter{Namespace: "default"}, e, false},
		{Filter{Object: "web"}, e, true},
		{Filter{}, stage, false},
		{Filter{Stages: true}, stage, true},
	} {
		if got := tc.f.Match(&tc.e); got != tc.match {
			t.Errorf("%+v matches %+v: got %v, want %v", tc.f, tc.e, got, tc.match)
		}
	}
}

// TestHandlerWritesAndPublishes: decisions go to the terminal and to every
// subscriber; debug detail only where asked for.
func TestHandlerWritesAndPublishes(t *testing.T) {
	var out bytes.Buffer
	bus := NewBus()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sub := bus.Subscribe(ctx, Filter{Component: "replicaset"})
	log := slog.New(NewHandler(&out, Options{Bus: bus}))
	rs := log.With("component", "controller-manager", "controller", "replicaset")
	rs.Debug("status replicas=3", "object", "default/web")
	rs.Info("want 3, have 2 → create 1", "object", "default/web", "want", 3, "have", 2)
	log.With("component", "scheduler").Info("3 nodes, 3 fit → bind to node-1", "object", "default/web-x", "to", "node-1")
	select {
	case e := <-sub:
		if e.Message != "want 3, have 2 → create 1" || e.Object != "default/web" {
			t.Errorf("published %+v", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nothing published")
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("wrote %d lines, want 2 (no debug):\n%s", len(lines), out.String())
	}
	if !strings.HasSuffix(lines[0], "replicaset         default/web                  want 3, have 2 → create 1") {
		t.Errorf("line %q", lines[0])
	}
}
