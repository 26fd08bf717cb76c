// Command testapp is the workload the real-node benchmark scales; see
// package e2e/testapp.
package main

import (
	"os"

	"github.com/aware-k8s/aware/e2e/testapp"
	"github.com/aware-k8s/aware/pkg/kube/cli"
)

func main() {
	os.Exit(cli.Run(testapp.NewCommand()))
}
