package progress

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestBar(t *testing.T) {
	var buf bytes.Buffer
	b := NewTerminalBar(&buf)
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

// TestLogBar: away from a terminal the bar writes whole lines, a bounded
// number of them however many steps the work has (a training run's log
// had one per episode, thousands), and still says where the work stands.
func TestLogBar(t *testing.T) {
	for _, tc := range []struct {
		name      string
		total     int
		steps     int
		setAt     int // the step before which SetTotal(setTotal) is called
		setTotal  int // when > 0
		maxLines  int
		wantLines []string
	}{
		{name: "many steps", total: 4000, steps: 4000, maxLines: 12,
			wantLines: []string{"] 0/4000 ", "] 400/4000 ", "] 2000/4000 ", "[" + strings.Repeat("#", 40) + "] 4000/4000 "}},
		{name: "fewer steps than lines", total: 3, steps: 3, maxLines: 4,
			wantLines: []string{"] 0/3 ", "] 1/3 ", "] 3/3 "}},
		{name: "work ends early", total: 100, steps: 55, maxLines: 7,
			wantLines: []string{"] 50/100 ", "] 55/100 "}},
		{name: "total grows", total: 10, steps: 1000, setAt: 5, setTotal: 1000, maxLines: 12,
			wantLines: []string{"] 0/10 ", "] 1000/1000 "}},
		{name: "total shrinks", total: 1000, steps: 10, setAt: 5, setTotal: 10, maxLines: 12,
			wantLines: []string{"] 10/10 "}},
		{name: "no work", total: 0, steps: 0, maxLines: 1, wantLines: []string{"] 0/0 "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			b := NewLogBar(&buf, 10)
			b.Begin(tc.total)
			for i := range tc.steps {
				if tc.setTotal > 0 && i == tc.setAt {
					b.SetTotal(tc.setTotal)
				}
				b.Advance("fused", "app-1")
			}
			b.End()
			out := buf.String()
			if strings.Contains(out, "\r") {
				t.Errorf("a log bar redraws in place:\n%q", out)
			}
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if len(lines) > tc.maxLines {
				t.Errorf("%d lines, want at most %d:\n%s", len(lines), tc.maxLines, out)
			}
			for _, want := range tc.wantLines {
				if !strings.Contains(out, want) {
					t.Errorf("log lacks %q:\n%s", want, out)
				}
			}
			// Begin again: the bound is per piece of work.
			buf.Reset()
			b.Begin(tc.total)
			b.End()
			if n := strings.Count(buf.String(), "\n"); n < 1 || n > 2 {
				t.Errorf("a second Begin/End wrote %d lines:\n%s", n, buf.String())
			}
		})
	}
}

// TestNewBarChoosesByWriter: a file is not a terminal, so the bar writes
// lines to it; a terminal, where the tests run on one, gets the redrawn
// line.
func TestNewBarChoosesByWriter(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if b := NewBar(f); b.lines != DefaultLogLines {
		t.Errorf("a bar on a file has lines %d, want %d", b.lines, DefaultLogLines)
	}
	if b := NewBar(&bytes.Buffer{}); b.lines != DefaultLogLines {
		t.Errorf("a bar on a buffer has lines %d, want %d", b.lines, DefaultLogLines)
	}
	if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		defer tty.Close()
		if b := NewBar(tty); b.lines != 0 {
			t.Errorf("a bar on /dev/tty writes lines (%d), want it redrawn", b.lines)
		}
	}
}

// TestBarConcurrent: eval's workers advance the bar at once (run with
// -race).
func TestBarConcurrent(t *testing.T) {
	for _, tc := range []struct {
		name string
		new  func(*bytes.Buffer) *Bar
	}{
		{"terminal", func(b *bytes.Buffer) *Bar { return NewTerminalBar(b) }},
		{"log", func(b *bytes.Buffer) *Bar { return NewLogBar(b, 10) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			b := tc.new(&buf)
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
				t.Errorf("the bar did not reach 100/100:\n%s", buf.String())
			}
		})
	}
}
