package sim

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const (
	durHeader = "HashOwner,HashApp,HashFunction,Average,Count,Minimum,Maximum,percentile_Average_0,percentile_Average_1,percentile_Average_25,percentile_Average_50,percentile_Average_75,percentile_Average_99,percentile_Average_100"
	memHeader = "HashOwner,HashApp,SampleCount,AverageAllocatedMb,AverageAllocatedMb_pct1,AverageAllocatedMb_pct5,AverageAllocatedMb_pct25,AverageAllocatedMb_pct50,AverageAllocatedMb_pct75,AverageAllocatedMb_pct95,AverageAllocatedMb_pct99,AverageAllocatedMb_pct100"
	durRow    = "o,a,f,120,3000,10,900,10,20,80,100,150,600,900"
	memRow    = "o,a,500,180.5,120,130,150,170,190,220,250,300"
)

// wantError checks err against want (empty: no error); it reports whether
// the case goes on to check a result.
func wantError(t *testing.T, err error, want string) bool {
	t.Helper()
	if want != "" {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("error %v, want one containing %q", err, want)
		}
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

func TestReadAzureDurations(t *testing.T) {
	for _, tc := range []struct {
		name, in, wantErr string
		wantN             int
	}{
		{"header and row", durHeader + "\n" + durRow + "\n", "", 1},
		{"no header", durRow + "\n" + durRow + "\n", "", 2},
		{"wrong header", strings.Replace(durHeader, "Minimum", "Min", 1) + "\n", `line 1: header column 6 is "Min"`, 0},
		{"short row", durHeader + "\n" + durRow + "\no,a,f,1\n", "line 3: 4 columns, want 14", 0},
		{"empty function", durHeader + "\no,a,,1,1,1,1,1,1,1,1,1,1,1\n", "line 2: HashFunction is empty", 0},
		{"not a number", durHeader + "\no,a,f,x,1,1,1,1,1,1,1,1,1,1\n", `line 2: Average: value "x"`, 0},
		{"negative", durHeader + "\no,a,f,1,1,1,1,1,1,1,-1,1,1,1\n", `line 2: percentile_Average_50: value "-1"`, 0},
		{"NaN", durHeader + "\no,a,f,NaN,1,1,1,1,1,1,1,1,1,1\n", `line 2: Average: value "NaN"`, 0},
		{"percentiles out of order", durHeader + "\no,a,f,1,1,1,1,1,2,3,2,5,6,7\n", "line 2: duration percentiles decrease", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds, err := ReadAzureDurations(strings.NewReader(tc.in))
			if !wantError(t, err, tc.wantErr) {
				return
			}
			if len(ds) != tc.wantN {
				t.Fatalf("%d rows, want %d", len(ds), tc.wantN)
			}
			if d := ds[0]; d.Function != "f" || d.Average != 120 || d.Percentiles != [7]float64{10, 20, 80, 100, 150, 600, 900} {
				t.Errorf("row %+v", d)
			}
		})
	}
}

func TestReadAzureMemory(t *testing.T) {
	for _, tc := range []struct {
		name, in, wantErr string
		wantN             int
	}{
		{"header and row", memHeader + "\n" + memRow + "\n", "", 1},
		{"extra column", memHeader + "\n" + memRow + ",1\n", "line 2: 13 columns, want 12", 0},
		{"empty app", memHeader + "\no,,1,1,1,1,1,1,1,1,1,1\n", "line 2: HashApp is empty", 0},
		{"infinite", memHeader + "\no,a,1,Inf,1,1,1,1,1,1,1,1\n", `line 2: AverageAllocatedMb: value "Inf"`, 0},
		{"percentiles out of order", memHeader + "\no,a,1,1,5,4,4,4,4,4,4,4\n", "line 2: memory percentiles decrease", 0},
		{"bad quoting", memHeader + "\no,\"a,1\n", "line 2", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms, err := ReadAzureMemory(strings.NewReader(tc.in))
			if !wantError(t, err, tc.wantErr) {
				return
			}
			if len(ms) != tc.wantN || ms[0].App != "a" || ms[0].Percentiles[0] != 120 || ms[0].Percentiles[3] != 170 {
				t.Errorf("rows %+v", ms)
			}
		})
	}
}

