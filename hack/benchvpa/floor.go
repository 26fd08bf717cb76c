//go:build benchvpa

package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// The floor is the least a Go webhook can do on this stack: the same
// net/http TLS server as both sides, which reads the review, takes the
// request's uid from it without decoding the JSON, and answers a fixed
// review that allows the pod with a fixed patch. Whatever a real webhook
// adds (decoding, finding its autoscaler, computing the patch) is above
// it, so a webhook can beat VPA's p99 by no more than the floor does.

// floorSide names the floor in the harness's tables and logs.
const floorSide = "floor"

// floorPatch is a JSON patch of one container's requests and limits, as
// both sides patch the benchmark's one-container pod, base64-encoded as
// AdmissionResponse.patch is on the wire.
var floorPatch = base64.StdEncoding.EncodeToString([]byte(`[{"op":"add","path":"/spec/containers/0/resources/requests",` +
	`"value":{"cpu":"250m","memory":"262144000"}},{"op":"add","path":"/spec/containers/0/resources/limits",` +
	`"value":{"cpu":"500m","memory":"524288000"}}]`))

// floorMaxBody bounds what the floor reads, as both sides bound theirs.
const floorMaxBody = 3 << 20

// floorUID returns the uid of the review's request: the first "uid" key
// in the body. The API server (and reviewBodies) write the request's uid
// before its object, so the first is the request's; ok is false when
// there is none.
func floorUID(body []byte) (uid []byte, ok bool) {
	const key = `"uid":"`
	i := bytes.Index(body, []byte(key))
	if i < 0 {
		return nil, false
	}
	rest := body[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return nil, false
	}
	return rest[:j], true
}

// appendFloorReview appends the floor's answer to the review with uid.
func appendFloorReview(dst, uid []byte) []byte {
	dst = append(dst, `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","response":{"uid":"`...)
	dst = append(dst, uid...)
	dst = append(dst, `","allowed":true,"patch":"`...)
	dst = append(dst, floorPatch...)
	dst = append(dst, `","patchType":"JSONPatch"}}`...)
	return dst
}

// floorHandler answers every POST with the floor's review; a body without
// a uid gets HTTP 400.
func floorHandler() http.Handler {
	ct := []string{"application/json"}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, floorMaxBody))
		if err != nil {
			http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
			return
		}
		uid, ok := floorUID(body)
		if !ok {
			http.Error(w, "no uid in the review", http.StatusBadRequest)
			return
		}
		w.Header()["Content-Type"] = ct
		_, _ = w.Write(appendFloorReview(make([]byte, 0, 512), uid))
	})
}

// serveFloor serves the floor on addr over TLS until SIGTERM or SIGINT,
// with the server settings our webhook uses (admission-controller/pkg/webhook).
func serveFloor(addr, certFile, keyFile string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv := &http.Server{
		Addr:              addr,
		Handler:           floorHandler(),
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServeTLS(certFile, keyFile) }()
	select {
	case err := <-errc:
		return fmt.Errorf("floor webhook on %s: %w", addr, err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
