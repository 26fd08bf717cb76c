package certs

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
)

// FileReloader serves a certificate and key read from files, and re-reads
// them when either file's modification time or size changes, so that a
// renewed certificate (cert-manager, a mounted Secret) is picked up without
// a restart. The files are checked at most once per CheckInterval, during
// a TLS handshake; kept-alive connections make handshakes rare.
//
// A failed reload keeps the previous pair: a Secret update writes the two
// files one after the other, and between the writes they do not match.
type FileReloader struct {
	CertFile, KeyFile string
	CheckInterval     time.Duration
	Logger            klog.Logger

	cert atomic.Pointer[tls.Certificate]

	mu        sync.Mutex
	lastCheck time.Time
	stamp     [2]fileStamp
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// NewFileReloader loads the pair once and fails if it cannot.
func NewFileReloader(certFile, keyFile string, logger klog.Logger) (*FileReloader, error) {
	r := &FileReloader{CertFile: certFile, KeyFile: keyFile, CheckInterval: time.Second, Logger: logger}
	stamp, err := r.stat()
	if err != nil {
		return nil, err
	}
	if err := r.load(stamp); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *FileReloader) stat() ([2]fileStamp, error) {
	var s [2]fileStamp
	for i, f := range []string{r.CertFile, r.KeyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return s, err // os.PathError already names the file
		}
		s[i] = fileStamp{mod: fi.ModTime(), size: fi.Size()}
	}
	return s, nil
}

func (r *FileReloader) load(stamp [2]fileStamp) error {
	c, err := tls.LoadX509KeyPair(r.CertFile, r.KeyFile)
	if err != nil {
		return fmt.Errorf("load key pair %s, %s: %w", r.CertFile, r.KeyFile, err)
	}
	r.cert.Store(&c)
	r.stamp = stamp
	return nil
}

// GetCertificate is for tls.Config.GetCertificate.
func (r *FileReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.maybeReload(time.Now())
	return r.cert.Load(), nil
}

// GetClientCertificate is for tls.Config.GetClientCertificate: the pair
// is presented to a mutual-TLS server, reloaded as for GetCertificate.
func (r *FileReloader) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return r.GetCertificate(nil)
}

// Current returns the certificate now served.
func (r *FileReloader) Current() *tls.Certificate { return r.cert.Load() }

func (r *FileReloader) maybeReload(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now.Sub(r.lastCheck) < r.CheckInterval {
		return
	}
	r.lastCheck = now
	stamp, err := r.stat()
	if err != nil {
		r.Logger.Error(err, "Checking serving certificate; keeping the current one")
		return
	}
	if stamp == r.stamp {
		return
	}
	if err := r.load(stamp); err != nil {
		r.Logger.Error(err, "Reloading serving certificate; keeping the current one")
		return
	}
	r.Logger.Info("Reloaded serving certificate", "certFile", r.CertFile)
}