// TestLoadAzure: the fixture loads, every workload is measured, and errors
// name the file and the line.
func TestLoadAzure(t *testing.T) {
	dir := t.TempDir()
	f, err := WriteAzureFixture(dir, 6, 1)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := LoadAzure(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 6 {
		t.Fatalf("%d workloads, want 6", len(ws))
	}
	for _, w := range ws {
		m := w.Measured
		if !(m.Duration >= 0.004 && m.Duration <= 2.1) || !(m.IdleMemory >= 60*mib) || !(m.TypicalMemory > m.IdleMemory) {
			t.Errorf("%s: measured %+v", w.Function, m)
		}
	}

	only := f
	only.Durations, only.Memory = "", ""
	if ws, err := LoadAzure(only); err != nil || len(ws) != 6 || ws[0].Measured != (Measured{}) {
		t.Errorf("invocations alone: %d workloads, %v", len(ws), err)
	}
	if ws, err := LoadAzure(AzureFiles{}); ws != nil || err != nil {
		t.Errorf("no files: %v, %v", ws, err)
	}

	bad := filepath.Join(dir, "bad.csv")
	if err := os.WriteFile(bad, []byte(durHeader+"\n"+durRow+"\no,a,f,1,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		files   AzureFiles
		wantErr string
	}{
		{"malformed durations", AzureFiles{Invocations: f.Invocations, Durations: bad}, bad + ": azure durations: line 3: 5 columns"},
		{"memory is not durations", AzureFiles{Invocations: f.Invocations, Memory: f.Durations}, f.Durations + ": azure memory: line 1: header has 14 columns"},
		{"missing file", AzureFiles{Invocations: filepath.Join(dir, "none.csv")}, "none.csv: no such file"},
		{"durations without invocations", AzureFiles{Durations: f.Durations}, "need the invocations file"},
		{"no function matches", AzureFiles{Invocations: f.Invocations, Durations: writeFile(t, dir, "d.csv", durHeader+"\n"+durRow+"\n")}, "no invoked function"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadAzure(tc.files)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestWithMeasured: the measured demand replaces the generated one and the
// deployment is sized by the same choices, so an app measured with its own
// demand is unchanged.
func TestWithMeasured(t *testing.T) {
	apps, err := GenerateApps(3, 20)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range apps {
		same := a.WithMeasured(Measured{Duration: a.CPUSeconds + a.IOWait})
		within(t, a.Name+" SLO", same.SLO, a.SLO, 1e-9)
		within(t, a.Name+" base rate", same.BaseRate, a.BaseRate, 1e-9)
		if same.Requests != a.Requests || same.Limits != a.Limits {
			t.Errorf("%s: resized by its own demand: %+v/%+v, want %+v/%+v", a.Name, same.Requests, same.Limits, a.Requests, a.Limits)
		}

		m := a.WithMeasured(Measured{Duration: 0.5, IdleMemory: 200 * mib, TypicalMemory: 300 * mib})
		within(t, a.Name+" duration", m.CPUSeconds+m.IOWait, 0.5, 1e-9)
		within(t, a.Name+" CPU share", m.CPUSeconds/0.5, a.CPUSeconds/(a.CPUSeconds+a.IOWait), 1e-9)
		if m.BaseMemory != 200*mib {
			t.Errorf("%s: base memory %g, want the idle 200 MiB", a.Name, m.BaseMemory)
		}
		// At the mean load a pod holds the typical memory (or more, with
		// the per-request floor).
		if ws := m.BaseMemory + m.MemoryPerRequest*math.Max(m.meanInFlight(), 1); ws < 300*mib-1 {
			t.Errorf("%s: working set at the mean load %g MiB, want >= 300", a.Name, ws/mib)
		}
		if err := m.Validate(); err != nil {
			t.Error(err)
		}
		// The initial deployment runs at the same utilisation, unless the
		// base rate is clamped to [0.5, 400].
		clamped := func(r float64) bool { return r == 0.5 || r == 400 }
		if clamped(a.BaseRate) || clamped(m.BaseRate) {
			continue
		}
		within(t, a.Name+" utilisation", m.BaseRate*m.CPUSeconds/(float64(m.Replicas)*m.Limits.CPU),
			a.BaseRate*a.CPUSeconds/(float64(a.Replicas)*a.Limits.CPU), 1e-9)
	}
}

func TestAzureWorkloadRun(t *testing.T) {
	f, err := WriteAzureFixture(t.TempDir(), 2, 4)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := LoadAzure(f)
	if err != nil {
		t.Fatal(err)
	}
	apps, _ := GenerateApps(1, 1)
	app, tr, err := ws[0].Run(apps[0], 15*time.Second, 100, 4*AzureMinutes-50)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Rates) != 100 || app.CPUSeconds+app.IOWait != ws[0].Measured.Duration {
		t.Fatalf("%d rates, duration %g", len(tr.Rates), app.CPUSeconds+app.IOWait)
	}
	// The window wraps around the day: window 50 is the day's first.
	day, _ := ws[0].Trace(15*time.Second, app.BaseRate/ws[0].MeanRate())
	if tr.Rates[50] != day.Rates[0] || tr.Rates[49] != day.Rates[len(day.Rates)-1] {
		t.Errorf("the trace does not wrap around the day")
	}
	if s, err := New(Config{}, app, &tr, 1); err != nil {
		t.Fatal(err)
	} else {
		for range 100 {
			s.Step()
		}
	}
}
