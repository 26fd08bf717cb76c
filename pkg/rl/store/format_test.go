package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestFormatVersion checks the refusal of a format this build does not
// read: a log or checkpoint whose magic is ours but whose version byte is
// not FormatVersion fails with ErrUnsupportedVersion (not ErrCorrupt, and
// not a reset), and the file is left as it was, so that an agent
// downgraded by mistake neither truncates nor overwrites a newer agent's
// state.
func TestFormatVersion(t *testing.T) {
	withVersion := func(magic []byte, v byte) []byte {
		m := bytes.Clone(magic)
		m[len(m)-1] = v
		return m
	}
	if got := logMagic[len(logMagic)-1]; got != FormatVersion {
		t.Fatalf("the log's magic ends in version %d, FormatVersion is %d", got, FormatVersion)
	}
	if got := ckptMagic[len(ckptMagic)-1]; got != FormatVersion {
		t.Fatalf("the checkpoint's magic ends in version %d, FormatVersion is %d", got, FormatVersion)
	}

	for _, v := range []byte{0, FormatVersion + 1, 0xff} {
		t.Run(fmt.Sprintf("log version %d", v), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, logName)
			// A newer log with a record after its header: Open must keep
			// it byte for byte, not take the record for a torn tail.
			content := append(withVersion(logMagic, v), 5, 0, 0, 0, 1, 2, 3, 4, 'a', 'b', 'c', 'd', 'e')
			if err := os.WriteFile(path, content, 0o600); err != nil {
				t.Fatal(err)
			}
			_, _, err := Open(dir)
			if !errors.Is(err, ErrUnsupportedVersion) || errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open = %v, want ErrUnsupportedVersion only", err)
			}
			if b, _ := os.ReadFile(path); !bytes.Equal(b, content) {
				t.Fatalf("the log was modified: %q, was %q", b, content)
			}
		})
		t.Run(fmt.Sprintf("checkpoint version %d", v), func(t *testing.T) {
			dir := t.TempDir()
			s, _ := mustOpen(t, dir)
			defer s.Close()
			if err := s.SaveCheckpoint("state", []byte(`{"x":1}`)); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "state.ckpt")
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			newer := append(withVersion(ckptMagic, v), b[len(ckptMagic):]...)
			if err := os.WriteFile(path, newer, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err = s.LoadCheckpoint("state")
			if !errors.Is(err, ErrUnsupportedVersion) || errors.Is(err, ErrCorrupt) {
				t.Fatalf("LoadCheckpoint = %v, want ErrUnsupportedVersion only", err)
			}
			if got, _ := os.ReadFile(path); !bytes.Equal(got, newer) {
				t.Fatal("the checkpoint was modified")
			}
		})
	}

	// Another program's file is still corrupt, not a version: only our
	// magic up to the version byte makes a version.
	t.Run("foreign checkpoint", func(t *testing.T) {
		dir := t.TempDir()
		s, _ := mustOpen(t, dir)
		defer s.Close()
		if err := os.WriteFile(filepath.Join(dir, "state.ckpt"), []byte("AWCKPX\x00\x02 and more bytes"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := s.LoadCheckpoint("state"); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("LoadCheckpoint = %v, want ErrCorrupt", err)
		}
	})
}
