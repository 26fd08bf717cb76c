package sim

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestReadRateCSV(t *testing.T) {
	for _, tc := range []struct {
		name, in, wantErr string
		interval          time.Duration
		rates             []float64
	}{
		{"seconds, rates", "0,1\n60,2\n120,3\n", "", time.Minute, []float64{1, 2, 3}},
		{"header, rates", "time,rate\n0,1\n60,2\n", "", time.Minute, []float64{1, 2}},
		{"header, counts per interval", "time,count\n0,60\n60,120\n", "", time.Minute, []float64{1, 2}},
		{"RFC 3339", "2024-05-01T10:00:00Z,4\n2024-05-01T10:00:30Z,5\n2024-05-01T10:01:00+00:00,6\n", "", 30 * time.Second, []float64{4, 5, 6}},
		{"date and time", "2024-05-01 10:00:00,4\n2024-05-01 10:05:00,5\n", "", 5 * time.Minute, []float64{4, 5}},
		{"fractional seconds", "0.5,1\n1.0,1\n1.5,1\n", "", 500 * time.Millisecond, []float64{1, 1, 1}},
		{"comments and quoting", "# exported\n\"time\",\"rate\"\n0,1\n10,2\n", "", 10 * time.Second, []float64{1, 2}},
		{"uneven spacing", "0,1\n60,1\n180,1\n", "line 3: 120s after line 2, but the rows before are 60s apart", 0, nil},
		{"mixed formats", "0,1\n2024-05-01 10:00:00,1\n", "line 2: time \"2024-05-01 10:00:00\" is in YYYY-MM-DD HH:MM:SS, the first row's in seconds from the start", 0, nil},
		{"time goes back", "60,1\n0,1\n", "line 2: time \"0\" is not after line 1's", 0, nil},
		{"bad time", "noon,1\n", "line 1: time \"noon\" is neither", 0, nil},
		{"negative rate", "0,1\n60,-1\n", `line 2: value "-1"`, 0, nil},
		{"NaN rate", "time,rate\n0,NaN\n", `line 2: value "NaN"`, 0, nil},
		{"three columns", "0,1,2\n", "line 1: 3 columns, want 2", 0, nil},
		{"one row", "time,rate\n0,1\n", "1 rows: a series needs two at least", 0, nil},
		{"empty", "", "0 rows", 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ReadRateCSV(strings.NewReader(tc.in))
			if !wantError(t, err, tc.wantErr) {
				return
			}
			if s.Interval != tc.interval || len(s.Rates) != len(tc.rates) {
				t.Fatalf("interval %s, rates %v; want %s, %v", s.Interval, s.Rates, tc.interval, tc.rates)
			}
			for i := range s.Rates {
				within(t, "rate", s.Rates[i], tc.rates[i], 1e-12)
			}
		})
	}
}

// TestResample: windows shorter than the interval hold its rate, longer
// ones average the intervals they cover by time, and the requests of the
// whole windows are kept.
func TestResample(t *testing.T) {
	s := RateSeries{Interval: time.Minute, Rates: []float64{1, 3, 5, 7}}
	for _, tc := range []struct {
		name string
		step time.Duration
		want []float64
	}{
		{"shorter", 30 * time.Second, []float64{1, 1, 3, 3, 5, 5, 7, 7}},
		{"equal", time.Minute, []float64{1, 3, 5, 7}},
		{"two intervals", 2 * time.Minute, []float64{2, 6}},
		{"straddling", 90 * time.Second, []float64{(1*60 + 3*30) / 90.0, (3*30 + 5*60) / 90.0}},
		{"longer than the series", time.Hour, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := s.Resample(tc.step)
			if len(got) != len(tc.want) {
				t.Fatalf("%v, want %v", got, tc.want)
			}
			for i := range got {
				within(t, "window", got[i], tc.want[i], 1e-12)
			}
		})
	}
}

func TestSeriesRun(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rates.csv")
	if err := os.WriteFile(path, []byte("time,rate\n0,2\n60,4\n120,6\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := SeriesFile{Path: path, CPUSeconds: 0.05, BaseMemory: 100 * mib}
	w, err := f.Load(15 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	apps, _ := GenerateApps(1, 1)
	app, tr, err := w.Run(apps[0], 12, 0)
	if err != nil {
		t.Fatal(err)
	}
	if app.CPUSeconds != 0.05 || app.BaseMemory != 100*mib || app.IOWait != apps[0].IOWait {
		t.Errorf("demand %g s CPU, %g s I/O, %g MiB", app.CPUSeconds, app.IOWait, app.BaseMemory/mib)
	}
	within(t, "base rate", app.BaseRate, 4, 1e-12)
	if len(tr.Rates) != 12 || tr.Rates[0] != 2 || tr.Rates[11] != 6 {
		t.Errorf("rates %v", tr.Rates)
	}
	if err := app.Validate(); err != nil {
		t.Error(err)
	}
	if _, _, err := w.Run(apps[0], 13, 0); err == nil || !strings.Contains(err.Error(), "covers 12 windows") {
		t.Errorf("a run past the series: %v", err)
	}
	for _, tc := range []struct {
		name    string
		f       SeriesFile
		wantErr string
	}{
		{"missing file", SeriesFile{Path: filepath.Join(dir, "none.csv")}, "none.csv"},
		{"malformed file names file and line", SeriesFile{Path: writeFile(t, dir, "bad.csv", "0,1\n60,x\n")}, "bad.csv: rate series: line 2"},
		{"demand without a file", SeriesFile{CPUSeconds: 1}, "no series file"},
		{"negative demand", SeriesFile{Path: path, IOWait: -1}, "I/O wait"},
		{"no requests", SeriesFile{Path: writeFile(t, dir, "zero.csv", "0,0\n60,0\n")}, "no requests"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.f.Load(15 * time.Second); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// FuzzReadRateCSV: arbitrary bytes never panic; an accepted series has a
// positive interval and finite non-negative rates, and resampling it to
// its own interval gives it back.
func FuzzReadRateCSV(f *testing.F) {
	for _, s := range []string{"0,1\n60,2\n", "time,count\n2024-05-01T10:00:00Z,4\n2024-05-01T10:00:30Z,5\n", "2024-05-01 10:00:00,4\n2024-05-01 10:05:00,5\n", "0,1\n60,1\n180,1\n", "# c\n\"a\",\"b\"\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ReadRateCSV(strings.NewReader(string(data)))
		if err != nil {
			return
		}
		if s.Interval <= 0 || len(s.Rates) < 2 {
			t.Fatalf("accepted interval %s with %d rates", s.Interval, len(s.Rates))
		}
		for _, r := range s.Rates {
			if !(r >= 0) || math.IsInf(r, 0) {
				t.Fatalf("accepted rate %g", r)
			}
		}
		if s.Interval < time.Millisecond || len(s.Rates) > 1000 {
			return
		}
		got := s.Resample(s.Interval)
		if len(got) != len(s.Rates) {
			t.Fatalf("resampled to its interval: %d windows, want %d", len(got), len(s.Rates))
		}
	})
}
