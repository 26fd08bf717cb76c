package demo

import (
	"io"

	"github.com/aware-k8s/aware/pkg/lab/progress"
)

// ProgressBar is progress.Bar, which moved to its own package so that the
// recommender's what-if can draw it without linking the demo (and so the
// neural networks).
type ProgressBar = progress.Bar

// NewProgressBar draws on w.
func NewProgressBar(w io.Writer) *ProgressBar { return progress.NewBar(w) }
