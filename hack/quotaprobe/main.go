// Command quotaprobe measures one replica of the test app (e2e/testapp)
// under a CFS CPU quota, outside Kubernetes, at constant Poisson rates,
// and sets its latency beside the simulator's CFS quota model
// (simside.QuotaP95) at the same quota, rate, node cores and measured CPU
// time per request. It separates what the app and the kernel do to the
// latency from what the rest of a node does: a background load of a given
// share of the cores, in random bursts, can run beside the app.
// docs/real-node-rounds.md, "The quota alone, off the cluster".
//
// It needs root and a cgroup cpu controller (v1 or v2); its traffic goes
// to loopback only, bounded by the cells' rates and durations. A cell is
// (CPU limit, utilisation of the limit, background cores); each cell
// starts a fresh replica in a cgroup of its own, sends the rate for a
// warm-up window and -duration, and stops it. The cells run in a fixed
// order, reversed every other repetition.
//
// Usage:
//
//	go build -o /tmp/testapp ./e2e/cmd/testapp
//	go run ./hack/quotaprobe -testapp /tmp/testapp [-limits 0.2,0.7] [-utilisations 0.1,0.4,0.65] [-background 0,0.4] [-duration 120s] [-reps 1] [-out DIR]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type options struct {
	testapp             string
	limits, utilisation []float64
	background          []float64
	cpu                 time.Duration
	duration, window    time.Duration
	reps                int
	perConnection       uint64
	out                 string
	cgroupRoot          string
	seed                uint64
	// report re-reports a cells.json with today's model instead of
	// measuring.
	report string
	// tick is the node's scheduler tick the model takes
	// (sim.Config.NodeTick).
	tick time.Duration
	// hogDuty runs this process as hogThreads background hogs instead
	// (internal).
	hogDuty    float64
	hogThreads int
}

