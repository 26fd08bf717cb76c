package loadgen

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aware-k8s/aware/pkg/lab/sim"
)

func TestReadSeries(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		want    Series
		wantErr string
	}{
		{"seconds with a header and a comment", "time,rate\n# warm-up\n0,5\n30,10.5\n\n90,0\n",
			Series{Starts: []time.Duration{0, 30 * time.Second, 90 * time.Second}, Rates: []float64{5, 10.5, 0}}, ""},
		{"RFC 3339 times are offsets from the first", "2026-11-28T10:00:00Z,4\n2026-11-28T10:00:15Z,8\n2026-11-28T10:01:00.5Z,2\n",
			Series{Starts: []time.Duration{0, 15 * time.Second, 60500 * time.Millisecond}, Rates: []float64{4, 8, 2}}, ""},
		{"a late start", "10,3\n", Series{Starts: []time.Duration{10 * time.Second}, Rates: []float64{3}}, ""},
		{"bad rate", "0,5\n15,fast\n", Series{}, "rates.csv:2: rate \"fast\""},
		{"negative rate", "0,-1\n", Series{}, "rates.csv:1: rate \"-1\""},
		{"infinite rate", "0,Inf\n", Series{}, "rates.csv:1: rate"},
		{"time not increasing", "0,1\n15,2\n15,3\n", Series{}, "rates.csv:3: time \"15\" is not after"},
		{"bad time after the first row", "0,1\nsoon,2\n", Series{}, "rates.csv:2: time \"soon\""},
		{"two headers", "time,rate\nt,r\n", Series{}, "rates.csv:2: time \"t\""},
		{"mixed forms", "0,1\n2026-11-28T10:00:00Z,2\n", Series{}, "rates.csv:2: time \"2026-11-28T10:00:00Z\" is in another form"},
		{"negative seconds", "-5,1\n", Series{}, "rates.csv:1: time \"-5\" must be in"},
		{"NaN seconds", "NaN,1\n", Series{}, "rates.csv:1: time \"NaN\""},
		{"three fields", "0,1,2\n", Series{}, "rates.csv:1: 3 fields"},
		{"no rows", "time,rate\n", Series{}, "rates.csv: no rows"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadSeries(strings.NewReader(tc.in), "rates.csv")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Starts, tc.want.Starts) || !slices.Equal(got.Rates, tc.want.Rates) {
				t.Errorf("series %+v, want %+v", got, tc.want)
			}
			if err := got.Validate(); err != nil {
				t.Error(err)
			}
		})
	}
}

func FuzzReadSeries(f *testing.F) {
	f.Add("time,rate\n0,5\n30,10\n")
	f.Add("2026-11-28T10:00:00Z,4\n2026-11-28T10:00:15Z,8\n")
	f.Add("0,1\n\"x\n")
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ReadSeries(strings.NewReader(in), "f.csv")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.csv") {
				t.Errorf("error %q does not name the file", err)
			}
			return
		}
		if err := s.Validate(); err != nil {
			t.Errorf("accepted a series that is not valid: %v", err)
		}
	})
}

func TestSeriesRateAndExpected(t *testing.T) {
	s := Series{Starts: []time.Duration{10 * time.Second, 20 * time.Second}, Rates: []float64{2, 5}}
	for _, tc := range []struct {
		name     string
		from, to time.Duration
		rate     float64 // at from
		expected float64
	}{
		{"before the first start", 0, 10 * time.Second, 0, 0},
		{"across a change", 15 * time.Second, 25 * time.Second, 2, 5*2 + 5*5},
		{"past the end the last rate holds", time.Hour, time.Hour + 2*time.Second, 5, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := s.Rate(tc.from); got != tc.rate {
				t.Errorf("rate %g, want %g", got, tc.rate)
			}
			if got := s.Expected(tc.from, tc.to); math.Abs(got-tc.expected) > 1e-9 {
				t.Errorf("expected %g arrivals, want %g", got, tc.expected)
			}
		})
	}
}

func TestTraceSeries(t *testing.T) {
	for _, k := range sim.TraceKinds() {
		t.Run(string(k), func(t *testing.T) {
			s, err := TraceSeries(k, 20, 10*time.Minute, 15*time.Second, 3)
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Starts) != 40 || s.Starts[1] != 15*time.Second {
				t.Errorf("%d windows starting %v..., want 40 of 15s", len(s.Starts), s.Starts[:2])
			}
			if err := s.Validate(); err != nil {
				t.Error(err)
			}
		})
	}
}
