package process

import (
	"context"
	"log/slog"

	"k8s.io/client-go/kubernetes"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/internal/kube"
)

// RunLeaderElected runs fn while this webhook replica (identity) holds the Lease le
// (webhook.leader_election), campaigning again after losing it, until ctx ends: the webhook's
// Tidal watch and ElasticScaler actors.
func RunLeaderElected(ctx context.Context, client kubernetes.Interface, le config.LeaderElectionConfig, identity string,
	logger *slog.Logger, leading func(bool), fn func(context.Context)) error {
	return kube.RunLeaderElected(ctx, kube.Lease{Client: client.CoordinationV1(), Namespace: le.Namespace, Name: le.Name,
		Identity: identity, Elector: "debi-webhook", LeaseDuration: le.LeaseDuration, RenewDeadline: le.RenewDeadline,
		RetryPeriod: le.RetryPeriod}, logger.With("acting_on", "watches"), leading, func(ctx context.Context) error { fn(ctx); return nil })
}
