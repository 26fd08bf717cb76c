// Command admission-controller is the AWARE admission-controller; see package app.
package main

import (
	"os"

	"github.com/aware-k8s/aware/admission-controller/app"
	"github.com/aware-k8s/aware/pkg/kube/cli"
)

func main() {
	os.Exit(cli.Run(app.NewCommand()))
}
