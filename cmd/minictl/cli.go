package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/minictl/minictl/client"
)

// The command line: cobra commands over the run functions. Each run
// function declares its flags on the flag set newFlagSet gives it and
// parses them with parseFlags, in one place, as it always did. Cobra
// learns a command's flags (for -h and shell completion) by calling the
// run function once with a describing context, in which parseFlags hands
// the flags over and stops the function before it does anything.

// errDescribed stops a run function that was called to describe its flags.
var errDescribed = errors.New("flags described")

// errShown is returned after what the user asked for (help) was printed.
var errShown = errors.New("shown")

type describeKey struct{}
type commandKey struct{}

// runFunc is a command's run function.
type runFunc func(ctx context.Context, args []string, stdout, stderr io.Writer) error

// newFlagSet is a command's flag set.
func newFlagSet(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard) // parseFlags reports errors, in one line
	fs.Usage = func() {}
	fs.SortFlags = false
	return fs
}

// goFlags declares on fs the flags bind declares on a standard library
// flag set (the controllers' and the client's packages use those). A value
// given on the command line is set through the standard flag set, so that
// its Visit reports it as given.
func goFlags(fs *pflag.FlagSet, bind func(*flag.FlagSet)) {
	g := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	bind(g)
	g.VisitAll(func(f *flag.Flag) {
		v := &goValue{set: g, name: f.Name, inner: f.Value}
		t := reflect.TypeOf(f.Value)
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		v.typ = strings.TrimSuffix(strings.ToLower(t.Name()), "value")
		if v.typ == "func" || v.typ == "" {
			v.typ = "string"
		}
		pf := fs.VarPF(v, f.Name, "", f.Usage)
		pf.DefValue = f.DefValue
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			pf.NoOptDefVal = "true"
			v.typ = "bool"
		}
	})
}

// goValue is a standard library flag seen by pflag.
type goValue struct {
	set   *flag.FlagSet
	name  string
	inner flag.Value
	typ   string
}

func (v *goValue) String() string     { return v.inner.String() }
func (v *goValue) Set(s string) error { return v.set.Set(v.name, s) }
func (v *goValue) Type() string       { return v.typ }

// parseFlags parses a command's arguments into fs, and checks every
// flag's value; while the command is being described it hands fs to cobra
// and returns errDescribed.
func parseFlags(ctx context.Context, fs *pflag.FlagSet, args []string) error {
	return parseFlagsArgs(ctx, fs, args, 0)
}

// parseFlagsArgs is parseFlags for a command that takes up to maxArgs
// arguments besides its flags (fs.Args).
func parseFlagsArgs(ctx context.Context, fs *pflag.FlagSet, args []string, maxArgs int) error {
	if into, ok := ctx.Value(describeKey{}).(*pflag.FlagSet); ok {
		into.AddFlagSet(fs)
		return errDescribed
	}
	cmd, _ := ctx.Value(commandKey{}).(*cobra.Command)
	err := fs.Parse(args)
	if errors.Is(err, pflag.ErrHelp) {
		if cmd != nil {
			cmd.SetOut(cmd.OutOrStdout())
			_ = cmd.Help()
		}
		return errShown
	}
	if err != nil {
		return flagError(fs, err)
	}
	if fs.NArg() > maxArgs {
		if maxArgs == 0 {
			return fmt.Errorf("unexpected argument %q: %s takes flags only", fs.Arg(0), commandPath(fs))
		}
		return fmt.Errorf("unexpected argument %q: %s takes at most %d", fs.Arg(maxArgs), commandPath(fs), maxArgs)
	}
	return validateFlags(fs)
}

func commandPath(fs *pflag.FlagSet) string {
	return "minictl " + fs.Name()
}

