package loadgen

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"syscall"
)

// CheckTarget accepts only an http or https URL whose host is localhost or
// a loopback IP (127.0.0.0/8, ::1): the load generator never sends traffic
// off the machine.
func CheckTarget(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("target %q: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("target %q: scheme %q, want http or https", raw, u.Scheme)
	}
	if err := checkLoopbackHost(u.Hostname()); err != nil {
		return nil, fmt.Errorf("target %q: %w", raw, err)
	}
	return u, nil
}

// CheckListenAddress accepts only a host:port whose host is loopback.
func CheckListenAddress(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: %w", addr, err)
	}
	if err := checkLoopbackHost(host); err != nil {
		return fmt.Errorf("address %q: %w", addr, err)
	}
	return nil
}

func checkLoopbackHost(host string) error {
	if strings.EqualFold(host, "localhost") {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("host %q is not loopback: only localhost, 127.0.0.0/8 and ::1 are allowed", host)
}

// dialLoopbackOnly is a net.Dialer Control that refuses any connection
// whose resolved address is not loopback, so neither a name that resolves
// elsewhere nor a redirect can take traffic off the machine.
func dialLoopbackOnly(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("dial %q: %w", address, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("dial %q: refused, the address is not loopback", address)
	}
	return nil
}
