package eval

import (
	"bytes"
	"context"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// reportBytes is everything a report writes, and the runs it kept.
func reportBytes(t *testing.T, rep *Report) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteTimeSeriesSVG(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestStreamEqualsEvaluate: runs added in any order, from several
// goroutines, while the workers already simulate the first ones, give the
// report Evaluate gives for the runs in key order, kept series included.
func TestStreamEqualsEvaluate(t *testing.T) {
	runs := testRuns(t, 9, 200)
	keep := func(i int) bool { return i%4 == 1 }
	o := Options{Workers: 3, SeriesRun: 2, KeepSeries: keep}
	want, err := Evaluate(context.Background(), runs, contenders(), o)
	if err != nil {
		t.Fatal(err)
	}
	for _, adders := range []int{1, 4} {
		s, err := NewStream(context.Background(), contenders(), o)
		if err != nil {
			t.Fatal(err)
		}
		order := rand.New(rand.NewPCG(uint64(adders), 0)).Perm(len(runs))
		var wg sync.WaitGroup
		for a := range adders {
			wg.Go(func() {
				for j := a; j < len(order); j += adders {
					if err := s.Add(order[j], runs[order[j]]); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		got, err := s.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(reportBytes(t, got), reportBytes(t, want)) {
			t.Errorf("%d adders: the stream's report differs from Evaluate's", adders)
		}
		if !reflect.DeepEqual(got.RunSeries, want.RunSeries) {
			t.Errorf("%d adders: kept series differ", adders)
		}
	}
}

// TestStreamRefuses: what Add refuses, and that a refused run leaves the
// others' report as it was.
func TestStreamRefuses(t *testing.T) {
	runs := testRuns(t, 2, 40)
	s, err := NewStream(context.Background(), contenders(), Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Add(0, runs[0]); err != nil {
		t.Fatal(err)
	}
	empty := runs[1]
	empty.Trace = nil
	negative := runs[1]
	negative.Nodes = -1
	for _, tc := range []struct {
		name    string
		key     int
		run     Run
		wantErr string
	}{
		{"a key twice", 0, runs[1], "added twice"},
		{"an empty trace", 1, empty, "empty trace"},
		{"negative nodes", 1, negative, "-1 nodes"},
	} {
		if err := s.Add(tc.key, tc.run); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.wantErr)
		}
	}
	got, err := s.Close()
	if err != nil {
		t.Fatal(err)
	}
	alone, err := Evaluate(context.Background(), runs[:1], contenders(), Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(reportBytes(t, got), reportBytes(t, alone)) {
		t.Error("refused runs changed the report")
	}
	if err := s.Add(1, runs[1]); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Add after Close: %v", err)
	}
}

// TestRunNodes: a run's own Nodes sizes its cluster: one node too small
// for the pods leaves them Pending, which the run's cost shows, and the
// same run sized as the options' cluster is the run without Nodes.
func TestRunNodes(t *testing.T) {
	base := testRuns(t, 1, 80)[0]
	o := Options{Workers: 1}
	o.Config.NodeCapacity.CPU, o.Config.NodeCapacity.Memory = 4, 16<<30
	cost := func(nodes int) float64 {
		t.Helper()
		r := base
		r.Nodes = nodes
		rep, err := Evaluate(context.Background(), []Run{r}, contenders()[1:2], o) // 8 replicas at 2x the app's CPU
		if err != nil {
			t.Fatal(err)
		}
		return rep.Results[0].Cost
	}
	if a, b := cost(0), cost(10); a != b {
		t.Errorf("10 nodes, the options' default, cost %v; without Nodes %v", b, a)
	}
	if small, big := cost(1), cost(10); !(small < big) {
		t.Errorf("one node cost %v, ten %v: the run's Nodes did not size its cluster", small, big)
	}
}
