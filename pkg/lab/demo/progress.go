package demo

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// ProgressBar draws "[####....] done/total elapsed" on a terminal line. It
// implements eval.Progress and is safe for concurrent use.
type ProgressBar struct {
	mu    sync.Mutex
	w     io.Writer
	total int
	done  int
	start time.Time
	width int
}

// NewProgressBar draws on w.
func NewProgressBar(w io.Writer) *ProgressBar { return &ProgressBar{w: w, width: 40} }

// Begin implements eval.Progress.
func (p *ProgressBar) Begin(total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total, p.done, p.start = total, 0, time.Now()
	p.draw("")
}

// Advance implements eval.Progress.
func (p *ProgressBar) Advance(policy, app string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	p.draw(policy + " " + app)
}

// End implements eval.Progress.
func (p *ProgressBar) End() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.draw("")
	fmt.Fprintln(p.w)
}

func (p *ProgressBar) draw(what string) {
	filled := 0
	if p.total > 0 {
		filled = p.width * p.done / p.total
	}
	el := time.Since(p.start).Round(time.Second)
	eta := ""
	if p.done > 0 && p.done < p.total {
		eta = " eta " + (time.Duration(float64(time.Since(p.start)) * float64(p.total-p.done) / float64(p.done))).Round(time.Second).String()
	}
	fmt.Fprintf(p.w, "\r[%s%s] %d/%d %s%s %-28.28s", strings.Repeat("#", filled), strings.Repeat(".", p.width-filled), p.done, p.total, el, eta, what)
}
