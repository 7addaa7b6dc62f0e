package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/go-logr/logr"
	oklogrun "github.com/oklog/run"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/klog/v2"
)

// What a long-running subcommand's process is made of besides its package's server: the
// registry, client-go's logs and the signals. SIGINT and SIGTERM end the context run gives the
// action; SIGHUP reloads.

var klogOnce sync.Once

// routeKlog sends client-go's logs (klog, process-global) to logger, as component client-go.
// It must run before client-go logs; the first logger given receives them for the life of the
// process.
func routeKlog(logger *slog.Logger) {
	klogOnce.Do(func() { klog.SetLogger(logr.FromSlogHandler(logger.With("component", "client-go").Handler())) })
}

// newRegistry is the registry a subcommand serves on /metrics: its own metrics, the Go
// runtime's and the process's.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// runReloading runs serve until ctx ends (then it returns nil) or serve fails, and calls reload
// on every SIGHUP meanwhile, logging it with the configuration file. SIGHUP is caught from the
// call on, so that from then on it reloads instead of ending the process.
func runReloading(ctx context.Context, logger *slog.Logger, configFile string, serve func(context.Context) error, reload func() error) error {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	var g oklogrun.Group
	{
		sctx, cancel := context.WithCancel(ctx)
		g.Add(func() error { return serve(sctx) }, func(error) { cancel() })
	}
	{ // reload on SIGHUP; say why the process stops
		hctx, cancel := context.WithCancel(ctx)
		g.Add(func() error {
			for {
				select {
				case <-hctx.Done():
					logger.Info("shutting down", "reason", context.Cause(ctx))
					return nil
				case <-hup:
					logger.Info("SIGHUP received; reloading the configuration", "file", configFile)
					_ = reload() // logged and in the metrics
				}
			}
		}, func(error) { cancel() })
	}
	return g.Run()
}
