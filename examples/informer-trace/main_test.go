package main

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/internal/minitest"
	"github.com/minictl/minictl/internal/testenv"
)

// The lesson's claim: a pod created through the API passes every stage, in
// order, on its way to a worker.
func TestTraceShowsEveryStageInOrder(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var out minitest.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--server", env.URL, "--namespace", "default", "--duration", "1m"}, &out)
	}()
	waitFor(t, &out, "watching pods")

	rc, err := client.New(&client.Config{Server: env.URL})
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "traced"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}},
	}
	if _, err := client.For[*corev1.Pod](rc).Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	waitFor(t, &out, `stage="worker reconciled" resource=pods key=default/traced`)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}

	want := []informer.TraceStage{
		informer.StageReflectorReceived,
		informer.StageDeltaFIFOQueued,
		informer.StageDeltaFIFOPopped,
		informer.StageIndexerUpdated,
		informer.StageHandlerCalled,
		informer.StageKeyEnqueued,
		informer.StageReconciled,
	}
	if got := stagesOf(out.String(), "default/traced"); !slices.Equal(got, want) {
		t.Errorf("stages of default/traced:\n got %q\nwant %q\noutput:\n%s", got, want, out.String())
	}
}

var (
	stageRE = regexp.MustCompile(`stage="([^"]+)"`)
	keyRE   = regexp.MustCompile(` key=(\S+)`)
)

// stagesOf returns the stages logged for key, in log order.
func stagesOf(output, key string) []informer.TraceStage {
	var stages []informer.TraceStage
	for line := range strings.Lines(output) {
		s, k := stageRE.FindStringSubmatch(line), keyRE.FindStringSubmatch(line)
		if s != nil && k != nil && k[1] == key {
			stages = append(stages, informer.TraceStage(s[1]))
		}
	}
	return stages
}

func waitFor(t *testing.T, out *minitest.Buffer, text string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), text) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the output after 30s:\n%s", text, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
