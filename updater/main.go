// Command updater is the AWARE updater; see package app.
package main

import (
	"os"

	"github.com/aware-k8s/aware/pkg/kube/cli"
	"github.com/aware-k8s/aware/updater/app"
)

func main() {
	os.Exit(cli.Run(app.NewCommand()))
}
