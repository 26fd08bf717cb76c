package chart

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
)

// parse checks that svg is well-formed XML and returns how many elements
// of each name it holds and the text of its <title> elements.
func parse(t *testing.T, svg []byte) (map[string]int, []string) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(svg))
	counts := map[string]int{}
	var titles []string
	inTitle := false
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed: %v\n%s", err, svg)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			counts[e.Name.Local]++
			inTitle = e.Name.Local == "title"
		case xml.CharData:
			if inTitle {
				titles = append(titles, string(e))
			}
		case xml.EndElement:
			inTitle = false
		}
	}
	return counts, titles
}

func TestScatterWriteSVG(t *testing.T) {
	pts := []Point{
		{X: 0, Y: 0, Group: "cpu", Label: "a"},
		{X: 1, Y: 2, Group: "memory-io", Label: "b<&>\""},
		{X: -3, Y: 0.5, Group: "cpu", Label: "c"},
	}
	for _, tc := range []struct {
		name    string
		s       Scatter
		legend  int
		wantErr string
	}{
		{name: "groups in order of appearance", s: Scatter{Title: "t & u", Points: pts}, legend: 2},
		{name: "given groups, one unused", s: Scatter{Points: pts, Groups: []string{"idle", "cpu", "memory-io"}}, legend: 3},
		{name: "one point, flat axes", s: Scatter{Points: pts[:1]}, legend: 1},
		{name: "no points", s: Scatter{}, wantErr: "no points"},
		{name: "NaN coordinate", s: Scatter{Points: []Point{{X: math.NaN(), Group: "g"}}}, wantErr: "is (NaN"},
		{name: "unknown group", s: Scatter{Points: pts, Groups: []string{"cpu"}}, wantErr: `group "memory-io"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			err := tc.s.WriteSVG(&b)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			counts, titles := parse(t, b.Bytes())
			if counts["svg"] != 1 || counts["circle"] != len(tc.s.Points) || len(titles) != len(tc.s.Points) {
				t.Errorf("%d svg, %d circles, %d tooltips; want 1 and %d points", counts["svg"], counts["circle"], len(titles), len(tc.s.Points))
			}
			// The background, the frame and one swatch per group.
			if counts["rect"] != 2+tc.legend {
				t.Errorf("%d rects, want %d (legend of %d groups)", counts["rect"], 2+tc.legend, tc.legend)
			}
			for i, p := range tc.s.Points {
				if want := p.Label + " (" + p.Group + ")"; titles[i] != want {
					t.Errorf("tooltip %d = %q, want %q", i, titles[i], want)
				}
			}
			var again bytes.Buffer
			if err := tc.s.WriteSVG(&again); err != nil || !bytes.Equal(again.Bytes(), b.Bytes()) {
				t.Errorf("a second write differs (err %v)", err)
			}
		})
	}
}
