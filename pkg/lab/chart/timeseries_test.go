package chart

import (
	"bytes"
	"encoding/xml"
	"math"
	"strings"
	"testing"
)

func TestTimeSeries(t *testing.T) {
	x := []float64{0, 1, 2, 3, 4, 5}
	ts := TimeSeries{
		XLabel: "hours",
		Panels: []Panel{
			{Title: "Rate <a&b>", YLabel: "req/s", Lines: []Line{{Name: "r", X: x, Y: []float64{1, 2, math.NaN(), 4, 5, 6}}}},
			{Title: "Replicas", YLabel: "replicas", Lines: []Line{
				{Name: "p", X: x, Y: []float64{1, 1, 2, 2, 3, 3}, Colour: TimeSeriesColour(0)},
				{Name: "q", X: x[:2], Y: []float64{2, 2}, Colour: TimeSeriesColour(1), Width: 2},
			}},
		},
		Legend: []LegendEntry{{"p", TimeSeriesColour(0)}, {"q", TimeSeriesColour(1)}},
	}
	var a, b bytes.Buffer
	if err := ts.WriteSVG(&a); err != nil {
		t.Fatal(err)
	}
	if err := ts.WriteSVG(&b); err != nil || !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatalf("not deterministic (%v)", err)
	}
	var doc struct {
		Polylines []struct {
			Stroke string `xml:"stroke,attr"`
			Width  string `xml:"stroke-width,attr"`
			Points string `xml:"points,attr"`
		} `xml:"polyline"`
		Texts []string `xml:"text"`
	}
	if err := xml.Unmarshal(a.Bytes(), &doc); err != nil {
		t.Fatalf("not XML: %v\n%s", err, a.String())
	}
	// The NaN breaks the rate into two lines; then p and q.
	if len(doc.Polylines) != 4 {
		t.Fatalf("%d polylines, want 4:\n%s", len(doc.Polylines), a.String())
	}
	if n := len(strings.Fields(doc.Polylines[0].Points)); n != 2 {
		t.Errorf("first segment has %d vertices, want 2 (before the gap)", n)
	}
	if doc.Polylines[0].Stroke != "#333" || doc.Polylines[3].Stroke != TimeSeriesColour(1) || doc.Polylines[3].Width != "2" {
		t.Errorf("strokes %+v", doc.Polylines)
	}
	for _, want := range []string{"Rate <a&b>", "hours", "p", "q"} {
		found := false
		for _, s := range doc.Texts {
			found = found || s == want
		}
		if !found {
			t.Errorf("no text %q", want)
		}
	}

	t.Run("long lines are bucketed", func(t *testing.T) {
		n := 10 * maxVertices
		xs, ys := make([]float64, n), make([]float64, n)
		for i := range xs {
			xs[i], ys[i] = float64(i), float64(i%7)
		}
		var out bytes.Buffer
		if err := (TimeSeries{Panels: []Panel{{Lines: []Line{{X: xs, Y: ys}}}}}).WriteSVG(&out); err != nil {
			t.Fatal(err)
		}
		if got := strings.Count(out.String(), ","); got > maxVertices+1 {
			t.Errorf("%d vertices, want at most %d", got, maxVertices)
		}
	})

	for _, tc := range []struct {
		name string
		ts   TimeSeries
		want string
	}{
		{"no panels", TimeSeries{}, "no panels"},
		{"lengths", TimeSeries{Panels: []Panel{{Lines: []Line{{Name: "l", X: x, Y: x[:2]}}}}}, `line "l" has 6 x and 2 y`},
		{"bad x", TimeSeries{Panels: []Panel{{Lines: []Line{{Name: "l", X: []float64{math.Inf(1)}, Y: []float64{1}}}}}}, "has x +Inf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.ts.WriteSVG(&bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}
