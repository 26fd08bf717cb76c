package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/aware-k8s/aware/hack/benchvpa/bench"
)

// cgroup is one CPU cgroup the probe made for a replica of the app: a
// CFS quota of limit cores per period, on cgroup v2 (cpu.max) or v1
// (cpu.cfs_quota_us), whichever holds the cpu controller.
type cgroup struct {
	dir string
	v2  bool
}

// cfsPeriodMicros is the kernel's default CFS period, the kubelet's too.
const cfsPeriodMicros = 100000

// cpuRoot finds the directory of the cpu controller's hierarchy under
// root (normally /sys/fs/cgroup): the unified hierarchy when it holds
// the controller, else the v1 hierarchy mounted as cpu or cpu,cpuacct.
func cpuRoot(root string) (dir string, v2 bool, err error) {
	if b, err := os.ReadFile(filepath.Join(root, "cgroup.controllers")); err == nil {
		if !hasWord(string(b), "cpu") {
			return "", false, fmt.Errorf("%s: the unified hierarchy has no cpu controller (controllers: %q)", root, strings.TrimSpace(string(b)))
		}
		return root, true, nil
	}
	for _, name := range []string{"cpu", "cpu,cpuacct", "cpuacct,cpu"} {
		d := filepath.Join(root, name)
		if _, err := os.Stat(filepath.Join(d, "cpu.cfs_quota_us")); err == nil {
			return d, false, nil
		}
	}
	return "", false, fmt.Errorf("%s: no cpu controller found (neither cgroup.controllers nor cpu/cpu.cfs_quota_us)", root)
}

func hasWord(s, w string) bool {
	for _, f := range strings.Fields(s) {
		if f == w {
			return true
		}
	}
	return false
}

// newCgroup makes the cgroup name under the cpu hierarchy at dir with a
// quota of limit cores per period.
func newCgroup(root string, v2 bool, name string, limit float64) (*cgroup, error) {
	if !(limit > 0) {
		return nil, fmt.Errorf("cgroup %s: limit %g must be > 0 cores", name, limit)
	}
	if v2 {
		// The controller must be enabled for the root's children.
		if err := os.WriteFile(filepath.Join(root, "cgroup.subtree_control"), []byte("+cpu"), 0o644); err != nil {
			return nil, fmt.Errorf("enable the cpu controller under %s: %w", root, err)
		}
	}
	c := &cgroup{dir: filepath.Join(root, name), v2: v2}
	if err := os.Mkdir(c.dir, 0o755); err != nil {
		return nil, fmt.Errorf("make cgroup: %w", err)
	}
	quota := int64(limit*cfsPeriodMicros + 0.5)
	var err error
	if v2 {
		err = os.WriteFile(filepath.Join(c.dir, "cpu.max"), fmt.Appendf(nil, "%d %d", quota, cfsPeriodMicros), 0o644)
	} else {
		err = os.WriteFile(filepath.Join(c.dir, "cpu.cfs_period_us"), fmt.Appendf(nil, "%d", cfsPeriodMicros), 0o644)
		if err == nil {
			err = os.WriteFile(filepath.Join(c.dir, "cpu.cfs_quota_us"), fmt.Appendf(nil, "%d", quota), 0o644)
		}
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("set the quota of %s: %w", c.dir, err), c.remove())
	}
	return c, nil
}

// procs is the file a process is moved into the cgroup through.
func (c *cgroup) procs() string { return filepath.Join(c.dir, "cgroup.procs") }

// remove deletes the cgroup; its processes must have exited.
func (c *cgroup) remove() error {
	if err := os.Remove(c.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove cgroup: %w", err)
	}
	return nil
}

// throttling is the cgroup's cpu.stat counters of the quota.
type throttling struct {
	Periods, Throttled int64
	// ThrottledSeconds is the time the cgroup's runnable threads waited
	// for the next period, summed over CPUs.
	ThrottledSeconds float64
}

func (t throttling) sub(u throttling) throttling {
	return throttling{t.Periods - u.Periods, t.Throttled - u.Throttled, t.ThrottledSeconds - u.ThrottledSeconds}
}

func (c *cgroup) throttling() (throttling, error) {
	f, err := os.Open(filepath.Join(c.dir, "cpu.stat"))
	if err != nil {
		return throttling{}, fmt.Errorf("cpu.stat: %w", err)
	}
	defer f.Close()
	return parseCPUStat(f)
}

// parseCPUStat reads v1's throttled_time (ns) or v2's throttled_usec.
func parseCPUStat(r io.Reader) (throttling, error) {
	var t throttling
	var seen int
	s := bufio.NewScanner(r)
	for s.Scan() {
		f := strings.Fields(s.Text())
		if len(f) != 2 {
			continue
		}
		v, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return throttling{}, fmt.Errorf("cpu.stat: %s: %w", f[0], err)
		}
		switch f[0] {
		case "nr_periods":
			t.Periods, seen = v, seen+1
		case "nr_throttled":
			t.Throttled, seen = v, seen+1
		case "throttled_time":
			t.ThrottledSeconds, seen = float64(v)/1e9, seen+1
		case "throttled_usec":
			t.ThrottledSeconds, seen = float64(v)/1e6, seen+1
		}
	}
	if err := s.Err(); err != nil {
		return throttling{}, fmt.Errorf("cpu.stat: %w", err)
	}
	if seen != 3 {
		return throttling{}, errors.New("cpu.stat: want nr_periods, nr_throttled and throttled_time or throttled_usec")
	}
	return t, nil
}

// processCPU is the CPU time (user and system, every thread) process pid
// has used, in seconds, at the resolution of a clock tick.
func processCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("process CPU: %w", err)
	}
	return bench.ParseProcStat(string(b))
}
