// Command soakjudge judges a recorded soak again from its report.json
// (which holds every sample and the restarts) and writes report.md,
// report.json and soak.svg anew, without a testbed; see package e2e/soak
// and docs/operations.md#soak.
//
//	go run ./e2e/cmd/soakjudge -in soak-out/report.json -out soak-rejudged
//
// It exits 1 if the soak fails the judgement, 2 if it cannot judge it.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/aware-k8s/aware/e2e/soak"
)

func main() {
	in := flag.String("in", "", "The recorded soak's report.json (required).")
	out := flag.String("out", "", "Directory for the new report.md, report.json and soak.svg (required; may be the record's own).")
	settle := flag.Float64("settle", soak.DefaultSettle, "Share of each segment between restarts, at its end, whose mean is its settled level.")
	warmup := flag.Duration("warmup", 0, "Warm-up after each restart for the within-segment slope, shown but not judged (0: the record's).")
	flag.Parse()
	pass, err := run(*in, *out, *settle, warmup.Seconds())
	if err != nil {
		fmt.Fprintln(os.Stderr, "soakjudge:", err)
		os.Exit(2)
	}
	if !pass {
		fmt.Fprintln(os.Stderr, "soakjudge: the soak fails the judgement:", filepath.Join(*out, "report.md"))
		os.Exit(1)
	}
}

func run(in, out string, settle, warmup float64) (bool, error) {
	if in == "" || out == "" {
		return false, errors.New("-in and -out are required")
	}
	// Read whole before any output is created: -out may be the record's
	// own directory, and report.json is rewritten there.
	b, err := os.ReadFile(in)
	if err != nil {
		return false, err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return false, err
	}
	var md, js, svg bytes.Buffer
	rep, err := soak.Rejudge(bytes.NewReader(b), soak.Outputs{Markdown: &md, JSON: &js, SVG: &svg}, settle, warmup)
	if err != nil {
		return false, err
	}
	for name, buf := range map[string]*bytes.Buffer{"report.md": &md, "report.json": &js, "soak.svg": &svg} {
		if err := os.WriteFile(filepath.Join(out, name), buf.Bytes(), 0o644); err != nil {
			return false, err
		}
	}
	os.Stdout.Write(md.Bytes())
	return rep.Pass, nil
}
