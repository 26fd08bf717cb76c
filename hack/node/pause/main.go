// Command pause is the pod sandbox's process for the real-node tier
// (make e2e-node): containerd needs a sandbox image, and the usual one comes
// from a registry this project cannot reach. It holds the pod's namespaces
// open until it is told to stop, and reaps the orphans a pod with a shared
// process namespace leaves to it as PID 1.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	// As PID 1 a process gets only the signals it handles: without these
	// the sandbox would ignore the runtime's SIGTERM and wait for SIGKILL.
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			return
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