func parseOptions(args []string) (options, error) {
	o := options{}
	fs := flag.NewFlagSet("quotaprobe", flag.ContinueOnError)
	fs.StringVar(&o.testapp, "testapp", "", "the test app's binary (go build -o BIN ./e2e/cmd/testapp), required")
	limits := fs.String("limits", "0.2,0.7", "the replica's CPU limits (cores), comma-separated: the CFS quota per 100-ms period")
	utils := fs.String("utilisations", "0.1,0.35,0.6", "the arrival rates as utilisations of the limit (rate = u·limit / the CPU per request measured first, the app's --cpu and its server's overhead), comma-separated, each in (0, 0.95]")
	bg := fs.String("background", "0,0.4", "background loads beside the app, in cores of busy loops in random bursts of ~10 ms (0: none), comma-separated, each below the node's cores")
	fs.DurationVar(&o.cpu, "cpu", 10*time.Millisecond, "the app's CPU time per request (its --cpu; bench-real's default)")
	fs.DurationVar(&o.duration, "duration", 120*time.Second, "how long each cell is measured, after a warm-up of one -window")
	fs.DurationVar(&o.window, "window", 15*time.Second, "the load generator's window: each window's p95 is one sample")
	fs.IntVar(&o.reps, "reps", 1, "repetitions of the grid, every other one in reverse order")
	fs.Uint64Var(&o.perConnection, "requests-per-connection", 1, "the load generator closes a connection after about this many requests (bench-real's default: 1)")
	fs.StringVar(&o.out, "out", "quotaprobe-out", "directory for cells.json, the load generator's records and the replicas' logs")
	fs.StringVar(&o.cgroupRoot, "cgroup-root", "/sys/fs/cgroup", "where the cgroup hierarchies are mounted")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the arrivals and the background's bursts")
	fs.StringVar(&o.report, "report", "", "print the cells of a cells.json again, beside this build's model, instead of measuring (no root needed)")
	fs.DurationVar(&o.tick, "tick", 0, "the node's scheduler tick the model takes (sim.Config.NodeTick: 4ms at CONFIG_HZ=250), at which the kernel finds a quota spent; 0 enforces it to the instant")
	fs.Float64Var(&o.hogDuty, "hog-duty", 0, "internal: run as background hogs busy this share of the time")
	fs.IntVar(&o.hogThreads, "hog-threads", 1, "internal: how many threads -hog-duty keeps busy")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	var errs []error
	var err error
	if o.limits, err = parseList(*limits, 0.01, 8); err != nil {
		errs = append(errs, fmt.Errorf("-limits: %w", err))
	}
	if o.utilisation, err = parseList(*utils, 0.001, 0.95); err != nil {
		errs = append(errs, fmt.Errorf("-utilisations: %w", err))
	}
	if o.background, err = parseList(*bg, 0, float64(runtime.NumCPU())-0.01); err != nil {
		errs = append(errs, fmt.Errorf("-background: %w", err))
	}
	if o.hogDuty != 0 {
		if !(o.hogDuty > 0 && o.hogDuty <= 1) || o.hogThreads < 1 || o.hogThreads > 64 {
			errs = append(errs, fmt.Errorf("-hog-duty %g must be in (0, 1] and -hog-threads %d in [1, 64]", o.hogDuty, o.hogThreads))
		}
		return o, errors.Join(errs...)
	}
	if o.testapp == "" && o.report == "" {
		errs = append(errs, errors.New("-testapp is required"))
	}
	if o.cpu < time.Millisecond || o.cpu > time.Second {
		errs = append(errs, fmt.Errorf("-cpu %s must be in [1ms, 1s]", o.cpu))
	}
	if o.window < time.Second || o.duration < 2*o.window || o.duration > 30*time.Minute {
		errs = append(errs, fmt.Errorf("-window %s must be >= 1s and -duration %s from two windows to 30m", o.window, o.duration))
	}
	if o.tick < 0 || o.tick > 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("-tick %s must be from 0 to the CFS period, 100ms", o.tick))
	}
	if o.reps < 1 || o.reps > 20 {
		errs = append(errs, fmt.Errorf("-reps %d must be in [1, 20]", o.reps))
	}
	return o, errors.Join(errs...)
}

// parseList reads comma-separated numbers, each in [lo, hi].
func parseList(s string, lo, hi float64) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", f, err)
		}
		if !(v >= lo && v <= hi) {
			return nil, fmt.Errorf("%g is outside [%g, %g]", v, lo, hi)
		}
		out = append(out, v)
	}
	return out, nil
}

// cell is one measured configuration.
type cell struct {
	Limit, Utilisation, Background float64
	Rep                            int
}

// cells lists the grid, background outermost so that its hogs start and
// stop least often, reversed on odd repetitions.
func cells(o options) []cell {
	var out []cell
	for rep := range o.reps {
		var grid []cell
		for _, b := range o.background {
			for _, l := range o.limits {
				for _, u := range o.utilisation {
					grid = append(grid, cell{Limit: l, Utilisation: u, Background: b, Rep: rep})
				}
			}
		}
		if rep%2 == 1 {
			for i, j := 0, len(grid)-1; i < j; i, j = i+1, j-1 {
				grid[i], grid[j] = grid[j], grid[i]
			}
		}
		out = append(out, grid...)
	}
	return out
}

// hogs splits a background of cores into busy-loop processes of at most
// one core each, all at the same duty.
func hogs(cores float64) (n int, duty float64) {
	if cores <= 0 {
		return 0, 0
	}
	n = int(math.Ceil(cores - 1e-9))
	return n, cores / float64(n)
}

