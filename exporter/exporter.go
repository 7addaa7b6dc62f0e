// Package exporter is the live half of debi's loop: it reads each scaling policy's load from
// Prometheus, runs the method (package policy, the code path of the backtest) and publishes the
// results as series that Prometheus scrapes back, where the rule files in rules/ turn them into
// recordings and scale alerts. It never talks to the webhook: the two meet only through
// Prometheus and Alertmanager.
//
// See docs/exporter.md for the published series, the degradation rules and sharding.
package exporter

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/oklog/run"
	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/client_golang/prometheus"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/debi-scaler/debi/config"
)

// Options are the exporter's command-line settings.
type Options struct {
	// ConfigFile is the YAML configuration (--config.file).
	ConfigFile string
	// ListenAddress serves /metrics (--web.listen-address, default :9107).
	ListenAddress string
	// WebConfigFile is exporter-toolkit's TLS and basic-auth file (--web.config.file).
	WebConfigFile string
	// Shard selects this exporter's policies (--shard=i/n).
	Shard Shard
	// LogLevel is debug, info, warn or error (--log.level); read by the caller that builds the
	// logger (see NewLogger).
	LogLevel string

	// Querier replaces the Prometheus client built from global.prometheus_url (embedding, tests).
	Querier Querier
	// Listener replaces listening on ListenAddress (tests pass a 127.0.0.1:0 listener).
	Listener net.Listener
}

// RegisterFlags registers the exporter's flags on fs and returns the options they fill.
func RegisterFlags(fs *flag.FlagSet) *Options {
	o := &Options{}
	fs.StringVar(&o.ConfigFile, "config.file", "debi.yml", "debi configuration file.")
	fs.StringVar(&o.ListenAddress, "web.listen-address", ":9107", "Address on which to expose metrics.")
	fs.StringVar(&o.WebConfigFile, "web.config.file", "", "Path to a web configuration file enabling TLS or authentication (exporter-toolkit format).")
	fs.Var(&o.Shard, "shard", "Run only the policies whose name hashes (FNV-1a) to i modulo n, as i/n (default 0/1: all).")
	fs.StringVar(&o.LogLevel, "log.level", "info", "Only log messages with the given severity or above: debug, info, warn, error.")
	return o
}

// NewLogger builds the logfmt logger the Prometheus family uses, at the given level.
func NewLogger(level string, w interface{ Write([]byte) (int, error) }) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log.level: %w", err)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// Run loads the configuration, checks every query once, and runs the HTTP server and the loop
// in a run group until ctx is done (then it returns nil) or one of them fails. Metrics are
// registered with reg; /metrics serves reg when it is also a prometheus.Gatherer (a
// *prometheus.Registry), otherwise prometheus.DefaultGatherer.
func Run(ctx context.Context, opts Options, logger *slog.Logger, reg prometheus.Registerer) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	gatherer := prometheus.DefaultGatherer
	if g, ok := reg.(prometheus.Gatherer); ok {
		gatherer = g
	}
	cfg, err := config.LoadFile(opts.ConfigFile)
	if err != nil {
		return err
	}
	for _, w := range cfg.Warnings() {
		logger.Warn("configuration setting replaced by its default", "warning", w)
	}
	policies := opts.Shard.Select(cfg.Policies)
	logger.Info("starting debi exporter", "config", opts.ConfigFile, "shard", opts.Shard.String(),
		"policies", len(policies), "of", len(cfg.Policies), "interval", cfg.Global.Interval)

	q := opts.Querier
	if q == nil {
		if cfg.Global.PrometheusURL == "" {
			return errors.New("global.prometheus_url: required by the exporter")
		}
		client, err := api.NewClient(api.Config{Address: cfg.Global.PrometheusURL})
		if err != nil {
			return fmt.Errorf("global.prometheus_url: %w", err)
		}
		q = v1.NewAPI(client)
	}
	if err := reg.Register(versioncollector.NewCollector("debi")); err != nil {
		return err
	}
	e, err := New(cfg, policies, q, logger, reg)
	if err != nil {
		return err
	}
	if err := e.CheckQueries(ctx, time.Now()); err != nil {
		return fmt.Errorf("%s: %w", opts.ConfigFile, err)
	}

	l := opts.Listener
	if l == nil {
		if l, err = net.Listen("tcp", opts.ListenAddress); err != nil {
			return err
		}
	}
	srv := &http.Server{Handler: e.handler(gatherer, reg), ReadHeaderTimeout: 10 * time.Second}

	var g run.Group
	{
		ctx, cancel := context.WithCancel(ctx)
		g.Add(func() error {
			<-ctx.Done()
			return nil
		}, func(error) { cancel() })
	}
	{
		ctx, cancel := context.WithCancel(ctx)
		g.Add(func() error {
			err := e.Loop(ctx)
			e.Close() // stop background training
			logger.Info("loop stopped", "err", err)
			return err
		}, func(error) { cancel() })
	}
	{
		webCfg := &web.FlagConfig{WebListenAddresses: &[]string{l.Addr().String()}, WebConfigFile: &opts.WebConfigFile}
		g.Add(func() error {
			err := web.Serve(l, srv, webCfg, logger)
			if errors.Is(err, http.ErrServerClosed) {
				err = nil
			}
			logger.Info("HTTP server stopped", "err", err)
			return err
		}, func(error) {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		})
	}
	return g.Run()
}

func (e *Exporter) handler(g prometheus.Gatherer, reg prometheus.Registerer) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/-/healthy", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "Healthy") })
	mux.HandleFunc("/-/ready", func(w http.ResponseWriter, _ *http.Request) {
		if !e.ready.Load() {
			http.Error(w, "Not ready: first loop still running", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "Ready")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		names := make([]string, 0, len(e.policies))
		for _, ps := range e.policies {
			names = append(names, ps.cfg.Name)
		}
		fmt.Fprintf(w, "debi exporter\n\n/metrics\n\npolicies (%d): %s\n", len(names), strings.Join(names, ", "))
	})
	return mux
}
