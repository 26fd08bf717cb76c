package progress

import (
	"bytes"
	"strings"
	"sync"
	"testing"
)

func TestBar(t *testing.T) {
	var buf bytes.Buffer
	b := NewBar(&buf)
	b.Begin(4)
	b.Advance("hpa", "web")
	// The total grows as work is discovered; the bar never overflows.
	b.SetTotal(2)
	b.Advance("vpa", "web")
	b.Advance("vpa", "api")
	b.End()
	out := buf.String()
	for _, want := range []string{"] 0/4 ", "] 1/4 ", "hpa web", "] 2/2 ", "[" + strings.Repeat("#", 40) + "] 3/2 "} {
		if !strings.Contains(out, want) {
			t.Errorf("bar lacks %q:\n%q", want, out)
		}
	}
	if !strings.HasSuffix(out, "\n") {
		t.Errorf("End does not end the line: %q", out)
	}
}

// TestBarConcurrent: eval's workers advance the bar at once (run with
// -race).
func TestBarConcurrent(t *testing.T) {
	var buf bytes.Buffer
	b := NewBar(&buf)
	b.Begin(100)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 25 {
				b.Advance("p", "a")
			}
		})
	}
	wg.Wait()
	b.End()
	if !strings.Contains(buf.String(), "] 100/100 ") {
		t.Errorf("the bar did not reach 100/100")
	}
}
