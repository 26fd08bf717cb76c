// Package store keeps the rl-agent's state on disk so that it survives
// restarts and crashes: an append-only experience log and named checkpoints
// (policy weights, per-workload lifecycle state).
//
// Crash safety rests on two mechanisms, each chosen for its access pattern:
//
//   - Experience arrives continuously in small batches, so it goes to an
//     append-only log. Every record carries its length and a CRC-32C; a
//     batch is written with one write and made durable with fsync before
//     Append returns. A crash can only tear the last, unacknowledged batch;
//     Open detects the torn or corrupt tail by its CRC, truncates it, and
//     keeps everything before it.
//   - Checkpoints are replaced as a whole, so they are written to a
//     temporary file, fsynced, renamed over the old one, and the directory
//     is fsynced (WriteFileAtomic). A reader sees the old or the new file,
//     never a mix. A framing header with a CRC catches bit rot and files
//     written by something else.
//
// Log compaction uses the checkpoint mechanism: the kept records are
// written to a new file that atomically replaces the log.
//
// A Store holds an exclusive flock on its directory: two agents writing the
// same state would corrupt each other's view of it.
//
// Both kinds of file start with a magic whose last byte is the format
// version (FormatVersion). A file of ours with another version is refused
// with ErrUnsupportedVersion and left untouched, never truncated as a torn
// tail or reported as corrupt: it was written by a newer agent, and a
// downgrade must not destroy it (docs/operations.md, "Compatibility").
package store

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
)

var (
	// ErrNotFound is returned by LoadCheckpoint for a name never saved.
	ErrNotFound = errors.New("checkpoint not found")
	// ErrCorrupt is returned for a checkpoint whose framing or CRC is wrong.
	ErrCorrupt = errors.New("corrupt checkpoint")
	// ErrLocked is returned by Open when another process holds the directory.
	ErrLocked = errors.New("state directory is locked by another process")
	// ErrTooLarge is returned for a record or checkpoint above the limits.
	ErrTooLarge = errors.New("too large")
	// ErrUnsupportedVersion is returned for a log or checkpoint of ours
	// (its magic is right) whose format version this build does not read:
	// one written by a newer agent. It is refused rather than reset, so a
	// downgrade cannot destroy state it does not understand.
	ErrUnsupportedVersion = errors.New("unsupported state format version")
)

// FormatVersion is the on-disk format this build writes and the only one
// it reads: the byte after the magic of the experience log and of every
// checkpoint. It changes only with an incompatible change of the framing
// (what is inside a checkpoint is versioned by its writer); a build that
// reads a new version must keep reading the previous one
// (docs/operations.md, "Compatibility").
const FormatVersion = 1

const (
	logName  = "experience.log"
	lockName = "LOCK"
	// MaxRecordSize bounds one experience record, so a corrupt length field
	// cannot make recovery allocate gigabytes.
	MaxRecordSize = 1 << 20
	// maxCheckpointSize bounds a checkpoint for the same reason.
	maxCheckpointSize = 1 << 30
	recordHeader      = 8 // u32 length, u32 CRC-32C of the payload
)

