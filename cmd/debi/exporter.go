package main

import (
	"context"
	"io"
	"log/slog"

	kingpin "github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/debi-scaler/debi/exporter"
)

// exporterCommand is `debi exporter`. ctx ends on SIGINT or SIGTERM; exporter.Run reloads the
// configuration on SIGHUP and POST|PUT /-/reload.
func exporterCommand(app *kingpin.Application) action {
	cmd := app.Command("exporter", "Query Prometheus, run the method and publish forecast, high-water, target and replica series.")
	opts := exporter.RegisterFlags(cmd)
	return func(ctx context.Context, logger *slog.Logger, _, _ io.Writer) int {
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		if err := exporter.Run(ctx, *opts, logger, reg); err != nil {
			logger.Error("exporter stopped", "err", err)
			return 1
		}
		return 0
	}
}
