// Package progress draws a progress bar on a terminal line, for the
// simulator's long evaluations (pkg/lab/eval's Progress) and the what-if's
// range queries alike. It imports only the standard library, so any binary
// may use it without linking the simulator or the neural networks.
//
// On a terminal the bar is redrawn in place at every step. Written to a
// file or a pipe (a CI log, `make demo > log`) redrawing would leave one
// line per step, thousands for a training run, so there the bar writes a
// bounded number of whole lines instead: one as the work begins, one at
// each tenth of it, one at its end.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// DefaultLogLines is how many lines, besides the first and the last, a
// bar that is not on a terminal writes for one piece of work.
const DefaultLogLines = 10

// Bar draws "[####....] done/total elapsed eta what" on a terminal line,
// or as a few whole lines elsewhere (NewLogBar). It implements
// eval.Progress and is safe for concurrent use.
type Bar struct {
	mu    sync.Mutex
	w     io.Writer
	total int
	done  int
	start time.Time
	width int
	// lines, when > 0, makes the bar write whole lines, at most lines+2
	// per Begin; 0 redraws one terminal line.
	lines int
	// step is the last tenth (of lines) written; written counts the lines
	// since Begin.
	step, written int
}

// NewBar draws on w: redrawn in place when w is a terminal, as at most
// DefaultLogLines+2 whole lines per piece of work otherwise.
func NewBar(w io.Writer) *Bar {
	if isTerminal(w) {
		return NewTerminalBar(w)
	}
	return NewLogBar(w, DefaultLogLines)
}

// NewTerminalBar redraws one line of w in place, whatever w is.
func NewTerminalBar(w io.Writer) *Bar { return &Bar{w: w, width: 40} }

// NewLogBar writes whole lines to w: one at Begin, one each time another
// 1/lines of the work is done, one at End (unless the last said it all).
func NewLogBar(w io.Writer, lines int) *Bar {
	return &Bar{w: w, width: 40, lines: max(lines, 1)}
}

// isTerminal reports whether w is a character device (a terminal), as far
// as the standard library can tell.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Begin implements eval.Progress.
func (p *Bar) Begin(total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total, p.done, p.start = total, 0, time.Now()
	p.step, p.written = 0, 0
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
	if p.lines > 0 {
		if p.written == 0 || p.step < p.lines {
			p.line("")
		}
		return
	}
	p.draw("")
	fmt.Fprintln(p.w)
}

func (p *Bar) draw(what string) {
	if p.lines > 0 {
		// A line at Begin, then one per 1/lines of the total crossed. A
		// total that shrinks (SetTotal) may skip steps and one that grows
		// may return to earlier ones: the step never goes back, and
		// lines+1 lines after Begin are the most written.
		step := p.lines
		if p.total > 0 && p.done < p.total {
			step = p.lines * p.done / p.total
		}
		if p.written == 0 || (step > p.step && p.written <= p.lines) {
			p.step = max(p.step, step)
			p.line(what)
		}
		return
	}
	fmt.Fprintf(p.w, "\r%s %-28.28s", p.status(), what)
}

// line writes the status as a line of its own.
func (p *Bar) line(what string) {
	p.written++
	fmt.Fprintln(p.w, strings.TrimRight(p.status()+" "+what, " "))
}

// status is "[####....] done/total elapsed[ eta left]".
func (p *Bar) status() string {
	filled := 0
	if p.total > 0 {
		filled = min(p.width, p.width*p.done/p.total)
	}
	el := time.Since(p.start).Round(time.Second)
	eta := ""
	if p.done > 0 && p.done < p.total {
		eta = " eta " + (time.Duration(float64(time.Since(p.start)) * float64(p.total-p.done) / float64(p.done))).Round(time.Second).String()
	}
	return fmt.Sprintf("[%s%s] %d/%d %s%s", strings.Repeat("#", filled), strings.Repeat(".", p.width-filled), p.done, p.total, el, eta)
}
