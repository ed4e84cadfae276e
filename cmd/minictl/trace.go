package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"

	"github.com/minictl/minictl/internal/timeline"
)

// runTrace attaches to a running cluster and prints its timeline, the
// same lines `minictl up` prints, as they happen.
func runTrace(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("trace")
	newClient := bindClient(fs)
	component := fs.String("component", "", "only this component (replicaset, scheduler, kubelet, ...)")
	namespace := fs.String("namespace", "", "only objects in this namespace")
	object := fs.String("object", "", "only objects whose namespace/name contains this")
	stages := fs.Bool("stages", false, "also show each informer pipeline stage (reflector, DeltaFIFO, indexer, handler)")
	output := fs.String("output", "timeline", "timeline or json")
	if err := parseFlags(ctx, fs, args); err != nil {
		return err
	}
	rc, err := newClient()
	if err != nil {
		return err
	}
	q := url.Values{}
	for k, v := range map[string]string{"component": *component, "namespace": *namespace, "object": *object} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if *stages {
		q.Set("stages", "true")
	}
	body, err := rc.Stream(ctx, "/debug/timeline", q)
	if err != nil {
		return fmt.Errorf("attach to %s: %w", rc.Server(), err)
	}
	defer body.Close()
	fmt.Fprintf(stderr, "minictl trace: following %s (Ctrl-C to stop)\n", rc.Server())
	color := isTerminal(stdout)
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if *output == "json" {
			fmt.Fprintln(stdout, sc.Text())
			continue
		}
		var e timeline.Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			continue
		}
		fmt.Fprint(stdout, timeline.Line(e, color))
	}
	if err := sc.Err(); err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
		return err
	}
	return nil
}
