//go:build benchreal

package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/aware-k8s/aware/hack/benchreal/result"
)

// mergeInput splits a --merge entry, FILE or FILE@POLICY[@POLICY...],
// into the file and the policies whose runs to keep from it (none: all).
// It lets one report pair a new invocation's runs of one policy with an
// older invocation's runs of another, without the older file's runs of the
// first. "@" separates because policy names hold "+", ":", "/" and "=".
func mergeInput(arg string) (path string, keep []string, err error) {
	parts := strings.Split(arg, "@")
	if parts[0] == "" {
		return "", nil, fmt.Errorf("--merge %q: no file before @", arg)
	}
	for _, p := range parts[1:] {
		if p == "" {
			return "", nil, fmt.Errorf("--merge %q: an empty policy after @ (FILE@POLICY@POLICY)", arg)
		}
	}
	return parts[0], parts[1:], nil
}

// keepPolicies returns the runs of the policies in keep (all runs when
// keep is empty), and an error naming a policy of keep with no run: a
// typo would otherwise leave a side of the comparison silently empty.
func keepPolicies(runs []result.Run, keep []string) ([]result.Run, error) {
	if len(keep) == 0 {
		return runs, nil
	}
	var out []result.Run
	for _, r := range runs {
		if slices.Contains(keep, r.Policy) {
			out = append(out, r)
		}
	}
	for _, p := range keep {
		if !slices.ContainsFunc(out, func(r result.Run) bool { return r.Policy == p }) {
			return nil, fmt.Errorf("no run of policy %q", p)
		}
	}
	return out, nil
}
