package sim

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
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
		{"wrong header", strings.Replace(durHeader, "Minimum", "Min", 1) + "\n", "line 1: header has no column Minimum", 0},
		{"columns in another order, extra ignored", "Extra," + reorder(durHeader) + "\nx," + reorder(durRow) + "\n", "", 1},
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
		{"HashFunction first, as samples have it", "HashFunction," + memHeader + "\nf," + memRow + "\n", "", 1},
		{"HashFunction first, short row", "HashFunction," + memHeader + "\n" + memRow + "\n", "line 2: 12 columns, want 13", 0},
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
		{"memory is not durations", AzureFiles{Invocations: f.Invocations, Memory: f.Durations}, f.Durations + ": azure memory: line 1: header has no column SampleCount"},
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

// reorder swaps a row's first two and last two fields: the same columns
// in another order.
func reorder(row string) string {
	f := strings.Split(row, ",")
	n := len(f)
	f[0], f[1], f[n-2], f[n-1] = f[1], f[0], f[n-1], f[n-2]
	return strings.Join(f, ",")
}

// invocations builds an invocation file whose header numbers minutes
// first..last, with rows of counts i%5 for minute i.
func invocations(first, last int, header bool, rows int) string {
	var b strings.Builder
	if header {
		b.WriteString("HashOwner,HashApp,HashFunction,Trigger")
		for m := first; m <= last; m++ {
			fmt.Fprintf(&b, ",%d", m)
		}
		b.WriteString("\n")
	}
	for r := range rows {
		fmt.Fprintf(&b, "o,a,f%d,http", r)
		for m := first; m <= last; m++ {
			fmt.Fprintf(&b, ",%d", m%5)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func TestReadAzureCSVLayouts(t *testing.T) {
	for _, tc := range []struct {
		name, in, wantErr string
		wantFirst, wantN  int
	}{
		{"full day", invocations(1, 1440, true, 2), "", 1, 1440},
		{"a sample of minutes 480 to 959 (484 columns)", invocations(480, 959, true, 2), "", 480, 480},
		{"one minute", invocations(7, 7, true, 1), "", 7, 1},
		{"no header, a full day", invocations(1, 1440, false, 2), "", 1, 1440},
		{"no header, part of a day from minute 1", invocations(1, 30, false, 2), "", 1, 30},
		{"columns in another order", "Trigger,HashFunction,HashApp,HashOwner,10,11\nhttp,f,a,o,1,2\n", "", 10, 2},
		{"named extra column ignored", "HashOwner,HashApp,HashFunction,Trigger,Region,1,2\no,a,f,http,eu,3,4\n", "", 1, 2},
		{"gap in the minutes", "HashOwner,HashApp,HashFunction,Trigger,1,2,4\n", "", 0, 0},
		{"minutes out of order", "HashOwner,HashApp,HashFunction,Trigger,2,1\n", "", 0, 0},
		{"minute past the day", "HashOwner,HashApp,HashFunction,Trigger,1440,1441\n", "", 0, 0},
		{"minutes not adjacent", "HashOwner,HashApp,HashFunction,Trigger,1,x,2\n", "", 0, 0},
		{"no minute column", "HashOwner,HashApp,HashFunction,Trigger\n", "", 0, 0},
		{"missing named column", "HashOwner,HashApp,HashFunction,1\n", "", 0, 0},
		{"short row names its line", invocations(480, 959, true, 2) + "o,a,f,http,1\n", "line 4: 5 columns, want 484", 0, 0},
		{"bad count names line and minute", invocations(480, 482, true, 1) + "o,a,f,http,1,x,3\n", `line 3: minute 481: count "x"`, 0, 0},
		{"no header, too many minutes", invocations(1, 1441, false, 1), "line 1: 1445 columns", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.wantErr
			if tc.wantN == 0 && want == "" {
				want = "line 1: header"
			}
			fs, err := ReadAzureCSV(strings.NewReader(tc.in))
			if !wantError(t, err, want) {
				return
			}
			for _, f := range fs {
				if f.FirstMinute != tc.wantFirst || len(f.Counts) != tc.wantN {
					t.Fatalf("function %s: minutes %d..+%d, want %d..+%d", f.Function, f.FirstMinute, len(f.Counts), tc.wantFirst, tc.wantN)
				}
				if f.Counts[0] != float64(tc.wantFirst%5) && tc.name != "columns in another order" && tc.name != "named extra column ignored" {
					t.Errorf("function %s: first count %g, want %d", f.Function, f.Counts[0], tc.wantFirst%5)
				}
			}
		})
	}
}

// TestLoadAzureSample: the sample layout (minutes of part of the day, a
// HashFunction column first in the memory file) loads, and each rate mode
// keeps its promise.
func TestLoadAzureSample(t *testing.T) {
	f, err := WriteAzureSample(t.TempDir(), AzureSampleOptions{Functions: 60, FirstMinute: 480, Minutes: 120, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	ws, err := LoadAzure(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) < 20 {
		t.Fatalf("%d usable functions of 60", len(ws))
	}
	apps, _ := GenerateApps(1, len(ws))
	step := 15 * time.Second
	for i, w := range ws {
		if w.FirstMinute != 480 || len(w.Counts) != 120 || w.Measured.IdleMemory == 0 || w.Measured.Duration == 0 {
			t.Fatalf("%s: minutes %d..+%d, measured %+v", w.Function, w.FirstMinute, len(w.Counts), w.Measured)
		}
		if _, _, err := w.Run(apps[i], step, w.Windows(step)+1, 0, AzureRateScaled); err == nil {
			t.Fatalf("%s: a run past the file's minutes was not refused", w.Function)
		}
		for _, mode := range AzureRates() {
			t.Run(fmt.Sprintf("%s/%s", w.Function[:6], mode), func(t *testing.T) {
				app, tr, err := w.Run(apps[i], step, w.Windows(step), 0, mode)
				if err != nil {
					t.Fatal(err)
				}
				if len(tr.Rates) != 480 {
					t.Fatalf("%d windows, want 480", len(tr.Rates))
				}
				peak := slices.Max(tr.Rates)
				switch mode {
				case AzureRateRecorded:
					within(t, "mean", tr.Mean(), w.MeanRate(), 1e-9)
					within(t, "base rate", app.BaseRate, w.MeanRate(), 1e-9)
				case AzureRateScaled:
					if peak > PeakCapacity(app)*(1+1e-9) || tr.Mean() > app.BaseRate*(1+1e-9) {
						t.Errorf("peak %g above capacity %g, or mean %g above base %g", peak, PeakCapacity(app), tr.Mean(), app.BaseRate)
					}
				case AzureRateMean:
					within(t, "mean", tr.Mean(), app.BaseRate, 1e-9)
				}
				if err := app.Validate(); err != nil {
					t.Error(err)
				}
			})
		}
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
	app, tr, err := ws[0].Run(apps[0], 15*time.Second, 100, 50, AzureRateMean)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Rates) != 100 || app.CPUSeconds+app.IOWait != ws[0].Measured.Duration {
		t.Fatalf("%d rates, duration %g", len(tr.Rates), app.CPUSeconds+app.IOWait)
	}
	day, _ := ws[0].Trace(15*time.Second, app.BaseRate/ws[0].MeanRate())
	if tr.Rates[0] != day.Rates[50] || tr.Rates[99] != day.Rates[149] {
		t.Errorf("the run is not windows 50 to 149 of the day")
	}
	if _, _, err := ws[0].Run(apps[0], 15*time.Second, 100, 4*AzureMinutes-50, AzureRateMean); err == nil {
		t.Errorf("a run past the day's end wrapped around instead of being refused")
	}
	if s, err := New(Config{}, app, &tr, 1); err != nil {
		t.Fatal(err)
	} else {
		for range 100 {
			s.Step()
		}
	}
}

// TestWithRate: the initial replicas put the given rate at the app's drawn
// utilisation, within the constraints' bounds (none when MaxReplicas is 0).
func TestWithRate(t *testing.T) {
	apps, err := GenerateApps(2, 1)
	if err != nil {
		t.Fatal(err)
	}
	a := apps[0]
	perPod := a.sizing.rho * a.Limits.CPU / a.CPUSeconds // requests/s one pod carries
	unbounded := a
	unbounded.Constraints.MaxReplicas = 0
	for _, tc := range []struct {
		name string
		app  App
		rate float64
		want int32
	}{
		{"a tenth of a pod", a, perPod / 10, 1},
		{"seven pods", a, 6.5 * perPod, 7},
		{"past the most replicas", a, 100 * perPod, 30},
		{"no most replicas", unbounded, 100 * perPod, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.app.WithRate(tc.rate)
			if got.Replicas != tc.want || got.BaseRate != tc.rate {
				t.Errorf("replicas %d, base rate %g; want %d, %g", got.Replicas, got.BaseRate, tc.want, tc.rate)
			}
			if err := got.Validate(); err != nil {
				t.Error(err)
			}
		})
	}
}
