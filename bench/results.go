package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// target is what a figure should reach: value compared with op ("<",
// ">=", "==", the comparisons the targets use). A worst-case target is checked against the worst
// repetition (max for "<", min for ">="), the others against the median.
type target struct {
	op    string
	value float64
	worst bool
}

func (t *target) String() string {
	if t == nil {
		return ""
	}
	op := t.op
	if op == "==" {
		op = "="
	}
	return fmt.Sprintf("%s %s", op, trimFloat(t.value))
}

func (t *target) met(v float64) bool {
	switch t.op {
	case "<":
		return v < t.value
	case ">=":
		return v >= t.value
	case "<=":
		return v <= t.value
	case "==":
		return v == t.value
	}
	return false
}

// figure is one measured quantity over the repetitions.
type figure struct {
	Scenario string    `json:"scenario"`
	Name     string    `json:"name"`
	Unit     string    `json:"unit"`
	Values   []float64 `json:"values"`
	Median   float64   `json:"median"`
	Min      float64   `json:"min"`
	Max      float64   `json:"max"`
	Target   string    `json:"target,omitempty"`
	Met      *bool     `json:"met,omitempty"`
	Note     string    `json:"note,omitempty"`

	target *target
}

// results collects figures in the order they are first recorded.
type results struct {
	mu      sync.Mutex
	figures []*figure
	targets map[string]*target // by "scenario/name"
	notes   map[string]string
}

func newResults(targets map[string]*target, notes map[string]string) *results {
	return &results{targets: targets, notes: notes}
}

// add records one repetition's value of a figure.
func (r *results) add(scenario, name, unit string, v float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.figures {
		if f.Scenario == scenario && f.Name == name {
			f.Values = append(f.Values, v)
			return
		}
	}
	key := scenario + "/" + name
	r.figures = append(r.figures, &figure{
		Scenario: scenario, Name: name, Unit: unit, Values: []float64{v},
		target: r.targets[key], Note: r.notes[key],
	})
}

func (r *results) addDuration(scenario, name string, d time.Duration) {
	r.add(scenario, name, "ms", float64(d.Microseconds())/1000)
}

func (r *results) addSeconds(scenario, name string, d time.Duration) {
	r.add(scenario, name, "s", d.Seconds())
}

// finish computes medians and checks targets.
func (r *results) finish() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.figures {
		vs := slices.Clone(f.Values)
		slices.Sort(vs)
		f.Min, f.Max = vs[0], vs[len(vs)-1]
		if n := len(vs); n%2 == 1 {
			f.Median = vs[n/2]
		} else {
			f.Median = (vs[n/2-1] + vs[n/2]) / 2
		}
		if t := f.target; t != nil {
			f.Target = t.String()
			v := f.Median
			if t.worst {
				v = f.Max
				if t.op == ">=" {
					v = f.Min
				}
			}
			met := t.met(v)
			f.Met = &met
		}
	}
}

// table writes the figures as a Markdown table.
func (r *results) table(w io.Writer) {
	fmt.Fprintln(w, "| scenario | figure | median | min | max | target | met |")
	fmt.Fprintln(w, "| --- | --- | ---: | ---: | ---: | --- | :-: |")
	for _, f := range r.figures {
		met := ""
		if f.Met != nil {
			met = "✗"
			if *f.Met {
				met = "✓"
			}
		}
		tgt := f.Target
		if tgt != "" {
			tgt += " " + f.Unit
		}
		name := f.Name
		if f.Note != "" {
			name += " (" + f.Note + ")"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", f.Scenario, name,
			format(f.Median, f.Unit), format(f.Min, f.Unit), format(f.Max, f.Unit), tgt, met)
	}
}

// report is what -json writes.
type report struct {
	Command  string    `json:"command"`
	Machine  machine   `json:"machine"`
	Started  time.Time `json:"started"`
	Duration string    `json:"duration"`
	Reps     int       `json:"repetitions"`
	Quick    bool      `json:"quick"`
	// OtherCPUs is how many CPUs other processes kept busy on average
	// during the run: figures from a busy machine are worse.
	OtherCPUs float64   `json:"other_cpus"`
	Figures   []*figure `json:"figures"`
}

func writeJSON(path string, rep report) error {
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

func format(v float64, unit string) string {
	switch unit {
	case "ms", "s", "MB", "KB", "%", "x", "cores", "millicores":
		if math.Abs(v) >= 100 {
			return fmt.Sprintf("%.0f %s", v, unit)
		}
		if math.Abs(v) >= 10 {
			return fmt.Sprintf("%.1f %s", v, unit)
		}
		return fmt.Sprintf("%.2f %s", v, unit)
	}
	return strings.TrimSpace(fmt.Sprintf("%s %s", trimFloat(math.Round(v)), unit))
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}

// percentile is the nearest-rank percentile p (0..100) of sorted ds.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}
