// Package webhook is debi's actuator, `debi webhook`: an HTTP server that receives Alertmanager
// notifications (POST /v1/alertmanager) and Tidal status events (POST /v1/tidal, and a watch on
// Tidal-like resources while holding a Lease), decides the replica count of the policy named —
// Algorithm 2 for debi policies, the policy's own algorithm otherwise, a Tidal's desiredReplicas
// within the policy's bounds — and writes it through the target's scale subresource (mode act),
// as an HPA's minReplicas (hpa-floor) or nowhere (shadow).
//
// A notification is a trigger, not the data (METHOD §8): current replicas come from the scale
// subresource and the load W from Prometheus at decision time; an alert's annotations are only a
// labelled fallback. Every write is an absolute count, so Alertmanager's repeats are harmless.
// The webhook acts only on the targets of its configuration: labels select a policy, never an
// object. It imports neither package exporter nor anything of it: the two meet through
// Prometheus and Alertmanager.
package webhook

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/uuid"
	"github.com/oklog/run"
	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/exporter-toolkit/web"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/debi-scaler/debi/config"
)

// Options are the command-line settings of `debi webhook`.
type Options struct {
	// ConfigFile is debi's configuration (--config.file).
	ConfigFile string
	// ListenAddress is the HTTP address (--web.listen-address, default :9108).
	ListenAddress string
	// WebConfigFile is an exporter-toolkit web configuration for TLS and basic auth
	// (--web.config.file).
	WebConfigFile string
	// Kubeconfig is a kubeconfig file (--kubeconfig); empty means in-cluster.
	Kubeconfig string
	// Listener, when set, is used instead of ListenAddress (tests listen on 127.0.0.1:0).
	Listener net.Listener
	// RestConfig, when set, is used instead of Kubeconfig.
	RestConfig *rest.Config
}

// RegisterFlags registers the webhook's flags on fs. --log.level belongs to the command, which
// builds the *slog.Logger it passes to Run.
func RegisterFlags(fs *flag.FlagSet) *Options {
	o := &Options{}
	fs.StringVar(&o.ConfigFile, "config.file", "debi.yml", "debi configuration file.")
	fs.StringVar(&o.ListenAddress, "web.listen-address", ":9108", "Address to listen on for notifications, probes and metrics.")
	fs.StringVar(&o.WebConfigFile, "web.config.file", "", "Path to a web configuration file enabling TLS or basic auth (exporter-toolkit format).")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "Path to a kubeconfig; empty means in-cluster configuration.")
	return o
}

var klogOnce sync.Once

