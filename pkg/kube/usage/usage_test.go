package usage

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	metricsapi "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"
)

func TestMetricsAPI(t *testing.T) {
	ts := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := metricsfake.NewSimpleClientset()
	c.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, &metricsapi.PodMetricsList{Items: []metricsapi.PodMetrics{{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"},
			Timestamp:  metav1.NewTime(ts),
			Window:     metav1.Duration{Duration: 30 * time.Second},
			Containers: []metricsapi.ContainerMetrics{{
				Name: "app",
				Usage: corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse("250m"),
					corev1.ResourceMemory: resource.MustParse("-1Mi"), // passed through, not fixed
				},
			}},
		}}}, nil
	})
	got, err := NewMetricsAPI(c.MetricsV1beta1()).PodUsage(context.Background(), "ns")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != "p" || got[0].Window != 30*time.Second || !got[0].Timestamp.Equal(ts) {
		t.Fatalf("got %+v", got)
	}
	cu := got[0].Containers[0]
	if cu.Name != "app" || cu.CPU != 0.25 || cu.Memory != -1<<20 {
		t.Fatalf("container usage %+v", cu)
	}
}

func TestMetricsAPIError(t *testing.T) {
	c := metricsfake.NewSimpleClientset()
	boom := errors.New("service unavailable")
	c.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, boom })
	_, err := NewMetricsAPI(c.MetricsV1beta1()).PodUsage(context.Background(), "")
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "metrics.k8s.io") {
		t.Fatalf("error %v must wrap the cause and name the source", err)
	}
}
