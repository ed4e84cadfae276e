package timeline

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestFromRecord(t *testing.T) {
	for _, tc := range []struct {
		msg   string
		attrs []slog.Attr
		want  Entry
	}{
		{"replicaset default/web: want 3, have 2 → create 1", nil,
			Entry{Component: "replicaset", Object: "default/web", Message: "want 3, have 2 → create 1"}},
		{"scheduler: starting", nil, Entry{Component: "scheduler", Message: "starting"}},
		{"api server ready", []slog.Attr{slog.String("component", "apiserver")}, Entry{Component: "apiserver", Message: "api server ready"}},
		{"plain", nil, Entry{Component: "minictl", Message: "plain"}},
	} {
		r := slog.NewRecord(time.Time{}, slog.LevelInfo, tc.msg, 0)
		got := FromRecord(r, tc.attrs)
		if got.Component != tc.want.Component || got.Object != tc.want.Object || got.Message != tc.want.Message {
			t.Errorf("%q: got %+v, want %+v", tc.msg, got, tc.want)
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
	log.Debug("replicaset default/web: status replicas=3")
	log.Info("replicaset default/web: want 3, have 2 → create 1")
	log.Info("scheduler default/web-x: 3 nodes, 3 fit → bind to node-1")
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

func TestFromRecordShapes(t *testing.T) {
	for _, tc := range []struct {
		msg, comp, obj, text string
	}{
		{"nodelifecycle default/web-x on node-2: tolerates unreachable for 5s → evict", "nodelifecycle", "default/web-x", "(on node-2) tolerates unreachable for 5s → evict"},
		{"nodeipam node-1 → podCIDR 10.244.0.0/24", "nodeipam", "node-1", "→ podCIDR 10.244.0.0/24"},
		{"namespace kube-public has no ServiceAccount default → create it", "serviceaccount", "", "namespace kube-public has no ServiceAccount default → create it"},
	} {
		r := slog.NewRecord(time.Time{}, slog.LevelInfo, tc.msg, 0)
		got := FromRecord(r, []slog.Attr{slog.String("component", "controller-manager"), slog.String("controller", "serviceaccount")})
		if got.Component != tc.comp || got.Object != tc.obj || got.Message != tc.text {
			t.Errorf("%q: got %q %q %q", tc.msg, got.Component, got.Object, got.Message)
		}
	}
}
