package controller

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/oklog/run"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/rest"

	"github.com/debi-scaler/debi/internal/kube"
	"github.com/debi-scaler/debi/internal/process"
)

// Flags are the settings of `debi tidal-controller`.
type Flags struct {
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

	// RestConfig replaces the kubeconfig lookup (tests); Listener replaces listening on
	// ListenAddress; LeaseDuration, RenewDeadline and RetryPeriod override client-go's defaults.
	RestConfig                                *rest.Config
	Listener                                  net.Listener
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// Serve runs the controller and its HTTP endpoints until ctx ends (then it returns nil) or one of
// them fails. reg receives the metrics; /metrics serves reg when it is also a Gatherer, else the
// default gatherer.
func Serve(ctx context.Context, f Flags, logger *slog.Logger, reg prometheus.Registerer) error {
	if logger == nil {
		logger = slog.Default()
	}
	rc, err := restConfig(f)
	if err != nil {
		return err
	}
	c, err := kube.NewClients(rc)
	if err != nil {
		return err
	}
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	gatherer := prometheus.DefaultGatherer
	if g, ok := reg.(prometheus.Gatherer); ok {
		gatherer = g
	}
	var ready atomic.Bool
	opts := Options{
		Client: c.Dynamic, Namespaces: f.Namespaces, Logger: logger, Metrics: NewMetrics(reg),
		Ready: func() { ready.Store(true) },
	}
	if f.LeaderElect {
		opts.LeaderElection = LeaderElection{
			Enabled: true, Namespace: f.LeaseNamespace, Name: f.LeaseName, Client: c.Kubernetes.CoordinationV1(),
			LeaseDuration: f.LeaseDuration, RenewDeadline: f.RenewDeadline, RetryPeriod: f.RetryPeriod,
		}
	}
	hs := process.HTTP{Listener: f.Listener, Address: f.ListenAddress, WebConfigFile: f.WebConfigFile, Logger: logger}
	l, err := hs.Listen()
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.InstrumentMetricHandler(reg, promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{})))
	mux.HandleFunc("/-/healthy", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/-/ready", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "not ready: waiting for the Tidal caches to sync", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	hs.Handler = mux

	var g run.Group
	{
		ctx, cancel := context.WithCancel(ctx)
		g.Add(func() error {
			err := Run(ctx, opts)
			logger.Info("tidal controller stopped", "err", err)
			return err
		}, func(error) { cancel() })
	}
	hs.Add(&g, l)
	logger.Info("starting debi tidal-controller", "listen", l.Addr().String(), "namespaces", f.Namespaces,
		"leader_elect", f.LeaderElect, "lease", f.LeaseNamespace+"/"+f.LeaseName)
	return g.Run()
}

// restConfig is f.RestConfig, or the kubeconfig found by client-go's default loading rules
// (--kubeconfig, else $KUBECONFIG, else ~/.kube/config), or the in-cluster configuration: as the
// webhook and kubectl.
func restConfig(f Flags) (*rest.Config, error) {
	// client-go's 5/s would delay writes when many Tidals fire at the same second.
	return kube.RestConfig(f.RestConfig, f.Kubeconfig, FieldManager, 50, 100)
}
