package certs

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"os"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// BundleWatcher re-reads a PEM CA bundle file (files mode: a mounted
// Secret's ca.crt, kept by cert-manager or an operator) every Interval, so
// that registration can follow a CA change without a restart.
//
// Content that does not parse as certificates keeps the last good bundle:
// a Secret update is not atomic for every writer.
type BundleWatcher struct {
	Path     string
	Interval time.Duration
	Clock    clock.WithTicker

	mu      sync.Mutex
	bundle  []byte
	changed chan struct{}
}

// NewBundleWatcher reads the bundle once and fails if it is unusable.
func NewBundleWatcher(path string, interval time.Duration, clk clock.WithTicker) (*BundleWatcher, error) {
	if interval <= 0 {
		return nil, fmt.Errorf("CA bundle check interval %s must be positive", interval)
	}
	w := &BundleWatcher{Path: path, Interval: interval, Clock: clk, changed: make(chan struct{}, 1)}
	b, err := w.read()
	if err != nil {
		return nil, err
	}
	w.bundle = b
	return w, nil
}

func (w *BundleWatcher) read() ([]byte, error) {
	b, err := os.ReadFile(w.Path)
	if err != nil {
		return nil, fmt.Errorf("read CA bundle: %w", err)
	}
	blocks, err := certBlocks(b)
	if err != nil {
		return nil, fmt.Errorf("CA bundle %s: %w", w.Path, err)
	}
	for i, blk := range blocks {
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			return nil, fmt.Errorf("CA bundle %s, certificate %d: %w", w.Path, i+1, err)
		}
	}
	return b, nil
}

// CABundle returns the last good bundle.
func (w *BundleWatcher) CABundle() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return bytes.Clone(w.bundle)
}

// Changed receives a value after the bundle changed. It is meant for a
// single consumer; notifications that are not yet received coalesce.
func (w *BundleWatcher) Changed() <-chan struct{} { return w.changed }

// Check re-reads the file once and reports whether the bundle changed.
func (w *BundleWatcher) Check() (bool, error) {
	b, err := w.read()
	if err != nil {
		return false, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if bytes.Equal(b, w.bundle) {
		return false, nil
	}
	w.bundle = b
	select {
	case w.changed <- struct{}{}:
	default:
	}
	return true, nil
}

// Run checks every Interval until ctx ends.
func (w *BundleWatcher) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithValues("caBundleFile", w.Path)
	t := w.Clock.NewTicker(w.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			changed, err := w.Check()
			if err != nil {
				logger.Error(err, "Re-reading the CA bundle; keeping the last good one")
			} else if changed {
				logger.Info("CA bundle file changed")
			}
		}
	}
}
