// Command client-go-elector is the bench's client-go peer: k8s.io/client-go/tools/leaderelection
// itself with a LeaseLock, one process per pod, speaking the same lines and flags as the bench
// expects of every Lease-based candidate:
//
//	KUBECONFIG=… POD_NAME=web-1 POD_NAMESPACE=shop client-go-elector --lease NAME \
//	  [--lease-duration 15000] [--renew-deadline 10000] [--retry-period 2000] [--release-on-cancel]
//	  [--identity ID]
//
// One JSON line per event on stdout: started, acquired, new-leader, stopped-leading, released.
// SIGTERM cancels the election's context, as a controller's shutdown does; SIGKILL is a crash.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

var stdout sync.Mutex

func emit(event string, fields map[string]any) {
	line := map[string]any{"event": event, "at": time.Now().UnixMilli()}
	for k, v := range fields {
		line[k] = v
	}
	data, _ := json.Marshal(line)
	stdout.Lock()
	defer stdout.Unlock()
	os.Stdout.Write(append(data, '\n'))
}

// releaseObserver is the LeaseLock as client-go uses it, noticing the one write that names no
// holder: client-go's release on cancel, which has no callback of its own.
type releaseObserver struct {
	resourcelock.Interface
}

func (l releaseObserver) Update(ctx context.Context, record resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Update(ctx, record)
	if record.HolderIdentity == "" {
		emit("released", map[string]any{"ok": err == nil})
	}
	return err
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "client-go elector:", err)
		os.Exit(2)
	}
}

func run() error {
	lease := flag.String("lease", "", "the Lease's name (required)")
	leaseMs := flag.Int("lease-duration", 15_000, "LeaseDuration in ms")
	renewMs := flag.Int("renew-deadline", 10_000, "RenewDeadline in ms")
	retryMs := flag.Int("retry-period", 2_000, "RetryPeriod in ms")
	releaseOnCancel := flag.Bool("release-on-cancel", false, "ReleaseOnCancel")
	// A restarted process that keeps its predecessor's identity is what client-go treats as the
	// leader renewing: the bench measures that against a new identity per process, the usual setup.
	fixedIdentity := flag.String("identity", "", "the identity; default POD_NAME_<random uuid>, new per process")
	flag.Parse()
	pod, namespace := os.Getenv("POD_NAME"), os.Getenv("POD_NAMESPACE")
	if *lease == "" || pod == "" {
		return fmt.Errorf("--lease and POD_NAME are required")
	}
	if namespace == "" {
		namespace = "default"
	}
	config, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		return fmt.Errorf("KUBECONFIG: %w", err)
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	// A controller that lost its lease exits non-zero and the kubelet starts it again: here the
	// same process campaigns again at once, under a new identity unless one was given, so an
	// election on a loaded host does not shrink by one candidate at each lost renew deadline.
	for {
		identity := *fixedIdentity
		if identity == "" {
			identity = pod + "_" + uuid.NewString()
		}
		if err := campaign(ctx, client, namespace, *lease, identity, timing{*leaseMs, *renewMs, *retryMs}, *releaseOnCancel); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
		emit("restarting", map[string]any{"reason": "lost"})
	}
}

type timing struct{ leaseMs, renewMs, retryMs int }

// campaign runs one client-go elector until it stops leading or ctx ends.
func campaign(ctx context.Context, client kubernetes.Interface, namespace, lease, identity string, t timing, releaseOnCancel bool) error {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: lease, Namespace: namespace},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
	}
	var led atomic.Bool
	stopped := func() {
		// client-go calls this however Run ends, leading or not; the bench's line means "was leading".
		if !led.Load() {
			return
		}
		reason := "lost"
		if ctx.Err() != nil {
			reason = "cancelled"
		}
		emit("stopped-leading", map[string]any{"reason": reason})
	}
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            releaseObserver{lock},
		LeaseDuration:   time.Duration(t.leaseMs) * time.Millisecond,
		RenewDeadline:   time.Duration(t.renewMs) * time.Millisecond,
		RetryPeriod:     time.Duration(t.retryMs) * time.Millisecond,
		ReleaseOnCancel: releaseOnCancel,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {
				led.Store(true)
				emit("acquired", map[string]any{"identity": identity})
			},
			OnStoppedLeading: stopped,
			OnNewLeader:      func(holder string) { emit("new-leader", map[string]any{"holder": holder}) },
		},
	})
	if err != nil {
		return err
	}
	emit("started", map[string]any{"identity": identity, "releaseOnCancel": releaseOnCancel})
	elector.Run(ctx)
	return nil
}
