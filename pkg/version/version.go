// Package version reports the build's version, stamped by the Makefile with
// -ldflags "-X github.com/aware-k8s/aware/pkg/version.Version=...".
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is the release or git description; "dev" for unstamped builds.
var Version = "dev"

// String returns a one-line description of the build.
func String() string {
	rev := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				rev = s.Value
			}
		}
	}
	return fmt.Sprintf("%s (revision %s, %s, %s/%s)", Version, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
