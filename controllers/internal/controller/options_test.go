package controller

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/clock"
	"github.com/minictl/minictl/informer"
)

func TestCompleteRequiresClientAndInformers(t *testing.T) {
	rc, err := client.New(&client.Config{Server: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	f := informer.NewSharedInformerFactory(rc, informer.FactoryOptions{})
	for _, c := range []Common{{}, {Client: rc}, {Informers: f}} {
		if _, err := c.Complete("test"); err == nil || !strings.HasPrefix(err.Error(), "test: ") {
			t.Errorf("Complete of %+v: err %v, want one naming the controller", c, err)
		}
	}
	if _, err := (Common{Client: rc, Informers: f}).Complete("test"); err != nil {
		t.Errorf("Complete with both: %v", err)
	}
}

func TestWithDefaults(t *testing.T) {
	c := Common{}.WithDefaults("test")
	if c.Recorder != record.Discard {
		t.Errorf("Recorder = %T, want record.Discard", c.Recorder)
	}
	if _, ok := c.Clock.(clock.Real); !ok {
		t.Errorf("Clock = %T, want clock.Real", c.Clock)
	}
	if c.Logger == nil || c.Logger.Enabled(t.Context(), slog.LevelError) {
		t.Error("a nil Logger does not default to one that discards")
	}
	if c.Metrics != nil {
		t.Error("a nil Metrics is not left nil")
	}

	fake := clock.NewFake(clock.Real{}.Now())
	rec := &record.FakeRecorder{}
	if c := (Common{Clock: fake, Recorder: rec}).WithDefaults("test"); c.Clock != clock.Clock(fake) || c.Recorder != record.EventRecorder(rec) {
		t.Error("WithDefaults replaced a clock or recorder it was given")
	}
}

// The logger carries controller=<name> exactly once: the caller's logger
// must not carry it already, and WithDefaults adds it.
func TestLoggerCarriesTheNameOnce(t *testing.T) {
	var buf bytes.Buffer
	c := Common{Logger: slog.New(slog.NewJSONHandler(&buf, nil)).With("component", "controller-manager")}.WithDefaults("endpoint")
	c.Logger.Info("hello")
	if got := strings.Count(buf.String(), `"controller":`); got != 1 {
		t.Errorf("%d controller keys in %s, want 1", got, buf.String())
	}
	if !strings.Contains(buf.String(), `"controller":"endpoint"`) {
		t.Errorf("no controller=endpoint in %s", buf.String())
	}
}
