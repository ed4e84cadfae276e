package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/minictl/minictl/apiserver"
)

// version and commit are set when a release is built (make dist):
//
//	-ldflags "-X main.version=v0.3.0 -X main.commit=abc1234"
//
// Without them they come from the build information Go records: the
// module version `go install ...@v0.3.0` built, and the VCS revision of a
// build in a git checkout.
var (
	version = ""
	commit  = ""
)

// buildVersion is minictl's version and commit, "(devel)" and "unknown"
// where nothing says.
func buildVersion() (string, string) {
	v, c := version, commit
	if info, ok := debug.ReadBuildInfo(); ok {
		if v == "" && info.Main.Version != "" {
			v = info.Main.Version
		}
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && c == "" {
				c = s.Value
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	if c == "" {
		c = "unknown"
	}
	if len(c) > 12 {
		c = c[:12]
	}
	return v, c
}

// runVersion is `minictl version`.
func runVersion(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("version")
	short := fs.Bool("short", false, "print minictl's version only")
	if err := parseFlags(ctx, fs, args); err != nil {
		return err
	}
	v, c := buildVersion()
	if *short {
		_, err := fmt.Fprintln(stdout, v)
		return err
	}
	_, err := fmt.Fprintf(stdout, "minictl version: %s\ncommit: %s\nKubernetes API: %s\nGo: %s %s/%s\n",
		v, c, apiserver.KubernetesVersion, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return err
}
