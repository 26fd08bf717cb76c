//go:build benchreal

package main

import (
	"math"
	"testing"
)

func TestMachineCPU(t *testing.T) {
	for _, tc := range []struct {
		name        string
		line        string
		busy, steal float64
	}{
		// user nice system idle iowait irq softirq steal guest guest_nice
		{"steal apart, idle and iowait out", "cpu  305423 10 96272 533955 1538 20 3560 69943 0 0", 4052.85, 699.43},
		{"guest already in user", "cpu  1000 0 0 500 0 0 0 0 400 100", 10, 0},
		{"an older kernel's shorter line", "cpu  100 0 100 900 0", 2, 0},
		{"not the cpu line", "cpu0 100 0 100 900 0 0 0 50", 0, 0},
		{"empty", "", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			busy, steal := machineCPU(tc.line)
			if math.Abs(busy-tc.busy) > 1e-9 || math.Abs(steal-tc.steal) > 1e-9 {
				t.Errorf("machineCPU(%q) = %v, %v; want %v, %v", tc.line, busy, steal, tc.busy, tc.steal)
			}
		})
	}
}
