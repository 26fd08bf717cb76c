// Command emulator runs the workload emulator (package e2e/emulator) against
// a real API server: it drives the KWOK usage annotations of one workload's
// pods from the simulator's per-pod model under a synthetic load trace, and
// serves the workload's request metrics for Prometheus.
//
//	go run ./e2e/cmd/emulator --kubeconfig "$KUBECONFIG" --namespace demo --selector app=hamster \
//	    --trace step-change --mean 40 --steps 120 --trace-step 5s
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/aware-k8s/aware/e2e/emulator"
	"github.com/aware-k8s/aware/pkg/lab/sim"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "emulator:", err)
		os.Exit(1)
	}
}

func run() error {
	defAddr := os.Getenv("AWARE_EMULATOR_ADDR")
	if defAddr == "" {
		defAddr = "127.0.0.1:9400"
	}
	var (
		kubeconfig = flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the API server")
		namespace  = flag.String("namespace", "default", "namespace of the workload's pods")
		selector   = flag.String("selector", "", "label selector of the workload's pods (required)")
		addr       = flag.String("listen", defAddr, "loopback address to serve /metrics on")
		kind       = flag.String("trace", string(sim.Steady), "trace shape: steady, diurnal, bursty, ramp, flash-crowd, step-change")
		mean       = flag.Float64("mean", 10, "mean total request rate (requests/s)")
		steps      = flag.Int("steps", 360, "trace windows (the last rate holds afterwards)")
		traceStep  = flag.Duration("trace-step", 10*time.Second, "length of a trace window")
		seed       = flag.Uint64("seed", 1, "seed of the trace and the model noise")
		tick       = flag.Duration("tick", time.Second, "model window and publishing period")
		container  = flag.String("container", "", "serving container (default: each pod's first)")
		cpuSeconds = flag.Float64("cpu-seconds", 0.01, "CPU time per request (core-seconds)")
		ioWait     = flag.Float64("io-wait", 0.005, "non-CPU time per request (seconds)")
		baseMem    = flag.Float64("base-memory", 64<<20, "working set of an idle pod (bytes)")
		perReqMem  = flag.Float64("memory-per-request", 1<<20, "memory each in-flight request holds (bytes)")
		startup    = flag.Duration("startup-delay", 0, "time after Ready before a pod gets traffic")
	)
	flag.Parse()
	sel, err := labels.Parse(*selector)
	if err != nil {
		return fmt.Errorf("--selector: %w", err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	trace, err := sim.GenerateTrace(sim.TraceKind(*kind), sim.TraceOptions{Mean: *mean, Steps: *steps, Step: *traceStep, Seed: *seed})
	if err != nil {
		return err
	}
	em, err := emulator.New(client, emulator.Config{
		Namespace: *namespace, Selector: sel, Trace: trace, Tick: *tick, Seed: *seed,
		App: sim.App{Name: *namespace + "/" + *selector, Container: *container, StartupDelay: *startup,
			Demand: sim.Demand{
				CPUSeconds:       *cpuSeconds,
				IOWait:           *ioWait,
				BaseMemory:       *baseMem,
				MemoryPerRequest: *perReqMem,
			},
		},
	})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	served, err := emulator.Serve(ctx, *addr, em)
	if err != nil {
		return err
	}
	if err := em.Run(ctx); err != nil {
		return err
	}
	return <-served
}
