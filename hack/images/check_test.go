package main

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"slices"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// checkImage reports how img departs from the contract of the image of s
// tagged version: entrypoint, user, platform and labels.
func checkImage(img v1.Image, s Spec, version string) error {
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	var errs []error
	if want := []string{s.Entrypoint()}; !slices.Equal(cf.Config.Entrypoint, want) {
		errs = append(errs, fmt.Errorf("entrypoint %q, want %q", cf.Config.Entrypoint, want))
	}
	if len(cf.Config.Cmd) != 0 {
		errs = append(errs, fmt.Errorf("cmd %q, want none", cf.Config.Cmd))
	}
	if cf.Config.User != User {
		errs = append(errs, fmt.Errorf("user %q, want %q", cf.Config.User, User))
	}
	if cf.OS != "linux" || cf.Architecture != s.Arch {
		errs = append(errs, fmt.Errorf("platform %s/%s, want linux/%s", cf.OS, cf.Architecture, s.Arch))
	}
	want := s.Labels()
	want[labelVersion] = version
	for k, v := range want {
		if k == labelCreated {
			continue // the commit time: checked for reproducibility, not value
		}
		if got := cf.Config.Labels[k]; got != v {
			errs = append(errs, fmt.Errorf("label %s=%q, want %q", k, got, v))
		}
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	if len(layers) != 1 {
		errs = append(errs, fmt.Errorf("%d layers, want 1 (scratch plus the binary)", len(layers)))
	}
	return errors.Join(errs...)
}

// extractFile returns the content of the file at path (no leading slash)
// in img's flattened filesystem.
func extractFile(img v1.Image, path string) ([]byte, error) {
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("no %s in the image", path)
		}
		if err != nil {
			return nil, err
		}
		if h.Name == path {
			if h.Mode&0o111 == 0 {
				return nil, fmt.Errorf("%s has mode %o: not executable", path, h.Mode)
			}
			return io.ReadAll(tr)
		}
	}
}
