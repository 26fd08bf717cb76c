package result

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

func TestWhatIfPairs(t *testing.T) {
	flat := func(policy string, rep int) Run {
		return run(policy, rep, []float64{10, 10, 10, 10}, []float64{0.1, 0.1, 0.1, 0.1}, []float64{1, 1, 1, 1})
	}
	// Each window holds 0.5 cores and 1 GiB: a run costs c.
	c := (0.5 + 1/7.5) * 60 / 3600
	hpa0, hpa1, hpa2, hpa3 := flat("hpa", 0), flat("hpa", 1), flat("hpa", 2), flat("hpa", 3)
	hpa0.WhatIf = &WhatIf{RecordedCost: c, ReplayCost: 1.1 * c, Predicted: map[string]Prediction{"fused": {Cost: 1.2 * c, Violations: 0.25}}}
	hpa1.WhatIf = &WhatIf{RecordedCost: c, ReplayCost: 0.9 * c, Predicted: map[string]Prediction{"fused": {Cost: 0.8 * c}}}
	hpa2.WhatIf = &WhatIf{Refused: "data too thin", Predicted: map[string]Prediction{"fused": {Cost: c}}}
	hpa3.WhatIf = &WhatIf{Predicted: map[string]Prediction{"fused": {Cost: c}}} // no real fused run of rep 3
	runs := []Run{hpa1, flat("fused", 1), hpa0, flat("fused", 0), hpa2, flat("fused", 2), hpa3, flat("vpa", 0)}
	rows, err := WhatIfPairs(runs, "fused")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Rep != 0 || rows[1].Rep != 1 {
		t.Fatalf("rows %+v, want repetitions 0 and 1 (2 refused, 3 unpaired)", rows)
	}
	r := rows[0]
	if r.From != "hpa" || math.Abs(r.FromCost-c) > 1e-12 || math.Abs(r.Predicted-1.2*c) > 1e-12 || math.Abs(r.Real-c) > 1e-12 || r.PredictedViol != 0.25 || math.Abs(r.Replayed-1.1*c) > 1e-12 {
		t.Errorf("row %+v", r)
	}

	var b bytes.Buffer
	if err := WriteWhatIf(&b, runs, "fused"); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"data too thin", "+20.0%", "-20.0%", "cost error of the prediction, mean [95% interval]: +0.0% [", "over 2", "of the replay of what ran against its measured cost: +0.0%"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	b.Reset()
	if err := WriteWhatIf(&b, []Run{flat("fused", 0)}, "fused"); err != nil || b.Len() != 0 {
		t.Errorf("runs without a what-if printed %q (%v)", b.String(), err)
	}
	b.Reset()
	if err := WriteWhatIf(&b, []Run{hpa3}, "fused"); err != nil || !strings.Contains(b.String(), "no prediction of fused has a real run") {
		t.Errorf("unpaired what-ifs printed %q (%v)", b.String(), err)
	}
}
