package train

import (
	"fmt"
	"os"
	"path/filepath"
)

// WriteCheckpoint writes l's checkpoint (its MarshalBinary) to path
// crash-safely: into a temporary file in the same folder, fsynced, then
// renamed over path, and the folder fsynced. A reader sees the old file or
// the new one, never a torn one.
func WriteCheckpoint(path string, l Learner) error {
	b, err := l.MarshalBinary()
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return writeFileAtomic(path, b)
}

// LoadCheckpoint reads a learner of either kind (PPO or Meta-PPO, told
// apart by the checkpoint itself), configuration included, from a file
// written by WriteCheckpoint.
func LoadCheckpoint(path string) (Learner, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	l, err := ParseLearner(b)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return l, nil
}

func writeFileAtomic(path string, b []byte) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err := f.Write(b); err != nil {
		return fmt.Errorf("checkpoint: writing %s: %w", f.Name(), err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("checkpoint: fsync %s: %w", f.Name(), err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("checkpoint: closing %s: %w", f.Name(), err)
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	// Make the rename itself durable.
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("checkpoint: fsync %s: %w", dir, err)
	}
	return nil
}
