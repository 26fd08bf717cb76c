// Command loadgen sends the real-node benchmark's load; see package
// e2e/loadgen.
package main

import (
	"os"

	"github.com/aware-k8s/aware/e2e/loadgen"
	"github.com/aware-k8s/aware/pkg/kube/cli"
)

func main() {
	os.Exit(cli.Run(loadgen.NewCommand()))
}
