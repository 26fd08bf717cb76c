package testapp

import (
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// ThreadCPUTime returns the CPU time the calling OS thread has consumed. The
// caller must hold its goroutine on the thread (runtime.LockOSThread) for
// two readings to measure the same thread.
func ThreadCPUTime() (time.Duration, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, fmt.Errorf("thread CPU time: %w", err)
	}
	return time.Duration(ts.Nano()), nil
}

// Burn keeps the CPU busy until the calling goroutine's OS thread has used
// cpu of CPU time, and returns the CPU time it used (at least cpu) and the
// wall time it took (at least the CPU time: more when the thread was
// preempted or throttled meanwhile). The goroutine is locked to its thread
// for the duration, so the thread's clock measures this work only.
func Burn(cpu time.Duration) (used, wall time.Duration, err error) {
	if cpu <= 0 {
		return 0, 0, nil
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := time.Now()
	c0, err := ThreadCPUTime()
	if err != nil {
		return 0, 0, err
	}
	x := uint64(0x9e3779b97f4a7c15)
	for {
		// A short batch of arithmetic between clock readings: the
		// reading costs a vDSO call, the batch ~10 µs.
		for range 4096 {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
		}
		c, err := ThreadCPUTime()
		if err != nil {
			return 0, 0, err
		}
		if used = c - c0; used >= cpu {
			break
		}
	}
	sink.Store(x)
	return used, time.Since(start), nil
}

// sink keeps the burn loop's result live so the compiler cannot drop it.
var sink atomic.Uint64

// Held is memory mapped outside the Go heap by Hold. Mapped and unmapped
// directly, it is resident exactly while held: memory from the Go heap
// would stay resident after release until the garbage collector ran and
// the scavenger returned it, and under a tight CPU limit (the collector is
// throttled with the app) a container's working set grew to several times
// what its requests held, and was OOM-killed at 256Mi while holding 60Mi.
type Held struct {
	b []byte
}

// Hold maps n bytes of anonymous memory and writes one byte in every page,
// so the memory is resident (counted in the container's working set), not
// merely reserved. n <= 0 holds nothing.
func Hold(n int64) (*Held, error) {
	if n <= 0 {
		return &Held{}, nil
	}
	b, err := unix.Mmap(-1, 0, int(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("hold %d bytes: %w", n, err)
	}
	page := int64(os.Getpagesize())
	for i := int64(0); i < n; i += page {
		b[i] = 1
	}
	b[n-1] = 1
	return &Held{b: b}, nil
}

// Len is the number of bytes held.
func (h *Held) Len() int { return len(h.b) }

// Release unmaps the memory; it may be called more than once.
func (h *Held) Release() {
	if h == nil || h.b == nil {
		return
	}
	_ = unix.Munmap(h.b)
	h.b = nil
}
