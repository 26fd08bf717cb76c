// Package progress draws a progress bar on a terminal line, for the
// simulator's long evaluations (pkg/lab/eval's Progress) and the what-if's
// range queries alike. It imports only the standard library, so any binary
// may use it without linking the simulator or the neural networks.
package progress

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Bar draws "[####....] done/total elapsed eta what" on a terminal line.
// It implements eval.Progress and is safe for concurrent use.
type Bar struct {
	mu    sync.Mutex
	w     io.Writer
	total int
	done  int
	start time.Time
	width int
}

// NewBar draws on w.
func NewBar(w io.Writer) *Bar { return &Bar{w: w, width: 40} }

// Begin implements eval.Progress.
func (p *Bar) Begin(total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total, p.done, p.start = total, 0, time.Now()
	p.draw("")
}

// Advance implements eval.Progress.
func (p *Bar) Advance(policy, app string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	p.draw(policy + " " + app)
}

// SetTotal changes the total without restarting the clock, for work whose
// size is learnt as it goes (the what-if learns each workload's number of
// range queries from its first one).
func (p *Bar) SetTotal(total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total = total
}

// End implements eval.Progress.
func (p *Bar) End() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.draw("")
	fmt.Fprintln(p.w)
}

func (p *Bar) draw(what string) {
	filled := 0
	if p.total > 0 {
		filled = min(p.width, p.width*p.done/p.total)
	}
	el := time.Since(p.start).Round(time.Second)
	eta := ""
	if p.done > 0 && p.done < p.total {
		eta = " eta " + (time.Duration(float64(time.Since(p.start)) * float64(p.total-p.done) / float64(p.done))).Round(time.Second).String()
	}
	fmt.Fprintf(p.w, "\r[%s%s] %d/%d %s%s %-28.28s", strings.Repeat("#", filled), strings.Repeat(".", p.width-filled), p.done, p.total, el, eta, what)
}
