package main

import (
	"context"
	"io"
	"log/slog"

	kingpin "github.com/alecthomas/kingpin/v2"

	"github.com/debi-scaler/debi/exporter"
)

// exporterCommand is `debi exporter`: the process around an exporter.Server. ctx ends on SIGINT
// or SIGTERM; SIGHUP, like POST|PUT /-/reload, reloads the configuration (Server.Reload).
func exporterCommand(app *kingpin.Application) action {
	cmd := app.Command("exporter", "Query Prometheus, run the method and publish forecast, high-water, target and replica series.")
	opts := exporterFlags(cmd)
	return func(ctx context.Context, logger *slog.Logger, _, _ io.Writer) int {
		routeKlog(logger) // the ElasticScaler watch's client-go
		srv, err := exporter.NewServer(*opts, logger, newRegistry())
		if err == nil {
			err = runReloading(ctx, logger, opts.ConfigFile, srv.Run, srv.Reload)
		}
		if err != nil {
			logger.Error("exporter stopped", "err", err)
			return 1
		}
		return 0
	}
}
