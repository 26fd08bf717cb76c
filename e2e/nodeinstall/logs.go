package nodeinstall

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// KeepPodLogs copies the kubelet's log files of the pods in namespace
// (pod-logs/<namespace>_<pod>_<uid>/<container>/<restart>.log, rotated files
// included) under dst, in the same layout, and returns how many files it
// copied. The kubelet removes a pod's directory once the pod is deleted, so
// a caller that wants the components' logs after a run calls it before
// Uninstall. A namespace without pods copies nothing and is no error.
func (e Env) KeepPodLogs(namespace, dst string) (int, error) {
	root := filepath.Join(e.NodeDir, "pod-logs")
	dirs, err := os.ReadDir(root)
	if err != nil {
		return 0, fmt.Errorf("pod logs: %w", err)
	}
	n := 0
	var errs []error
	for _, d := range dirs {
		if !d.IsDir() || !strings.HasPrefix(d.Name(), namespace+"_") {
			continue
		}
		src := filepath.Join(root, d.Name())
		err := filepath.WalkDir(src, func(path string, de fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if de.IsDir() {
				return nil
			}
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			if err := copyFile(path, filepath.Join(dst, rel)); err != nil {
				return err
			}
			n++
			return nil
		})
		// A pod deleted while it is walked loses its directory: keep what
		// the others hold.
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return n, errors.Join(errs...)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return out.Close()
}
