package store

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func mustOpen(t *testing.T, dir string) (*Store, Recovery) {
	t.Helper()
	s, rec, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s, rec
}

func TestAppendReopen(t *testing.T) {
	dir := t.TempDir()
	s, rec := mustOpen(t, dir)
	if rec.Records != 0 || len(s.Experience()) != 0 {
		t.Fatalf("new store recovered %+v", rec)
	}
	want := [][]byte{[]byte("a"), {}, bytes.Repeat([]byte("x"), 1000)}
	if err := s.Append(want[:2]); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(want[2:]); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, rec = mustOpen(t, dir)
	defer s.Close()
	got := s.Experience()
	if rec.Records != 3 || rec.DiscardedBytes != 0 || len(got) != 3 {
		t.Fatalf("recovered %+v, %d records", rec, len(got))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Errorf("record %d = %q, want %q", i, got[i], want[i])
		}
	}
	if err := s.Append([][]byte{make([]byte, MaxRecordSize+1)}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversized record: %v", err)
	}
}

// TestTornTail damages the end of the log in each way a crash or bad disk
// can, and checks that Open keeps exactly the intact prefix and that the
// log accepts appends afterwards.
func TestTornTail(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(b []byte) []byte
		keep   int
	}{
		{"half a header", func(b []byte) []byte { return append(b, 5, 0, 0) }, 2},
		{"header without payload", func(b []byte) []byte { return append(b, 5, 0, 0, 0, 1, 2, 3, 4) }, 2},
		{"truncated payload", func(b []byte) []byte { return b[:len(b)-1] }, 1},
		{"flipped payload bit", func(b []byte) []byte { b[len(b)-1] ^= 1; return b }, 1},
		{"absurd length", func(b []byte) []byte { return append(b, 0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0) }, 2},
		{"zero fill after crash", func(b []byte) []byte { return append(b, make([]byte, 64)...) }, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s, _ := mustOpen(t, dir)
			if err := s.Append([][]byte{[]byte("first"), []byte("second")}); err != nil {
				t.Fatal(err)
			}
			s.Close()
			path := filepath.Join(dir, logName)
			b, _ := os.ReadFile(path)
			if err := os.WriteFile(path, tc.damage(b), 0o600); err != nil {
				t.Fatal(err)
			}
			s, rec := mustOpen(t, dir)
			if rec.Records != tc.keep {
				t.Fatalf("kept %d records, want %d (%+v)", rec.Records, tc.keep, rec)
			}
			if err := s.Append([][]byte{[]byte("after")}); err != nil {
				t.Fatal(err)
			}
			s.Close()
			s, rec = mustOpen(t, dir)
			defer s.Close()
			got := s.Experience()
			if rec.DiscardedBytes != 0 || len(got) != tc.keep+1 || string(got[len(got)-1]) != "after" {
				t.Fatalf("after repair: %+v %q", rec, got)
			}
		})
	}
}

func TestForeignLogIsNotTruncated(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, logName)
	if err := os.WriteFile(path, []byte("somebody else's file"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Open(dir); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open = %v, want ErrCorrupt", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "somebody else's file" {
		t.Fatal("foreign file was modified")
	}
}

