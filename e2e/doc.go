// Package e2e holds the end-to-end tests, built only with the e2e build tag:
// they need the loopback control plane that hack/testbed/up.sh starts (or
// hack/e2e.sh, which starts and stops it around them).
package e2e