// flagError is pflag's parse error in one line, with the flag the user
// probably meant.
func flagError(fs *pflag.FlagSet, err error) error {
	msg := err.Error()
	var name string
	switch {
	case strings.HasPrefix(msg, "unknown flag: --"):
		name = strings.TrimPrefix(msg, "unknown flag: --")
	case strings.HasPrefix(msg, "unknown shorthand flag: "):
		// -nodes: one dash, as Go's flag package took long flags.
		if i := strings.Index(msg, " in -"); i >= 0 {
			name = msg[i+len(" in -"):]
			msg = "unknown flag: -" + name
		}
	}
	if name != "" {
		name, _, _ = strings.Cut(name, "=")
		if fs.Lookup(name) != nil {
			return fmt.Errorf("%s: long flags take two dashes: --%s\nRun '%s --help' for usage.", msg, name, commandPath(fs))
		}
		if s := suggestFlag(fs, name); s != "" {
			return fmt.Errorf("%s (did you mean --%s?)\nRun '%s --help' for usage.", msg, s, commandPath(fs))
		}
	}
	return fmt.Errorf("%s\nRun '%s --help' for usage.", msg, commandPath(fs))
}

// suggestFlag is the flag of fs nearest to name, if one is near enough to
// be a typo of it.
func suggestFlag(fs *pflag.FlagSet, name string) string {
	best, bestDist := "", 1<<30
	fs.VisitAll(func(f *pflag.Flag) {
		d := editDistance(name, f.Name)
		if strings.HasPrefix(f.Name, name) || strings.HasPrefix(name, f.Name) {
			d = min(d, 2)
		}
		if d < bestDist || (d == bestDist && f.Name < best) {
			best, bestDist = f.Name, d
		}
	})
	if bestDist <= max(2, len(name)/4) {
		return best
	}
	return ""
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Flags whose values are checked beyond their type.
var (
	// addressFlags are host:port listen addresses ("" turns some off).
	addressFlags = map[string]bool{
		"listen": true, "secure-listen": true, "controller-manager-address": true,
		"cloud-controller-manager-address": true, "cloud-listen": true, "address": true,
	}
	// cidrFlags are IP ranges.
	cidrFlags = map[string]bool{"cluster-cidr": true, "lb-pool": true}
	// urlFlags are comma-separated http URLs.
	urlFlags = map[string]bool{
		"etcd-client-url": true, "etcd-endpoints": true, "listen-client-urls": true,
		"listen-peer-urls": true, "endpoints": true,
	}
)

// validateFlags checks the values of the flags given: counts are not
// negative, durations are positive (or 0 where 0 is the default, meaning
// none), addresses, ranges and URLs parse.
func validateFlags(fs *pflag.FlagSet) error {
	var errs []string
	fs.Visit(func(f *pflag.Flag) {
		if err := validateFlag(f); err != nil {
			errs = append(errs, fmt.Sprintf("invalid value %q for --%s: %v", f.Value.String(), f.Name, err))
		}
	})
	if len(errs) > 0 {
		sort.Strings(errs)
		return errors.New(errs[0])
	}
	return nil
}

func validateFlag(f *pflag.Flag) error {
	v := f.Value.String()
	switch f.Value.Type() {
	case "int", "int64", "int32":
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n < 0 {
			return errors.New("must be 0 or more")
		}
	case "float64":
		if n, err := strconv.ParseFloat(v, 64); err == nil && n < 0 {
			return errors.New("must be 0 or more")
		}
	case "duration":
		d, err := time.ParseDuration(v)
		if err != nil {
			return err
		}
		if d < 0 || (d == 0 && f.DefValue != "0s") {
			return errors.New("must be greater than 0")
		}
	}
	switch {
	case addressFlags[f.Name]:
		if v == "" && (f.Name == "listen" || f.Name == "secure-listen") {
			return nil
		}
		return checkAddress(v)
	case cidrFlags[f.Name]:
		if _, err := netip.ParsePrefix(v); err != nil {
			return errors.New("not an IP range such as 10.244.0.0/16")
		}
	case urlFlags[f.Name]:
		for _, s := range splitList(v) {
			u, err := url.Parse(s)
			if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
				return fmt.Errorf("%q is not a URL such as http://127.0.0.1:2379", s)
			}
			if err := checkAddress(u.Host); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkAddress checks a host:port address.
func checkAddress(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("not a host:port address such as 127.0.0.1:8080")
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("port %q is not a number from 0 to 65535", port)
	}
	return nil
}

// bindClientConfig declares the client's connection flags (--kubeconfig,
// --server, ...) on fs, and returns what resolves them once parsed.
func bindClientConfig(fs *pflag.FlagSet) func() (*client.Config, error) {
	var resolve func() (*client.Config, error)
	goFlags(fs, func(g *flag.FlagSet) { resolve = client.BindFlags(g) })
	return resolve
}
