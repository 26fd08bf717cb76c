package controller

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	kubeinformers "k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/aware-k8s/aware/pkg/core/fusion"
	"github.com/aware-k8s/aware/pkg/generated/clientset/versioned/fake"
	mpainformers "github.com/aware-k8s/aware/pkg/generated/informers/externalversions"
)

// BenchmarkLoop is one recommender loop over many autoscalers from
// informer caches (filled directly), with a fake metrics source and no API
// writes (queued statuses are not written). The target is 10,000
// autoscalers and 100,000 pods in under 2 s of CPU and 1 GiB RSS; run
//
//	go test ./recommender/controller -run '^$' -bench Loop -benchtime 5x
//
// The heap figure is reported as heap-MiB (live heap after a GC, caches
// and models included).
func BenchmarkLoop(b *testing.B) {
	for _, sc := range []struct{ mpas, podsPer, namespaces int }{
		{100, 1, 1}, // make bench-vpa's smallest scale: one-pod targets in one namespace
		{1000, 10, 10},
		{10000, 10, 100},
	} {
		b.Run(fmt.Sprintf("mpas=%d/pods=%d", sc.mpas, sc.mpas*sc.podsPer), func(b *testing.B) {
			benchLoop(b, sc.mpas, sc.podsPer, sc.namespaces)
		})
	}
}

func benchLoop(b *testing.B, nMPA, podsPer, nNS int) {
	klog.SetLogger(klog.Background().V(10)) // keep the benchmark output clean
	clk := testingclock.NewFakeClock(t0)
	mpaInf := mpainformers.NewSharedInformerFactory(fake.NewSimpleClientset(), 0)
	kubeInf := kubeinformers.NewSharedInformerFactory(k8sfake.NewClientset(), 0)
	src := &fakeUsage{}
	c, err := New(Config{Interval: time.Minute, StatusRefreshInterval: 5 * time.Minute, CheckpointInterval: 24 * time.Hour, LowConfidenceDays: 1},
		Deps{
			Client:             fake.NewSimpleClientset(),
			MPAInformer:        mpaInf.Autoscaling().V1alpha1().MultidimPodAutoscalers(),
			CheckpointInformer: mpaInf.Autoscaling().V1alpha1().MultidimPodAutoscalerCheckpoints(),
			PodInformer:        kubeInf.Core().V1().Pods(),
			Targets:            &fakeTargets{fixed: int32(podsPer)},
			Usage:              src,
			NewPolicy:          fusion.NewPolicyFactory(fusion.Options{}),
			Recorder:           record.NewFakeRecorder(1),
			Clock:              clk,
			Registerer:         prometheus.NewRegistry(),
		})
	if err != nil {
		b.Fatal(err)
	}
	mpaIdx := mpaInf.Autoscaling().V1alpha1().MultidimPodAutoscalers().Informer().GetIndexer()
	podIdx := kubeInf.Core().V1().Pods().Informer().GetIndexer()
	for i := range nMPA {
		ns := fmt.Sprintf("ns-%d", i%nNS)
		name := fmt.Sprintf("app-%d", i)
		if err := mpaIdx.Add(newMPA(ns, name)); err != nil {
			b.Fatal(err)
		}
		for j := range podsPer {
			pod := fmt.Sprintf("%s-%d", name, j)
			p, _ := TrimPod(newPod(ns, name, pod, true))
			if err := podIdx.Add(p); err != nil {
				b.Fatal(err)
			}
			src.pods = append(src.pods, podUsage(ns, pod, 0.2+float64(j)/100, float64(200+j)*(1<<20)))
		}
	}
	ctx := context.Background()
	c.RunOnce(ctx) // creates the models
	drain(c)
	b.ResetTimer()
	var cpu time.Duration
	for range b.N {
		clk.Step(time.Minute)
		before := cpuTime()
		c.RunOnce(ctx)
		cpu += cpuTime() - before
		b.StopTimer()
		drain(c)
		b.StartTimer()
	}
	b.StopTimer()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/loop")
	b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "heap-MiB")
	runtime.KeepAlive(c)
}

// drain drops queued statuses: the benchmark measures the loop, not the
// fake API server.
func drain(c *Controller) {
	for c.writes.queue.Len() > 0 {
		k, _ := c.writes.queue.Get()
		c.writes.queue.Forget(k)
		c.writes.queue.Done(k)
	}
	c.writes.mu.Lock()
	clear(c.writes.pending)
	c.writes.mu.Unlock()
}