// hog keeps one thread busy for a share duty of the time, in bursts and
// pauses drawn from exponentials (bursts of mean 10 ms), until ctx ends:
// a stand-in for the control plane's and other pods' CPU beside the app.
func hog(ctx context.Context, duty float64, seed uint64) {
	runtime.LockOSThread()
	rng := rand.New(rand.NewPCG(seed, 11))
	const burst = 10 * time.Millisecond
	pause := time.Duration(float64(burst) * (1 - duty) / duty)
	x := uint64(0x9e3779b97f4a7c15)
	for ctx.Err() == nil {
		end := time.Now().Add(time.Duration(rng.ExpFloat64() * float64(burst)))
		for time.Now().Before(end) {
			for range 1024 {
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
			}
		}
		if pause > 0 {
			time.Sleep(time.Duration(rng.ExpFloat64() * float64(pause)))
		}
	}
	sinkHog.Store(x)
}

var sinkHog atomic.Uint64

func main() {
	o, err := parseOptions(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "quotaprobe:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.hogDuty > 0 {
		runtime.GOMAXPROCS(o.hogThreads)
		var wg sync.WaitGroup
		for i := range o.hogThreads {
			wg.Go(func() { hog(ctx, o.hogDuty, o.seed+uint64(i)) })
		}
		wg.Wait()
		return
	}
	if o.report != "" {
		if err := report(o.report, o.tick, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "quotaprobe:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "quotaprobe:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, w io.Writer) error {
	if os.Geteuid() != 0 {
		return errors.New("making cgroups needs root")
	}
	root, v2, err := cpuRoot(o.cgroupRoot)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return fmt.Errorf("output: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this binary for the background: %w", err)
	}
	grid := cells(o)
	fmt.Fprintf(w, "quotaprobe: %d cells of %s (+ a %s warm-up), %s CPU per request, %d cores, cgroup v%d at %s\n",
		len(grid), o.duration, o.window, o.cpu, runtime.NumCPU(), map[bool]int{true: 2, false: 1}[v2], root)
	// What each limit lets a process use that would take every core.
	for _, l := range o.limits {
		cores, err := effectiveLimit(ctx, self, root, v2, l)
		if err != nil {
			return fmt.Errorf("limit %g: %w", l, err)
		}
		fmt.Fprintf(w, "limit %.2f: %d busy threads got %.3f cores (%.3fx the quota)\n", l, runtime.NumCPU(), cores, cores/l)
	}
	// The CPU a request takes, -cpu and the overhead of its connection,
	// HTTP and runtime, measured at a light load on a whole core: the
	// cells' rates are utilisations of it.
	calib := o
	calib.duration, calib.window = 20*time.Second, 5*time.Second
	cr, err := measure(ctx, calib, root, v2, 99, cell{Limit: 1, Utilisation: 0.1}, o.cpu.Seconds())
	if err != nil {
		return fmt.Errorf("the CPU per request: %w", err)
	}
	perRequest := cr.CPU.PerRequest
	fmt.Fprintf(w, "CPU per request at 0.1 of a core: %.2f ms (%.2f ms of it the app's --cpu)\n", 1e3*perRequest, 1e3*cr.CPU.BurnPerRequest)
	if !(perRequest >= o.cpu.Seconds()*0.9) {
		return fmt.Errorf("the CPU per request measured, %.2f ms, is below the app's --cpu %s", 1e3*perRequest, o.cpu)
	}
	var results []result
	var bg *background
	defer func() { bg.stop() }()
	for i, c := range grid {
		if bg == nil || bg.cores != c.Background {
			bg.stop()
			if bg, err = startBackground(self, c.Background, o.seed+uint64(i)); err != nil {
				return err
			}
		}
		r, err := measure(ctx, o, root, v2, i, c, perRequest)
		if err != nil {
			return fmt.Errorf("cell %d (limit %g, utilisation %g, background %g): %w", i, c.Limit, c.Utilisation, c.Background, err)
		}
		results = append(results, r)
		writeRow(w, r, i == 0)
	}
	b, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.out, "cells.json"), b, 0o644); err != nil {
		return fmt.Errorf("write cells: %w", err)
	}
	return writeSummary(w, results)
}
