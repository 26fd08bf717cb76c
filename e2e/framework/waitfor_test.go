package framework

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestWaitFor(t *testing.T) {
	cause := errors.New("replicas 2, want 3")
	for _, tc := range []struct {
		name string
		cond func(context.Context) (bool, error)
		want []string // substrings of the error; nil: success
	}{
		{"holds", func(context.Context) (bool, error) { return true, nil }, nil},
		{"never holds", func(context.Context) (bool, error) { return false, nil }, []string{"scale: timed out"}},
		{"permanent", func(context.Context) (bool, error) { return false, errors.Join(ErrPermanent, cause) }, []string{"permanent failure", "replicas 2"}},
		{"the deadline does not hide the cause", func(ctx context.Context) (bool, error) {
			// Fails for a reason of its own until the deadline cuts the
			// last poll short.
			select {
			case <-ctx.Done():
				return false, ctx.Err()
			case <-time.After(time.Millisecond):
				return false, cause
			}
		}, []string{"timed out", "last: replicas 2, want 3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := WaitFor(context.Background(), 50*time.Millisecond, 5*time.Millisecond, "scale", tc.cond)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
