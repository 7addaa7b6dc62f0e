package main

import (
	"context"
	"io"
	"log/slog"

	kingpin "github.com/alecthomas/kingpin/v2"

	"github.com/debi-scaler/debi/webhook"
)

// webhookCommand is `debi webhook`: the process around a webhook.Server. ctx ends on SIGINT or
// SIGTERM; SIGHUP, like POST|PUT /-/reload, reloads the configuration (Server.Reload). The
// Server finds the cluster as kubectl does (--kubeconfig, $KUBECONFIG, ~/.kube/config,
// in-cluster).
func webhookCommand(app *kingpin.Application) action {
	cmd := app.Command("webhook", "Receive Alertmanager and Tidal events and patch replicas through the scale subresource.")
	opts := webhookFlags(cmd)
	return func(ctx context.Context, logger *slog.Logger, _, _ io.Writer) int {
		routeKlog(logger)
		srv, err := webhook.New(*opts, logger, newRegistry())
		if err == nil {
			err = runReloading(ctx, logger, opts.ConfigFile, srv.Run, srv.Reload)
		}
		if err != nil {
			logger.Error("webhook stopped", "err", err)
			return 1
		}
		return 0
	}
}
