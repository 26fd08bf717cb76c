package simside

import (
	"bytes"
	"encoding/xml"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/aware-k8s/aware/hack/benchreal/result"
	"github.com/aware-k8s/aware/pkg/lab/sim"
)

func TestWriteSideBySide(t *testing.T) {
	set := settings()
	real := replayAll(t, known(0.02, 48*sim.MiB, sim.MiB, 20, 0.005), set, 2)
	for _, tc := range []struct {
		name      string
		simulated []result.Run
		want      []string
		not       []string
	}{
		{"identical", real, []string{"0 of 4 policies miss", "(same)", "+0.0 [+0.0, +0.0]"}, []string{"  COST", "  SLO\n", "DIFFERENT"}},
		// Half the CPU per request: half the load, so cheaper and faster.
		{"a different app", replayAll(t, known(0.01, 48*sim.MiB, sim.MiB, 20, 0.005), set, 2), []string{"  COST", "policies miss"}, []string{"0 of 4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			if err := WriteSideBySide(&b, real, tc.simulated); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			for _, p := range policies {
				if !strings.Contains(out, "\n"+p+" ") {
					t.Errorf("no row for %s", p)
				}
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(out, w) {
					t.Errorf("output has %q:\n%s", w, out)
				}
			}
		})
	}
	t.Run("a real run without its twin", func(t *testing.T) {
		err := WriteSideBySide(io.Discard, real, real[:len(real)-1])
		if err == nil || !strings.Contains(err.Error(), "no simulated twin") {
			t.Fatalf("WriteSideBySide: %v", err)
		}
	})
}

func TestCompareFlagsAndRanking(t *testing.T) {
	w := []result.Window{{Start: 0, End: 15, Sent: 10, OK: 10, P95: 0.1, CPURequested: 1, MemoryRequested: sim.GiB, CPUUsed: 0.5, MemoryUsed: sim.GiB / 2}}
	run := func(p string, cpu, p95 float64) result.Run {
		ws := []result.Window{w[0]}
		ws[0].CPURequested, ws[0].P95 = cpu, p95
		return result.Run{Policy: p, SLO: 0.25, Window: 15, Windows: ws}
	}
	real := []result.Run{run("a", 1, 0.1), run("b", 1, 0.1), run("c", 1, 0.1)}
	simulated := []result.Run{
		run("a", 1.1, 0.1), // cost +~8%: within
		run("b", 1.3, 0.1), // cost beyond 15%
		run("c", 1, 0.3),   // every window violates
	}
	rows, err := Compare(real, simulated)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct{ cost, slo bool }{{false, false}, {true, false}, {false, true}} {
		if rows[i].CostOff != want.cost || rows[i].ViolationsOff != want.slo {
			t.Errorf("%s: cost off %v, SLO off %v; want %v, %v", rows[i].Policy, rows[i].CostOff, rows[i].ViolationsOff, want.cost, want.slo)
		}
	}
	// 0.3 cores more on a cost of 1 core and 1 GiB (1/7.5 of a core).
	if iv := rows[1].CostRel; iv.N != 1 || math.Abs(iv.Mean-0.3/(1+1/7.5)) > 1e-9 {
		t.Errorf("b's paired relative cost %+v, want +0.265 over one pair", iv)
	}
	if iv := rows[2].ViolationsDiff; iv.N != 1 || iv.Mean != 1 {
		t.Errorf("c's paired violations %+v, want +1 over one pair", iv)
	}
	// Real: all equal, by name. Simulated: a beats b (less over-allocation),
	// c's violations put it last.
	if got := strings.Join(Ranking(rows, func(r Row) Side { return r.Real }), ","); got != "a,b,c" {
		t.Errorf("real ranking %s", got)
	}
	if got := strings.Join(Ranking(rows, func(r Row) Side { return r.Simulated }), ","); got != "a,b,c" {
		t.Errorf("simulated ranking %s", got)
	}
}

func TestWriteSVG(t *testing.T) {
	cal := known(0.02, 48*sim.MiB, sim.MiB, 20, 0.005)
	real, err := Replay(cal, settings(), "hpa+vpa", 0)
	if err != nil {
		t.Fatal(err)
	}
	simulated, err := Replay(known(0.03, 48*sim.MiB, sim.MiB, 10, 0), settings(), "hpa+vpa", 0)
	if err != nil {
		t.Fatal(err)
	}
	real.Policy = "hpa+vpa <&>" // names are escaped
	var b bytes.Buffer
	if err := WriteSVG(&b, real, simulated); err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(bytes.NewReader(b.Bytes()))
	polylines := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
		if s, ok := tok.(xml.StartElement); ok && s.Name.Local == "polyline" {
			polylines++
		}
	}
	// Rate (trace, real, simulated), replicas, CPU and p95 (two each).
	if polylines != 9 {
		t.Errorf("%d polylines, want 9", polylines)
	}
	for _, want := range []string{"SLO 0.25 s", "Replicas", "Requested CPU", "hpa+vpa &lt;&amp;&gt;"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
	if err := WriteSVG(io.Discard, result.Run{}, simulated); err == nil {
		t.Error("an empty run plotted")
	}
}
