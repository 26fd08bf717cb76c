// Command recommender is the AWARE recommender; see package app.
package main

import (
	"os"

	"github.com/aware-k8s/aware/pkg/kube/cli"
	"github.com/aware-k8s/aware/recommender/app"
)

func main() {
	os.Exit(cli.Run(app.NewCommand()))
}
