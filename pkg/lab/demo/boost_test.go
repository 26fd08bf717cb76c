package demo

import (
	"testing"

	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/lab/eval"
	"github.com/aware-k8s/aware/pkg/lab/sim"
)

func TestStartupBoostOption(t *testing.T) {
	for _, tc := range []struct {
		b  StartupBoost
		ok bool
	}{
		{StartupBoost{}, true},
		{StartupBoost{Factor: 3, CPUShare: 0.75}, true},
		{StartupBoost{Factor: 0.5}, false},
		{StartupBoost{Factor: 2, CPUShare: 1.2}, false},
	} {
		if err := tc.b.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: Validate() = %v", tc.b, err)
		}
	}
	apps, err := sim.GenerateApps(1, 2)
	if err != nil {
		t.Fatal(err)
	}
	runs := []eval.Run{{App: apps[0]}, {App: apps[0]}}
	StartupBoost{}.apply(runs)
	if runs[0].App.StartupCPUShare != 0 || runs[0].App.Constraints.Containers[0].StartupBoost != nil {
		t.Fatal("the zero option changed an app")
	}
	StartupBoost{Factor: 3, CPUShare: 0.75}.apply(runs)
	for i, r := range runs {
		if b := r.App.Constraints.ContainerPolicy(r.App.Container).StartupBoost; b == nil || *b != (workload.CPUBoost{Factor: 3}) || r.App.StartupCPUShare != 0.75 {
			t.Errorf("run %d: boost %+v share %g", i, b, r.App.StartupCPUShare)
		}
	}
	if apps[0].Constraints.Containers[0].StartupBoost != nil {
		t.Error("the generated app's policies were changed in place")
	}
}