func TestCheckpoints(t *testing.T) {
	dir := t.TempDir()
	s, _ := mustOpen(t, dir)
	defer s.Close()
	if _, err := s.LoadCheckpoint("policy"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing checkpoint: %v", err)
	}
	for _, v := range []string{"v1", "v2"} {
		if err := s.SaveCheckpoint("policy", []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	if b, err := s.LoadCheckpoint("policy"); err != nil || string(b) != "v2" {
		t.Fatalf("LoadCheckpoint = %q, %v", b, err)
	}
	if err := s.SaveCheckpoint("../escape", nil); err == nil {
		t.Error("path-traversing name accepted")
	}
	path := filepath.Join(dir, "policy.ckpt")
	b, _ := os.ReadFile(path)
	for name, bad := range map[string][]byte{
		"bit flip":  append(append([]byte(nil), b[:len(b)-1]...), b[len(b)-1]^0x40),
		"truncated": b[:len(b)-1],
		"no header": []byte("v2"),
	} {
		if err := os.WriteFile(path, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := s.LoadCheckpoint("policy"); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}

func TestCompact(t *testing.T) {
	dir := t.TempDir()
	s, _ := mustOpen(t, dir)
	if err := s.Append([][]byte{[]byte("1"), []byte("2"), []byte("3")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Compact([][]byte{[]byte("3")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Append([][]byte{[]byte("4")}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, _ = mustOpen(t, dir)
	defer s.Close()
	if got := s.Experience(); len(got) != 2 || string(got[0]) != "3" || string(got[1]) != "4" {
		t.Fatalf("after compaction: %q", got)
	}
}

func TestLock(t *testing.T) {
	dir := t.TempDir()
	s, _ := mustOpen(t, dir)
	if _, _, err := Open(dir); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open = %v, want ErrLocked", err)
	}
	s.Close()
	s2, _ := mustOpen(t, dir)
	s2.Close()
}

// The crash test's child writes records whose content is a function of
// their sequence number, so the parent can verify every byte it recovers.
const crashEnv = "AWARE_STORE_CRASH_CHILD_DIR"

func payload(seq uint64, n int) []byte {
	b := make([]byte, 8+n)
	binary.LittleEndian.PutUint64(b, seq)
	r := rand.New(rand.NewPCG(seq, 7))
	for i := 8; i < len(b); i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

func checkPayload(b []byte, n int) (uint64, error) {
	if len(b) != 8+n {
		return 0, fmt.Errorf("record of %d bytes, want %d", len(b), 8+n)
	}
	seq := binary.LittleEndian.Uint64(b)
	if !bytes.Equal(b, payload(seq, n)) {
		return 0, fmt.Errorf("record %d has the wrong content", seq)
	}
	return seq, nil
}

const (
	recordBytes = 200
	ckptBytes   = 64 << 10
	batchSize   = 8
	keepRecords = 256
)

// TestMain turns the test binary into the crash test's writer when the
// environment says so.
func TestMain(m *testing.M) {
	if dir := os.Getenv(crashEnv); dir != "" {
		if err := crashChild(dir); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// crashChild appends batches, checkpoints and compacts forever, printing
// "acked N" once records up to N are durable, until it is killed.
func crashChild(dir string) error {
	s, _, err := Open(dir)
	if err != nil {
		return err
	}
	recs := s.Experience()
	var next uint64
	if len(recs) > 0 {
		last, err := checkPayload(recs[len(recs)-1], recordBytes)
		if err != nil {
			return err
		}
		next = last + 1
	}
	out := bufio.NewWriter(os.Stdout)
	for batch := 0; ; batch++ {
		b := make([][]byte, batchSize)
		for i := range b {
			b[i] = payload(next, recordBytes)
			next++
		}
		if err := s.Append(b); err != nil {
			return err
		}
		recs = append(recs, b...)
		fmt.Fprintf(out, "acked %d\n", next-1)
		out.Flush()
		if batch%4 == 3 {
			if err := s.SaveCheckpoint("state", payload(next-1, ckptBytes)); err != nil {
				return err
			}
		}
		if len(recs) > 4*keepRecords {
			recs = recs[len(recs)-keepRecords:]
			if err := s.Compact(recs); err != nil {
				return err
			}
		}
	}
}

// TestCrashSafety SIGKILLs a writer at random moments and checks after each
// kill that the store opens, every recovered record and the checkpoint are
// intact, records are contiguous, nothing acknowledged was lost, and the
// checkpoint never goes backwards.
func TestCrashSafety(t *testing.T) {
	const kills = 40
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("AWARE_CRASH_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (set AWARE_CRASH_SEED to replay the kill times)", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	dir := t.TempDir()
	var lastAcked, lastCkpt int64 = -1, -1
	var leftovers, afterTorn int
	for i := range kills {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashEnv+"="+dir)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		acks := make(chan int64, 1024)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				if n, err := strconv.ParseInt(strings.TrimPrefix(sc.Text(), "acked "), 10, 64); err == nil {
					acks <- n
				}
			}
			close(acks)
		}()
		// Kill at three kinds of moment: anywhere from start-up on (which
		// includes opening and recovering the store), shortly after the
		// first durable batch, and after several batches (by then a
		// checkpoint has been written). Waiting for acknowledgements keeps
		// the test meaningful when a loaded machine starts the child slowly.
		waitFor := map[int]int64{0: -1, 1: 1, 2: 5}[i%3]
		deadline := time.After(30 * time.Second)
		for got := int64(0); got < waitFor; got++ {
			select {
			case n, ok := <-acks:
				if !ok {
					t.Fatalf("kill %d: child exited: %s", i, stderr.String())
				}
				lastAcked = max(lastAcked, n)
			case <-deadline:
				t.Fatalf("kill %d: child made no progress in 30s", i)
			}
		}
		time.Sleep(time.Duration(rng.IntN(map[int]int{0: 100, 1: 20, 2: 20}[i%3])) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		for n := range acks {
			lastAcked = max(lastAcked, n)
		}
		err = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("kill %d: child exited on its own (%v): %s", i, err, stderr.String())
		}

		s, rec, err := Open(dir)
		if err != nil {
			t.Fatalf("kill %d: reopen: %v", i, err)
		}
		if rec.DiscardedBytes > 0 {
			afterTorn++
		}
		recs := s.Experience()
		prev := int64(-1)
		for j, r := range recs {
			seq, err := checkPayload(r, recordBytes)
			if err != nil {
				t.Fatalf("kill %d: record %d: %v", i, j, err)
			}
			if prev >= 0 && int64(seq) != prev+1 {
				t.Fatalf("kill %d: record %d has seq %d after %d", i, j, seq, prev)
			}
			prev = int64(seq)
		}
		if prev < lastAcked {
			t.Fatalf("kill %d: acknowledged record %d lost; log ends at %d", i, lastAcked, prev)
		}
		if b, err := s.LoadCheckpoint("state"); err == nil {
			seq, err := checkPayload(b, ckptBytes)
			if err != nil {
				t.Fatalf("kill %d: checkpoint: %v", i, err)
			}
			if int64(seq) < lastCkpt || int64(seq) > prev {
				t.Fatalf("kill %d: checkpoint at %d; previous %d, log ends at %d", i, seq, lastCkpt, prev)
			}
			lastCkpt = int64(seq)
		} else if !errors.Is(err, ErrNotFound) || lastCkpt >= 0 {
			t.Fatalf("kill %d: checkpoint: %v", i, err)
		}
		if tmps, _ := filepath.Glob(filepath.Join(dir, "*.tmp-*")); len(tmps) > 0 {
			leftovers++ // Open must have removed interrupted temporaries.
		}
		s.Close()
	}
	if lastAcked < 0 || lastCkpt < 0 {
		t.Fatal("the child never acknowledged a write: the test proved nothing")
	}
	t.Logf("%d kills: %d records acknowledged, last checkpoint %d, %d reopens truncated a torn tail", kills, lastAcked+1, lastCkpt, afterTorn)
	if leftovers > 0 {
		t.Errorf("%d reopens left temporary files behind", leftovers)
	}
}
