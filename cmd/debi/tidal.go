package main

import (
	"context"
	"io"
	"log/slog"
	"sync"

	kingpin "github.com/alecthomas/kingpin/v2"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/klog/v2"

	"github.com/debi-scaler/debi/tidal/controller"
)

var tidalKlogOnce sync.Once

// tidalCommand is `debi tidal-controller`: it evaluates the cron rules of Tidal objects and
// writes status.desiredReplicas, which the webhook's Tidal watch applies to the target. Leave
// it out where another Tidal controller runs. ctx ends on SIGINT or SIGTERM.
func tidalCommand(app *kingpin.Application) action {
	cmd := app.Command("tidal-controller", "Evaluate Tidal cron rules and write status.desiredReplicas (leader-elected).")
	flags := controller.RegisterFlags(cmd)
	return func(ctx context.Context, logger *slog.Logger, _, _ io.Writer) int {
		// client-go logs through klog, process-global: send it to the app's logger.
		tidalKlogOnce.Do(func() { klog.SetLogger(logr.FromSlogHandler(logger.With("component", "client-go").Handler())) })
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		if err := controller.Serve(ctx, *flags, logger, reg); err != nil {
			logger.Error("tidal controller stopped", "err", err)
			return 1
		}
		return 0
	}
}
