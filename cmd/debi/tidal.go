package main

import (
	"context"
	"io"
	"log/slog"

	kingpin "github.com/alecthomas/kingpin/v2"

	"github.com/debi-scaler/debi/tidal/controller"
)

// tidalCommand is `debi tidal-controller`: it evaluates the cron rules of Tidal objects and
// writes status.desiredReplicas, which the webhook's Tidal watch applies to the target. Leave
// it out where another Tidal controller runs. ctx ends on SIGINT or SIGTERM.
func tidalCommand(app *kingpin.Application) action {
	cmd := app.Command("tidal-controller", "Evaluate Tidal cron rules and write status.desiredReplicas (leader-elected).")
	flags := tidalFlags(cmd)
	return func(ctx context.Context, logger *slog.Logger, _, _ io.Writer) int {
		routeKlog(logger)
		if err := controller.Serve(ctx, *flags, logger, newRegistry()); err != nil {
			logger.Error("tidal controller stopped", "err", err)
			return 1
		}
		return 0
	}
}
