package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"

	kingpin "github.com/alecthomas/kingpin/v2"
	oklogrun "github.com/oklog/run"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/debi-scaler/debi/internal/kube"
	"github.com/debi-scaler/debi/internal/process"
	"github.com/debi-scaler/debi/tidal/controller"
)

// tidalCommand is `debi tidal-controller`: it evaluates the cron rules of Tidal objects and
// writes status.desiredReplicas, which the webhook's Tidal watch applies to the target. Leave
// it out where another Tidal controller runs. ctx ends on SIGINT or SIGTERM.
func tidalCommand(app *kingpin.Application) action {
	cmd := app.Command("tidal-controller", "Evaluate Tidal cron rules and write status.desiredReplicas (leader-elected).")
	opts := tidalFlags(cmd)
	return func(ctx context.Context, logger *slog.Logger, _, _ io.Writer) int {
		routeKlog(logger)
		if err := serveTidal(ctx, *opts, logger, newRegistry()); err != nil {
			logger.Error("tidal controller stopped", "err", err)
			return 1
		}
		return 0
	}
}

// tidalOptions are the settings of `debi tidal-controller` (tidalFlags).
type tidalOptions struct {
	// Kubeconfig is --kubeconfig; empty: $KUBECONFIG, ~/.kube/config, in-cluster.
	Kubeconfig string
	// Namespaces are --namespace (repeatable); none: all namespaces.
	Namespaces []string
	// LeaderElect is --leader-elect (default true); LeaseNamespace and LeaseName name the Lease.
	LeaderElect    bool
	LeaseNamespace string
	LeaseName      string
	// ListenAddress is --web.listen-address (/metrics, /-/healthy, /-/ready); WebConfigFile is
	// exporter-toolkit's TLS and basic-auth file (--web.config.file).
	ListenAddress string
	WebConfigFile string
}

// serveTidal runs the controller (controller.Run) and the process's HTTP server until ctx ends
// (then it returns nil) or one of them fails. /metrics serves reg.
func serveTidal(ctx context.Context, o tidalOptions, logger *slog.Logger, reg *prometheus.Registry) error {
	// client-go's 5/s would delay writes when many Tidals fire at the same second.
	rc, err := kube.RestConfig(nil, o.Kubeconfig, controller.FieldManager, 50, 100)
	if err != nil {
		return err
	}
	c, err := kube.NewClients(rc)
	if err != nil {
		return err
	}
	var ready atomic.Bool
	opts := controller.Options{
		Client: c.Dynamic, Namespaces: o.Namespaces, Logger: logger, Metrics: controller.NewMetrics(reg),
		Ready: func() { ready.Store(true) },
	}
	if o.LeaderElect {
		opts.LeaderElection = controller.LeaderElection{
			Enabled: true, Namespace: o.LeaseNamespace, Name: o.LeaseName, Client: c.Kubernetes.CoordinationV1(),
		}
	}
	hs := process.HTTP{Address: o.ListenAddress, WebConfigFile: o.WebConfigFile, Logger: logger}
	l, err := hs.Listen()
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.InstrumentMetricHandler(reg, promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	mux.HandleFunc("/-/healthy", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/-/ready", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "not ready: waiting for the Tidal caches to sync", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	hs.Handler = mux

	var g oklogrun.Group
	{
		ctx, cancel := context.WithCancel(ctx)
		g.Add(func() error {
			err := controller.Run(ctx, opts)
			logger.Info("tidal controller stopped", "err", err)
			return err
		}, func(error) { cancel() })
	}
	hs.Add(&g, l)
	logger.Info("starting debi tidal-controller", "listen", l.Addr().String(), "namespaces", o.Namespaces,
		"leader_elect", o.LeaderElect, "lease", o.LeaseNamespace+"/"+o.LeaseName)
	return g.Run()
}
