// Command rl-agent is the AWARE reinforcement-learning agent: a gRPC service
// for the recommender, and offline training, evaluation and the demo on the
// built-in simulator; see package app.
package main

import (
	"os"

	"github.com/aware-k8s/aware/pkg/kube/cli"
	"github.com/aware-k8s/aware/rl-agent/app"
)

func main() {
	os.Exit(cli.Run(app.NewCommand()))
}
