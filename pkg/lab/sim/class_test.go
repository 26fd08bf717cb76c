package sim

import "testing"

func TestDominantClass(t *testing.T) {
	for _, tc := range []struct {
		name     string
		segments []string
		want     SegmentClass
	}{
		{name: "one segment", segments: []string{"kv-read"}, want: ClassExternal},
		// 0.250 s of CPU against 0.008 + 0.020 s of memory-I/O.
		{name: "time decides, not the count", segments: []string{"read-file", "read-file", "matrix-multiply"}, want: ClassCPU},
		// sleep waits 0.5 s per request: longer than any CPU segment.
		{name: "idle wait dominates", segments: []string{"sleep", "matrix-multiply"}, want: ClassIdle},
		{name: "unknown segments are ignored", segments: []string{"azure-fn", "write-file"}, want: ClassMemoryIO},
		{name: "no known segment", segments: []string{"azure-fn"}, want: ""},
		{name: "no segments", want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := App{Segments: tc.segments}
			if got := a.DominantClass(); got != tc.want {
				t.Errorf("DominantClass(%v) = %q, want %q", tc.segments, got, tc.want)
			}
		})
	}
}