// Run serves until ctx ends or an actor fails. reg receives the metrics; /metrics serves reg when
// it is also a Gatherer, else the default gatherer.
func Run(ctx context.Context, opts Options, logger *slog.Logger, reg prometheus.Registerer) error {
	if logger == nil {
		logger = slog.Default()
	}
	// klog is process-global and must be set before client-go logs: the first Run's logger
	// receives client-go's logs for the life of the process.
	klogOnce.Do(func() { klog.SetLogger(logr.FromSlogHandler(logger.With("component", "client-go").Handler())) })
	cfg, err := config.LoadFile(opts.ConfigFile)
	if err != nil {
		return err
	}
	for _, w := range cfg.Warnings() {
		logger.Warn("configuration setting replaced by its default", "warning", w)
	}
	wc := cfg.Webhook
	token := ""
	switch {
	case wc.BearerTokenFile != "":
		b, err := os.ReadFile(wc.BearerTokenFile)
		if err != nil {
			return fmt.Errorf("webhook.bearer_token_file: %w", err)
		}
		if token = strings.TrimSpace(string(b)); token == "" {
			return fmt.Errorf("webhook.bearer_token_file: %s is empty", wc.BearerTokenFile)
		}
	case !wc.AllowUnauthenticated:
		return errors.New("webhook.bearer_token_file: required to run the webhook (or set webhook.allow_unauthenticated: true)")
	}
	rc := opts.RestConfig
	if rc == nil {
		if rc, err = clientcmd.BuildConfigFromFlags("", opts.Kubeconfig); err != nil {
			return fmt.Errorf("kubernetes client configuration: %w", err)
		}
	}
	rc = rest.CopyConfig(rc)
	rc.UserAgent = "debi-webhook"
	if rc.QPS == 0 { // client-go's default (5/s, burst 10) would cap the webhook at ~2 patches/s
		rc.QPS, rc.Burst = 50, 100
	}
	act, err := NewKubeActuator(rc)
	if err != nil {
		return err
	}
	var query QueryFunc
	if cfg.Global.PrometheusURL != "" {
		if query, err = PrometheusQuery(cfg.Global.PrometheusURL, cfg.Global.QueryTimeout); err != nil {
			return fmt.Errorf("global.prometheus_url: %w", err)
		}
	} else {
		logger.Warn("global.prometheus_url is empty: decisions use the alerts' annotations (fallback)")
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartStructuredLogging(4)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: act.Kube().CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "debi-webhook"})

	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	gatherer := prometheus.DefaultGatherer
	if g, ok := reg.(prometheus.Gatherer); ok {
		gatherer = g
	}
	ctl, err := NewController(cfg, ControllerOptions{Actuator: act, Query: query, Recorder: recorder, Registerer: reg, Logger: logger})
	if err != nil {
		return err
	}

	var ready atomic.Bool
	handler := newRouter(routerOptions{
		scaler: ctl, token: token, maxBodyBytes: wc.MaxBodyBytes, timeout: wc.DecisionTimeout,
		gatherer: gatherer, metrics: ctl.m, logger: logger,
		ready: func() error {
			if !ready.Load() {
				return errors.New("API server not reached yet")
			}
			return nil
		},
	})

	var g run.Group
	{ // HTTP server
		l := opts.Listener
		if l == nil {
			if l, err = net.Listen("tcp", opts.ListenAddress); err != nil {
				return err
			}
		}
		srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute}
		webCfg := opts.WebConfigFile
		g.Add(func() error {
			err := web.Serve(l, srv, &web.FlagConfig{WebConfigFile: &webCfg}, logger)
			if errors.Is(err, http.ErrServerClosed) {
				return nil
			}
			return err
		}, func(error) {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
			logger.Info("HTTP server stopped")
		})
	}
	{ // readiness: the API server answers with our credentials
		rctx, cancel := context.WithCancel(ctx)
		g.Add(func() error {
			for rctx.Err() == nil {
				if _, err := act.Kube().Discovery().ServerVersion(); err == nil {
					ready.Store(true)
					logger.Info("API server reachable; ready")
					break
				} else {
					logger.Warn("API server not reachable yet", "err", err)
				}
				select {
				case <-rctx.Done():
				case <-time.After(2 * time.Second):
				}
			}
			<-rctx.Done()
			return nil
		}, func(error) { cancel() })
	}
	if wc.Tidal.IsEnabled() { // Tidal watch, on the leader only
		wctx, cancel := context.WithCancel(ctx)
		g.Add(func() error {
			watch := func(ctx context.Context) { ctl.WatchTidals(ctx, act.Dynamic(), wc.Tidal) }
			if !wc.LeaderElection.IsEnabled() {
				ctl.m.leader.Set(1)
				watch(wctx)
				return nil
			}
			host, _ := os.Hostname()
			id := host + "_" + uuid.NewString()
			return RunLeaderElected(wctx, act.Kube(), wc.LeaderElection, id, logger,
				func(b bool) { ctl.m.leader.Set(map[bool]float64{true: 1}[b]) }, watch)
		}, func(error) {
			cancel()
			logger.Info("tidal watch stopped")
		})
	}
	{ // shutdown on ctx
		cctx, cancel := context.WithCancel(ctx)
		g.Add(func() error {
			<-cctx.Done()
			logger.Info("shutting down", "reason", context.Cause(ctx))
			return nil
		}, func(error) { cancel() })
	}
	logger.Info("starting debi webhook", "mode", wc.Mode, "policies", len(cfg.Policies), "tidal_watch", wc.Tidal.IsEnabled())
	return g.Run()
}

// PrometheusQuery returns a QueryFunc over Prometheus's HTTP API. A query must return exactly
// one finite, non-negative sample; anything else is an error (the caller falls back).
func PrometheusQuery(url string, timeout time.Duration) (QueryFunc, error) {
	c, err := api.NewClient(api.Config{Address: url})
	if err != nil {
		return nil, err
	}
	papi := promv1.NewAPI(c)
	return func(ctx context.Context, expr string) (float64, error) {
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		v, _, _, err := papi.Query(ctx, expr, time.Now())
		if err != nil {
			return 0, fmt.Errorf("query %s: %w", expr, err)
		}
		vec, ok := v.(model.Vector)
		if !ok {
			return 0, fmt.Errorf("query %s: want an instant vector, got %s", expr, v.Type())
		}
		if len(vec) != 1 {
			return 0, fmt.Errorf("query %s: want one series, got %d", expr, len(vec))
		}
		x := float64(vec[0].Value)
		if x != x || x < 0 || x > 1e9 {
			return 0, fmt.Errorf("query %s: value %v is not a usable load", expr, x)
		}
		return x, nil
	}, nil
}
