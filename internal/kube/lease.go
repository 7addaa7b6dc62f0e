package kube

import (
	"context"
	"log/slog"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// The timings of a Lease when none are configured (client-go's recommended ones): the
// webhook's webhook.leader_election and the Tidal controller's.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// LeaseDefaults sets each zero timing to its default.
func LeaseDefaults(leaseDuration, renewDeadline, retryPeriod *time.Duration) {
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{leaseDuration, DefaultLeaseDuration}, {renewDeadline, DefaultRenewDeadline}, {retryPeriod, DefaultRetryPeriod}} {
		if *d.v == 0 {
			*d.v = d.def
		}
	}
}

// Lease is a leader election on a coordination.k8s.io Lease.
type Lease struct {
	Client          coordinationv1.LeasesGetter
	Namespace, Name string
	// Identity is this replica's holder identity; Elector names the elector in client-go's logs.
	Identity, Elector                         string
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// RunLeaderElected runs fn while this replica holds the lease, campaigning again after losing
// it, until ctx ends or fn fails: leading is told of each change (a metric), fn's context ends
// when the lease is lost, and the lease is released when ctx ends. It returns fn's error, or
// the elector's configuration error, or nil when ctx ended.
func RunLeaderElected(ctx context.Context, l Lease, logger *slog.Logger, leading func(bool), fn func(context.Context) error) error {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: l.Namespace, Name: l.Name},
		Client:     l.Client,
		LockConfig: resourcelock.ResourceLockConfig{Identity: l.Identity},
	}
	name := l.Namespace + "/" + l.Name
	var runErr error
	for ctx.Err() == nil {
		ctx, cancel := context.WithCancel(ctx)
		el, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   l.LeaseDuration,
			RenewDeadline:   l.RenewDeadline,
			RetryPeriod:     l.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            l.Elector,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) {
					logger.Info("acquired the lease", "lease", name, "identity", l.Identity)
					leading(true)
					if err := fn(ctx); err != nil {
						runErr = err
						cancel()
					}
				},
				OnStoppedLeading: func() {
					leading(false)
					logger.Info("not leading", "lease", name, "identity", l.Identity)
				},
			},
		})
		if err != nil {
			cancel()
			return err
		}
		el.Run(ctx)
		cancel()
		if runErr != nil {
			return runErr
		}
	}
	return nil
}
