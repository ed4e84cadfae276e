// Command kubectl is the real, unmodified kubectl, built from
// k8s.io/kubectl at the release minictl's wire types come from, so that
// the compatibility tests drive exactly what users run.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
)

func main() {
	command := cmd.NewDefaultKubectlCommand()
	os.Exit(cli.Run(command))
}
