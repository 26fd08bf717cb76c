package learn

import (
	"testing"
)

func TestAgree(t *testing.T) {
	// One dimension; what each choice sets: follow (0) sets 5, choice 1
	// holds at 7, 2 and 3 cut to 3 and 4, 4 and 5 raise to 6 and 7, 6 sets
	// 4 like choice 3.
	values := []float64{5, 7, 3, 4, 6, 7, 4}
	value := func(_, i int) float64 { return values[i] }
	cases := []struct {
		name    string
		choices []int // one per member
		quorum  int
		want    int
	}{
		{"all follow", []int{0, 0, 0}, 3, 0},
		{"unanimous raise takes the smallest", []int{4, 5, 1}, 3, 4},
		{"one holds out", []int{4, 5, 0}, 3, 0},
		{"majority takes the median", []int{4, 5, 0}, 2, 4},
		{"majority cut", []int{2, 3, 4}, 2, 3},
		{"equal values: the first member's choice", []int{6, 3, 3}, 3, 6},
		{"quorum of one both ways follows", []int{2, 4, 0}, 1, 0},
		{"quorum of one one way takes the furthest", []int{2, 3, 0}, 1, 2},
		{"unanimous cut, mixed depth", []int{2, 3, 6}, 3, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			choices := make([][]int, len(tc.choices))
			for m, c := range tc.choices {
				choices[m] = []int{c}
			}
			got, err := Agree(choices, tc.quorum, value)
			if err != nil {
				t.Fatal(err)
			}
			if got[0] != tc.want {
				t.Errorf("Agree(%v, quorum %d) = %d, want %d", tc.choices, tc.quorum, got[0], tc.want)
			}
		})
	}
}

func TestAgreeRefuses(t *testing.T) {
	value := func(_, i int) float64 { return float64(i) }
	cases := []struct {
		name    string
		choices [][]int
		quorum  int
	}{
		{"no members", nil, 1},
		{"quorum zero", [][]int{{0}, {0}}, 0},
		{"quorum above members", [][]int{{0}, {0}}, 3},
		{"ragged", [][]int{{0, 1}, {0}}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Agree(tc.choices, tc.quorum, value); err == nil {
				t.Error("want an error")
			}
		})
	}
}

func TestPreparedChoiceValue(t *testing.T) {
	obs, cons, def := residualFixture()
	space := DefaultResidualSpace()
	a, err := NewAgent("ns/app", DefaultConfig().Gates, DefaultSteps(), obs.Time)
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.Prepare(obs, cons, def, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.ChoiceValue(0, 0); ok {
		t.Fatal("paper action space: want no choice values")
	}
	a.SetShape(PolicyShape{Residual: &space})
	if p, err = a.Prepare(obs, cons, def, DefaultConfig()); err != nil {
		t.Fatal(err)
	}
	for d := range NumDimensions {
		for i, ch := range space[d] {
			got, ok := p.ChoiceValue(int(d), i)
			if want := ChoiceValue(&obs, &cons, def, d, ch); !ok || got != want {
				t.Errorf("%s choice %s: ChoiceValue = %v, %v; want %v", d, ch, got, ok, want)
			}
		}
	}
	for _, di := range [][2]int{{-1, 0}, {int(NumDimensions), 0}, {0, len(space[0])}, {0, -1}} {
		if _, ok := p.ChoiceValue(di[0], di[1]); ok {
			t.Errorf("ChoiceValue(%d, %d): want false out of range", di[0], di[1])
		}
	}
}