var (
	castagnoli    = crc32.MakeTable(crc32.Castagnoli)
	logMagic      = []byte("AWXLOG\x00\x01") // the last byte is FormatVersion
	ckptMagic     = []byte("AWCKPT\x00\x01")
	ckptHeader    = len(ckptMagic) + 8 + 4 // magic, u64 length, u32 CRC
	validCkptName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,100}$`)
)

// Recovery describes what Open found in the experience log.
type Recovery struct {
	// Records is the number of intact records.
	Records int
	// DiscardedBytes is the size of the torn or corrupt tail that was
	// truncated (0 after a clean shutdown).
	DiscardedBytes int64
}

// Store is the on-disk state of one agent. Its methods are safe for
// concurrent use.
type Store struct {
	dir  string
	lock *os.File

	mu      sync.Mutex
	log     *os.File
	records [][]byte // recovered at Open; handed out once by Experience
}

// Open opens (creating if needed) the state directory dir, takes its lock
// and recovers the experience log.
func Open(dir string) (*Store, Recovery, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, Recovery{}, fmt.Errorf("create state directory: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, Recovery{}, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, Recovery{}, fmt.Errorf("%s: %w", dir, ErrLocked)
		}
		return nil, Recovery{}, fmt.Errorf("lock %s: %w", dir, err)
	}
	s := &Store{dir: dir, lock: lock}
	rec, err := s.openLog()
	if err != nil {
		lock.Close()
		return nil, Recovery{}, err
	}
	// Remove temporaries of writes that a crash interrupted before rename.
	if tmps, err := filepath.Glob(filepath.Join(dir, "*.tmp-*")); err == nil {
		for _, t := range tmps {
			_ = os.Remove(t)
		}
	}
	return s, rec, nil
}

// Dir returns the state directory.
func (s *Store) Dir() string { return s.dir }

func (s *Store) openLog() (Recovery, error) {
	path := filepath.Join(s.dir, logName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return Recovery{}, fmt.Errorf("open experience log: %w", err)
	}
	records, good, size, err := readLog(f)
	if err != nil {
		f.Close()
		return Recovery{}, err
	}
	rec := Recovery{Records: len(records), DiscardedBytes: size - good}
	if good == 0 {
		// A new log, or one whose header was torn while it was created:
		// write and persist the header first, so that a log without one is
		// always a foreign or corrupt file.
		if err := f.Truncate(0); err != nil {
			f.Close()
			return Recovery{}, fmt.Errorf("reset experience log: %w", err)
		}
		if _, err := f.WriteAt(logMagic, 0); err != nil {
			f.Close()
			return Recovery{}, fmt.Errorf("write experience log header: %w", err)
		}
		good = int64(len(logMagic))
		if err := syncFileAndDir(f, s.dir); err != nil {
			f.Close()
			return Recovery{}, err
		}
	} else if good < size {
		if err := f.Truncate(good); err != nil {
			f.Close()
			return Recovery{}, fmt.Errorf("truncate torn tail of experience log: %w", err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return Recovery{}, fmt.Errorf("sync experience log: %w", err)
		}
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		f.Close()
		return Recovery{}, fmt.Errorf("seek experience log: %w", err)
	}
	s.log, s.records = f, records
	return rec, nil
}

// readLog returns the intact records, the offset just after the last one,
// and the file size. A file with a wrong header is an error rather than a
// torn tail: truncating it would destroy something that is not ours.
func readLog(f *os.File) (records [][]byte, good, size int64, err error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, 0, fmt.Errorf("stat experience log: %w", err)
	}
	size = fi.Size()
	if size == 0 {
		return nil, 0, 0, nil
	}
	r := bufio.NewReader(io.NewSectionReader(f, 0, size))
	magic := make([]byte, len(logMagic))
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != string(logMagic) {
		if size < int64(len(logMagic)) && string(magic[:size]) == string(logMagic[:size]) {
			// The header itself was torn while creating the log.
			return nil, 0, size, nil
		}
		if v, ok := otherVersion(magic, logMagic); ok {
			return nil, 0, size, fmt.Errorf("experience log %s has format version %d, this agent reads %d: %w", f.Name(), v, FormatVersion, ErrUnsupportedVersion)
		}
		return nil, 0, size, fmt.Errorf("experience log %s has no valid header: %w", f.Name(), ErrCorrupt)
	}
	good = int64(len(logMagic))
	var hdr [recordHeader]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return records, good, size, nil
		}
		n := binary.LittleEndian.Uint32(hdr[0:4])
		sum := binary.LittleEndian.Uint32(hdr[4:8])
		if n > MaxRecordSize || int64(n) > size-good-recordHeader {
			return records, good, size, nil
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(r, payload); err != nil {
			return records, good, size, nil
		}
		if recordCRC(payload) != sum {
			return records, good, size, nil
		}
		records = append(records, payload)
		good += recordHeader + int64(n)
	}
}

// Experience returns the records recovered at Open (or written by the last
// Compact), oldest first, and releases the store's reference to them.
func (s *Store) Experience() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.records
	s.records = nil
	return r
}

// Append writes records to the experience log and makes them durable
// before returning. They are written with a single write call so that a
// crash tears at most this batch.
func (s *Store) Append(records [][]byte) error {
	if len(records) == 0 {
		return nil
	}
	buf, err := encodeRecords(records)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.log == nil {
		return errors.New("store is closed")
	}
	if _, err := s.log.Write(buf); err != nil {
		return fmt.Errorf("append to experience log: %w", err)
	}
	if err := s.log.Sync(); err != nil {
		return fmt.Errorf("sync experience log: %w", err)
	}
	return nil
}

// recordCRC covers the length as well as the payload, and is masked, so
// that a zero-filled tail (what some file systems leave after a crash
// extended the file but not its data) never parses as empty records.
func recordCRC(payload []byte) uint32 {
	var n [4]byte
	binary.LittleEndian.PutUint32(n[:], uint32(len(payload)))
	c := crc32.Update(crc32.Checksum(n[:], castagnoli), castagnoli, payload)
	return (c>>15 | c<<17) + 0xa282ead8
}

func encodeRecords(records [][]byte) ([]byte, error) {
	total := 0
	for _, r := range records {
		if len(r) > MaxRecordSize {
			return nil, fmt.Errorf("experience record of %d bytes: %w (limit %d)", len(r), ErrTooLarge, MaxRecordSize)
		}
		total += recordHeader + len(r)
	}
	buf := make([]byte, 0, total)
	for _, r := range records {
		buf = binary.LittleEndian.AppendUint32(buf, uint32(len(r)))
		buf = binary.LittleEndian.AppendUint32(buf, recordCRC(r))
		buf = append(buf, r...)
	}
	return buf, nil
}

// Compact replaces the experience log with keep, atomically: after a crash
// the log holds either the old records or exactly keep.
func (s *Store) Compact(keep [][]byte) error {
	body, err := encodeRecords(keep)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.log == nil {
		return errors.New("store is closed")
	}
	path := filepath.Join(s.dir, logName)
	if err := WriteFileAtomic(path, append(append([]byte(nil), logMagic...), body...)); err != nil {
		return fmt.Errorf("compact experience log: %w", err)
	}
	// The old handle now refers to the replaced file: appending to it would
	// lose records silently, so it is closed whatever happens next.
	s.log.Close()
	s.log = nil
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("reopen experience log: %w", err)
	}
	s.log = f
	return nil
}

// SaveCheckpoint atomically replaces the checkpoint name with data. Names
// are lower-case file names, e.g. "policy" or "agents".
func (s *Store) SaveCheckpoint(name string, data []byte) error {
	if !validCkptName.MatchString(name) {
		return fmt.Errorf("invalid checkpoint name %q", name)
	}
	if len(data) > maxCheckpointSize {
		return fmt.Errorf("checkpoint %s of %d bytes: %w", name, len(data), ErrTooLarge)
	}
	buf := make([]byte, 0, ckptHeader+len(data))
	buf = append(buf, ckptMagic...)
	buf = binary.LittleEndian.AppendUint64(buf, uint64(len(data)))
	buf = binary.LittleEndian.AppendUint32(buf, crc32.Checksum(data, castagnoli))
	buf = append(buf, data...)
	if err := WriteFileAtomic(s.ckptPath(name), buf); err != nil {
		return fmt.Errorf("save checkpoint %s: %w", name, err)
	}
	return nil
}

// LoadCheckpoint returns the data last saved under name, ErrNotFound if
// none was, or ErrCorrupt if the file fails its checks.
func (s *Store) LoadCheckpoint(name string) ([]byte, error) {
	if !validCkptName.MatchString(name) {
		return nil, fmt.Errorf("invalid checkpoint name %q", name)
	}
	b, err := os.ReadFile(s.ckptPath(name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("load checkpoint %s: %w", name, err)
	}
	if len(b) < ckptHeader || string(b[:len(ckptMagic)]) != string(ckptMagic) {
		if v, ok := otherVersion(b, ckptMagic); ok {
			return nil, fmt.Errorf("checkpoint %s has format version %d, this agent reads %d: %w", name, v, FormatVersion, ErrUnsupportedVersion)
		}
		return nil, fmt.Errorf("checkpoint %s: bad header: %w", name, ErrCorrupt)
	}
	n := binary.LittleEndian.Uint64(b[len(ckptMagic):])
	sum := binary.LittleEndian.Uint32(b[len(ckptMagic)+8:])
	data := b[ckptHeader:]
	if uint64(len(data)) != n {
		return nil, fmt.Errorf("checkpoint %s: %d bytes, header says %d: %w", name, len(data), n, ErrCorrupt)
	}
	if crc32.Checksum(data, castagnoli) != sum {
		return nil, fmt.Errorf("checkpoint %s: checksum mismatch: %w", name, ErrCorrupt)
	}
	return data, nil
}

// otherVersion reports the format version of a header that is ours (the
// magic up to its version byte matches) but of a version other than
// FormatVersion.
func otherVersion(header, magic []byte) (byte, bool) {
	n := len(magic) - 1
	if len(header) < len(magic) || string(header[:n]) != string(magic[:n]) || header[n] == FormatVersion {
		return 0, false
	}
	return header[n], true
}

func (s *Store) ckptPath(name string) string { return filepath.Join(s.dir, name+".ckpt") }

// Close closes the log and releases the directory lock.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	if s.log != nil {
		errs = append(errs, s.log.Close())
		s.log = nil
	}
	if s.lock != nil {
		errs = append(errs, s.lock.Close()) // closing the fd releases the flock
		s.lock = nil
	}
	return errors.Join(errs...)
}

// WriteFileAtomic replaces path with data so that, after a crash at any
// point, path holds either its previous content or data: write a temporary
// file in the same directory, fsync it, rename it over path, fsync the
// directory (which makes the rename itself durable).
func WriteFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("create temporary file: %w", err)
	}
	tmp := f.Name()
	defer func() {
		if tmp != "" {
			_ = os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	tmp = ""
	return syncDir(dir)
}

func syncFileAndDir(f *os.File, dir string) error {
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", f.Name(), err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
