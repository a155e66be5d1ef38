// Command client-go-labeller is the bench's client-go peer in the real cluster: a Lease-based
// labelling sidecar as such sidecars are written. k8s.io/client-go/tools/leaderelection with a
// LeaseLock and ReleaseOnCancel (what test/kube-apiserver-go/client-go-elector runs against the
// bench's API server), in a pod of its own workload: the pod whose elector holds the Lease carries
// a label (set in OnStartedLeading), taken off again in OnStoppedLeading, so a Service selecting
// the label routes to the leader.
//
//	POD_NAME=… POD_NAMESPACE=… client-go-labeller --lease NAME --label KEY=VALUE \
//	  [--lease-duration 15000] [--renew-deadline 10000] [--retry-period 2000]
//
// In-cluster credentials (the pod's ServiceAccount). SIGTERM cancels the election: client-go
// releases the Lease, then the label goes. One JSON line per event on stdout, for kubectl logs.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

func emit(event string, fields map[string]any) {
	line := map[string]any{"event": event, "at": time.Now().UnixMilli()}
	for k, v := range fields {
		line[k] = v
	}
	data, _ := json.Marshal(line)
	os.Stdout.Write(append(data, '\n'))
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "client-go labeller:", err)
		os.Exit(2)
	}
}

// labeller sets and removes the leader label on its own pod, one patch at a time: the label set
// by a campaign that has since stopped must not land after its removal.
type labeller struct {
	mu        sync.Mutex
	client    kubernetes.Interface
	namespace string
	pod       string
	key       string
	value     string
}

func (l *labeller) patch(ctx context.Context, value any) error {
	body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{l.key: value}}})
	_, err := l.client.CoreV1().Pods(l.namespace).Patch(ctx, l.pod, types.MergePatchType, body, metav1.PatchOptions{})
	return err
}

// set labels the pod leader unless the term that asked has ended meanwhile.
func (l *labeller) set(term context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if term.Err() != nil {
		return
	}
	err := l.patch(term, l.value)
	emit("labelled", map[string]any{"ok": err == nil, "error": errText(err)})
}

// clear takes the label off; its own deadline, since it runs after the election's context ended.
func (l *labeller) clear(why string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := l.patch(ctx, nil)
	emit("unlabelled", map[string]any{"why": why, "ok": err == nil, "error": errText(err)})
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func run() error {
	lease := flag.String("lease", "", "the Lease's name (required)")
	label := flag.String("label", "", "the leader label, KEY=VALUE (required)")
	leaseMs := flag.Int("lease-duration", 15_000, "LeaseDuration in ms")
	renewMs := flag.Int("renew-deadline", 10_000, "RenewDeadline in ms")
	retryMs := flag.Int("retry-period", 2_000, "RetryPeriod in ms")
	flag.Parse()
	pod, namespace := os.Getenv("POD_NAME"), os.Getenv("POD_NAMESPACE")
	key, value, ok := strings.Cut(*label, "=")
	if *lease == "" || !ok || key == "" || pod == "" || namespace == "" {
		return fmt.Errorf("--lease, --label KEY=VALUE, POD_NAME and POD_NAMESPACE are required")
	}
	config, err := rest.InClusterConfig()
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	l := &labeller{client: client, namespace: namespace, pod: pod, key: key, value: value}
	// A container restarted in a pod that led keeps the pod's label: no term of this process has it.
	l.clear("starting")
	// A lost Lease ends a campaign; the same process campaigns again under a new identity, as a
	// sidecar restarted by the kubelet would.
	for ctx.Err() == nil {
		if err := campaign(ctx, client, l, *lease, timing{*leaseMs, *renewMs, *retryMs}); err != nil {
			return err
		}
	}
	return nil
}

type timing struct{ leaseMs, renewMs, retryMs int }

func campaign(ctx context.Context, client kubernetes.Interface, l *labeller, lease string, t timing) error {
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	identity := l.pod + "_" + hex.EncodeToString(suffix)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Name: lease, Namespace: l.namespace},
			Client:     client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
		},
		LeaseDuration:   time.Duration(t.leaseMs) * time.Millisecond,
		RenewDeadline:   time.Duration(t.renewMs) * time.Millisecond,
		RetryPeriod:     time.Duration(t.retryMs) * time.Millisecond,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(term context.Context) {
				emit("acquired", map[string]any{"identity": identity})
				l.set(term)
			},
			// client-go calls it however Run ends, after the release on cancel.
			OnStoppedLeading: func() {
				reason := "lost"
				if ctx.Err() != nil {
					reason = "cancelled"
				}
				l.clear(reason)
			},
		},
	})
	if err != nil {
		return err
	}
	emit("started", map[string]any{"identity": identity})
	elector.Run(ctx)
	return nil
}
