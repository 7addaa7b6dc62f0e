package main

import (
	"context"
	"io"
	"log/slog"

	kingpin "github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/debi-scaler/debi/webhook"
)

// webhookCommand is `debi webhook`. ctx ends on SIGINT or SIGTERM; webhook.Run itself reloads
// the configuration on SIGHUP and POST|PUT /-/reload, and finds the cluster as kubectl does
// (--kubeconfig, $KUBECONFIG, ~/.kube/config, in-cluster).
func webhookCommand(app *kingpin.Application) action {
	cmd := app.Command("webhook", "Receive Alertmanager and Tidal events and patch replicas through the scale subresource.")
	opts := webhook.RegisterFlags(cmd)
	return func(ctx context.Context, logger *slog.Logger, _, _ io.Writer) int {
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		if err := webhook.Run(ctx, *opts, logger, reg); err != nil {
			logger.Error("webhook stopped", "err", err)
			return 1
		}
		return 0
	}
}
