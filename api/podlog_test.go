package api

import (
	"net/url"
	"strings"
	"testing"
)

func TestPodLogOptionsFromQueryAndBack(t *testing.T) {
	q, _ := url.ParseQuery("container=app&follow=1&previous=false&timestamps=true&tailLines=10&limitBytes=5&sinceTime=2026-11-28T12:00:00Z")
	o, err := PodLogOptionsFromQuery(q)
	if err != nil {
		t.Fatal(err)
	}
	if o.Container != "app" || !o.Follow || o.Previous || !o.Timestamps || *o.TailLines != 10 || *o.LimitBytes != 5 || o.SinceTime == nil || o.SinceSeconds != nil {
		t.Fatalf("parsed %+v", o)
	}
	if got, want := PodLogOptionsQuery(o).Encode(), "follow=true&limitBytes=5&sinceTime=2026-11-28T12%3A00%3A00Z&tailLines=10&timestamps=true"; got != want {
		t.Errorf("query %s, want %s", got, want)
	}
	for _, bad := range []string{"tailLines=x", "sinceSeconds=1.5", "sinceTime=yesterday"} {
		q, _ := url.ParseQuery(bad)
		if _, err := PodLogOptionsFromQuery(q); err == nil {
			t.Errorf("%s parsed", bad)
		}
	}
}

func TestValidatePodLogOptions(t *testing.T) {
	for query, want := range map[string]string{
		"tailLines=0":    "",
		"tailLines=-1":   "tailLines: Invalid value: -1: must be greater than or equal to 0",
		"limitBytes=0":   "limitBytes: Invalid value: 0: must be greater than 0",
		"sinceSeconds=0": "sinceSeconds: Invalid value: 0: must be greater than 0",
		"sinceSeconds=1&sinceTime=2026-11-28T12:00:00Z": "Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified",
		"stream=Both": `stream: Unsupported value: "Both"`,
	} {
		q, _ := url.ParseQuery(query)
		o, err := PodLogOptionsFromQuery(q)
		if err != nil {
			t.Fatal(err)
		}
		got := ValidatePodLogOptions(o).ToAggregate()
		switch {
		case want == "" && got != nil:
			t.Errorf("%s: %v", query, got)
		case want != "" && (got == nil || !strings.Contains(got.Error(), want)):
			t.Errorf("%s: %v, want %q", query, got, want)
		}
	}
}
