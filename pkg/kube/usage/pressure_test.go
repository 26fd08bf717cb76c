package usage

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"
)

const pressureQ = `sum by (namespace, pod, container) (rate(container_pressure_cpu_waiting_seconds_total{pod=~".+", namespace="shop", container!="", container!="POD"}[2m]))`

func TestCPUPressure(t *testing.T) {
	web1 := ContainerKey{"shop", "web-1", "app"}
	for _, tc := range []struct {
		name    string
		answer  string // "" leaves the query unanswered: an empty vector
		want    map[ContainerKey]float64
		dropped Drops
	}{
		{"no series: not measured, no error", "", map[ContainerKey]float64{}, Drops{}},
		{"per container", vector(
			sample(`"namespace":"shop","pod":"web-1","container":"app"`, "0.3"),
			sample(`"namespace":"shop","pod":"web-1","container":"sidecar"`, "0"),
			sample(`"namespace":"shop","pod":"web-2","container":"app"`, "0.04"),
		), map[ContainerKey]float64{web1: 0.3, {"shop", "web-1", "sidecar"}: 0, {"shop", "web-2", "app"}: 0.04}, Drops{}},
		// rate() extrapolates to the window's edges; the share cannot
		// exceed the window.
		{"above 1 is clipped", vector(sample(`"namespace":"shop","pod":"web-1","container":"app"`, "1.07")),
			map[ContainerKey]float64{web1: 1}, Drops{}},
		{"invalid values are dropped and counted", vector(
			sample(`"namespace":"shop","pod":"web-1","container":"app"`, "NaN"),
			sample(`"namespace":"shop","pod":"web-2","container":"app"`, "-0.1"),
			sample(`"namespace":"shop","pod":"web-3","container":"app"`, "+Inf"),
			sample(`"namespace":"shop","pod":"web-4","container":"app"`, "0.2"),
		), map[ContainerKey]float64{{"shop", "web-4", "app"}: 0.2}, Drops{DropNaN: 1, DropNegative: 1, DropInfinite: 1}},
		{"series without pod or container are skipped", vector(
			sample(`"namespace":"shop","pod":"web-1"`, "0.5"),
			sample(`"namespace":"shop","container":"app"`, "0.5"),
		), map[ContainerKey]float64{}, Drops{}},
		{"two series of one container: the higher", vector(
			sample(`"namespace":"shop","pod":"web-1","container":"app"`, "0.1"),
			sample(`"namespace":"shop","pod":"web-1","container":"app"`, "0.2"),
		), map[ContainerKey]float64{web1: 0.2}, Drops{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeProm(t)
			if tc.answer != "" {
				f.set(pressureQ, tc.answer)
			}
			r, err := newProm(t, f.URL, Queries{}).CPUPressure(context.Background(), "shop")
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(r.Containers, tc.want) {
				t.Errorf("containers %v, want %v", r.Containers, tc.want)
			}
			if !mapsEqual(r.Dropped, tc.dropped) {
				t.Errorf("dropped %v, want %v", r.Dropped, tc.dropped)
			}
			if q := f.seen(); len(q) != 1 || q[0] != pressureQ {
				t.Errorf("queries %q, want one %q", q, pressureQ)
			}
		})
	}
}

func TestCPUPressureQueries(t *testing.T) {
	for _, tc := range []struct {
		name, namespace string
		queries         Queries
		want            string
	}{
		{"all namespaces", "", Queries{},
			`sum by (namespace, pod, container) (rate(container_pressure_cpu_waiting_seconds_total{pod=~".+", container!="", container!="POD"}[2m]))`},
		{"a custom template", "shop", Queries{CPUPressure: `max by (namespace, pod, container) (psi_cpu_some_ratio{namespace="{{.Namespace}}"})`},
			`max by (namespace, pod, container) (psi_cpu_some_ratio{namespace="shop"})`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeProm(t)
			f.set(tc.want, vector(sample(`"namespace":"shop","pod":"web-1","container":"app"`, "0.25")))
			r, err := newProm(t, f.URL, tc.queries).CPUPressure(context.Background(), tc.namespace)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Containers[ContainerKey{"shop", "web-1", "app"}]; got != 0.25 {
				t.Errorf("pressure %v, want 0.25 (queries %q)", got, f.seen())
			}
		})
	}
}

func TestCPUPressureFailures(t *testing.T) {
	t.Run("invalid namespace", func(t *testing.T) {
		f := newFakeProm(t)
		if _, err := newProm(t, f.URL, Queries{}).CPUPressure(context.Background(), `a"b`); err == nil {
			t.Error("an invalid namespace must be refused")
		}
		if q := f.seen(); len(q) != 0 {
			t.Errorf("queries %q sent for an invalid namespace", q)
		}
	})
	t.Run("Prometheus down", func(t *testing.T) {
		f := newFakeProm(t)
		addr := f.URL
		f.Close()
		obs := &countingObserver{got: map[string]int{}}
		p, err := NewPrometheus(PrometheusOptions{Address: addr, Timeout: time.Second, Window: 2 * time.Minute, Observer: obs})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.CPUPressure(context.Background(), "shop"); err == nil || !strings.Contains(err.Error(), "cpuPressure") {
			t.Errorf("error %v must name the query", err)
		}
		if n := obs.got["cpuPressure/error"]; n != 1 {
			t.Errorf("observer saw %v, want one cpuPressure error", obs.got)
		}
	})
	t.Run("a matrix answer", func(t *testing.T) {
		f := newFakeProm(t)
		f.set(pressureQ, `{"resultType":"matrix","result":[]}`)
		if _, err := newProm(t, f.URL, Queries{}).CPUPressure(context.Background(), "shop"); err == nil {
			t.Error("a matrix answer to an instant query must fail")
		}
	})
}
