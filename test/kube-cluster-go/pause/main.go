// Command pause is the cluster's sandbox (pause) image's only program: it holds a pod's
// namespaces open, reaps the zombies of a shared PID namespace, and exits on SIGTERM or SIGINT,
// as registry.k8s.io/pause does. Built here because no registry is reachable.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range signals {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
