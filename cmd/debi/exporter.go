package main

import (
	"context"
	"io"
	"log/slog"

	kingpin "github.com/alecthomas/kingpin/v2"
	oklogrun "github.com/oklog/run"

	"github.com/debi-scaler/debi/exporter"
	"github.com/debi-scaler/debi/internal/process"
)

// exporterCommand is `debi exporter`: the process around an exporter.Server. ctx ends on SIGINT
// or SIGTERM; SIGHUP, like POST|PUT /-/reload, reloads the configuration (Server.Reload).
func exporterCommand(app *kingpin.Application) action {
	cmd := app.Command("exporter", "Query Prometheus, run the method and publish forecast, high-water, target and replica series.")
	opts := exporterFlags(cmd)
	return func(ctx context.Context, logger *slog.Logger, _, _ io.Writer) int {
		routeKlog(logger) // the ElasticScaler watch's client-go
		srv, err := exporter.NewServer(opts.Options, logger, newRegistry())
		if err == nil {
			serve := func(ctx context.Context) error { return serveExporter(ctx, srv, *opts, logger) }
			err = runReloading(ctx, logger, opts.ConfigFile, serve, srv.Reload)
		}
		if err != nil {
			logger.Error("exporter stopped", "err", err)
			return 1
		}
		return 0
	}
}

// exporterOptions are the settings of `debi exporter` (exporterFlags): the exporter's, and the
// process's HTTP server.
type exporterOptions struct {
	exporter.Options
	// ListenAddress serves the Server's Handler (--web.listen-address, default :9107);
	// WebConfigFile is exporter-toolkit's TLS and basic-auth file (--web.config.file).
	ListenAddress string
	WebConfigFile string
}

// serveExporter serves srv's Handler on o.ListenAddress and runs srv (Server.Run) until ctx
// ends (then it returns nil) or either fails.
func serveExporter(ctx context.Context, srv *exporter.Server, o exporterOptions, logger *slog.Logger) error {
	hs := process.HTTP{Handler: srv.Handler(), Address: o.ListenAddress, WebConfigFile: o.WebConfigFile, Logger: logger}
	l, err := hs.Listen()
	if err != nil {
		return err
	}
	var g oklogrun.Group
	{
		ctx, cancel := context.WithCancel(ctx)
		g.Add(func() error { return srv.Run(ctx) }, func(error) { cancel() })
	}
	hs.Add(&g, l)
	return g.Run()
}
