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
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/oklog/run"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/client_golang/prometheus"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	commoncfg "github.com/prometheus/common/config"
	"k8s.io/client-go/rest"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/elasticscaler"
	"github.com/debi-scaler/debi/internal/process"
	"github.com/debi-scaler/debi/internal/promclient"
)

// Options are the exporter's command-line settings.
type Options struct {
	// ConfigFile is the YAML configuration (--config.file).
	ConfigFile string
	// Shard selects this exporter's policies (--shard=i/n).
	Shard Shard
	// EnableLifecycle serves POST|PUT /-/reload (--web.enable-lifecycle, as Prometheus's flag);
	// off, the endpoint answers 403 and SIGHUP still reloads.
	EnableLifecycle bool

	// Querier replaces the Prometheus client built from global.prometheus_url and
	// global.http_config (embedding, tests); a reload keeps it.
	Querier Querier
	// Kubeconfig is the kubeconfig of the exporter's one connection to the API server, for the
	// ElasticScaler watch, the metrics APIs and the targets' scale subresources (--kubeconfig;
	// empty: $KUBECONFIG, ~/.kube/config, then in-cluster), used only when
	// global.elastic_scalers.enabled, a policy has a metric read from a metrics API or a target
	// whose pods come from its scale subresource.
	Kubeconfig string
	// RestConfig, when set, replaces Kubeconfig (tests).
	RestConfig *rest.Config
	// MetricsReader, PodSelector and TargetPods, when MetricsReader or TargetPods is set,
	// replace the clients of the metrics APIs and of the targets' scale subresources and pods
	// built from the kube credentials (tests).
	MetricsReader MetricsReader
	PodSelector   PodSelectorFunc
	TargetPods    TargetPodsFunc
}

// Server is the exporter of one process: the loop of the policies it runs (its shard of the
// file's and, with global.elastic_scalers, the ElasticScalers'), the configuration reloader and
// the HTTP endpoints (Handler). cmd/debi owns the process around it: the flags, the HTTP server
// that serves the Handler, client-go's klog, the registry and the signals (SIGHUP calls Reload).
type Server struct {
	logger  *slog.Logger
	e       *Exporter
	r       *reloader
	handler http.Handler
	// globals are the file's at start-up: the ElasticScaler watch runs with them.
	global config.Global
	// stopped is closed when Run returns.
	stopped chan struct{}
	// conn is the process's connection to the API server, built on first use.
	conn *kubeConn
}

// NewServer loads the configuration and builds the exporter of its policies (opts.Shard's)
// with its Prometheus client (opts.Querier, or global.prometheus_url's); nothing runs until Run.
// Metrics are registered with reg; /metrics serves reg when it is also a prometheus.Gatherer
// (a *prometheus.Registry), otherwise prometheus.DefaultGatherer.
func NewServer(opts Options, logger *slog.Logger, reg prometheus.Registerer) (*Server, error) {
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
	raw, err := os.ReadFile(opts.ConfigFile)
	if err != nil {
		return nil, err
	}
	cfg, err := config.LoadFileContent(opts.ConfigFile, raw)
	if err != nil {
		return nil, err
	}
	for _, w := range cfg.Warnings() {
		logger.Warn("configuration setting replaced by its default", "warning", w)
	}
	policies := opts.Shard.Select(cfg.Policies)
	logger.Info("starting debi exporter", "config", opts.ConfigFile, "shard", opts.Shard.String(),
		"policies", len(policies), "of", len(cfg.Policies), "interval", cfg.Global.Interval)

	q := opts.Querier
	if q == nil {
		if q, err = newQuerier(cfg.Global); err != nil {
			return nil, err
		}
	}
	if err := reg.Register(versioncollector.NewCollector("debi")); err != nil {
		return nil, err
	}
	e, err := New(cfg, policies, q, logger, reg)
	if err != nil {
		return nil, err
	}
	conn := newKubeConn(opts.RestConfig, opts.Kubeconfig)
	if opts.MetricsReader != nil || opts.TargetPods != nil {
		e.SetMetricsAPI(opts.MetricsReader, opts.PodSelector, opts.TargetPods)
	} else {
		// Built at the first step that reads a metrics API or a target's scale subresource:
		// without one the exporter needs no kube credentials.
		e.sources.build = newSourceClients(conn)
	}
	r := &reloader{opts: opts, e: e, log: logger, global: cfg.Global, reqs: make(chan chan error),
		file: cfg, scalers: cfg.Global.ElasticScalers, updates: make(chan elasticscaler.Update)}
	r.rl = process.NewReloader(process.ReloaderOptions{File: opts.ConfigFile, Raw: raw, Component: "exporter", Registerer: reg,
		SuccessHelp:   "1 when the last configuration load succeeded, 0 when a reload failed and the previous configuration is still in use.",
		TimestampHelp: "Time of the last successful configuration load, start-up included.",
		Apply:         r.load,
		Failed: func(err error) {
			logger.Error("configuration reload failed; the previous configuration stays in use", "config", opts.ConfigFile, "err", err)
		}})
	s := &Server{logger: logger, e: e, r: r, global: cfg.Global, stopped: make(chan struct{}), conn: conn}
	s.handler = e.handler(gatherer, reg, r.handler(s.stopped))
	return s, nil
}

// Handler is the HTTP layer: /metrics, /-/healthy, /-/ready, /-/reload, Go's profiles under
// /debug/pprof/ and the index. A reload it asks for waits for Run's reloader.
func (s *Server) Handler() http.Handler { return s.handler }

// Run checks every query once (a policy whose query is at fault is marked failed; the others
// run), and runs the loop, the configuration reloader (Reload, POST /-/reload) and, with
// global.elastic_scalers, the ElasticScaler watch in a run group until ctx is done (then it
// returns nil) or one of them fails. It may be called once; the Handler is served beside it.
func (s *Server) Run(ctx context.Context) error {
	defer close(s.stopped)
	logger, e, r := s.logger, s.e, s.r
	// The failed policies are marked and logged; the others run.
	_ = e.CheckQueries(ctx, time.Now())

	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()

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
			e.shutdown() // stop background training; no reload after it
			logger.Info("loop stopped", "err", err)
			return err
		}, func(error) { cancel() })
	}
	g.Add(func() error {
		for {
			select {
			case <-rctx.Done():
				logger.Info("configuration reloader stopped")
				return nil
			case errc := <-r.reqs:
				errc <- r.rl.Reload()
			case u := <-r.updates:
				r.applyObjects(u)
			}
		}
	}, func(error) { rcancel() })
	if r.scalers.Enabled { // policies from ElasticScalers, applied by the reloader
		_, c, err := s.conn.get() // the connection the steps' reads share, and its rate limit
		if err != nil {
			return err
		}
		wctx, cancel := context.WithCancel(ctx)
		g.Add(func() error {
			return elasticscaler.RunSource(wctx, elasticscaler.SourceOptions{Dynamic: c.Dynamic, Discovery: c.Discovery,
				Namespaces: s.global.ElasticScalers.Namespaces, Logger: logger.With("component", "elasticscalers")},
				func(u elasticscaler.Update) {
					select {
					case r.updates <- u:
					case <-wctx.Done():
					}
				})
		}, func(error) { cancel() })
	}
	return g.Run()
}

// errStopped is Reload's answer once Run has returned.
var errStopped = errors.New("the exporter has stopped")

// Reload loads the configuration file again and applies it between two steps, as POST
// /-/reload does; cmd/debi calls it on SIGHUP. It waits for Run's reloader, so it returns once
// Run runs (or has returned: errStopped).
func (s *Server) Reload() error {
	errc := make(chan error, 1)
	select {
	case s.r.reqs <- errc:
		return <-errc
	case <-s.stopped:
		return errStopped
	}
}

// newQuerier builds the Prometheus client of global.prometheus_url and global.http_config.
func newQuerier(g config.Global) (Querier, error) {
	if g.PrometheusURL == "" {
		return nil, errors.New("global.prometheus_url: required by the exporter")
	}
	hc := commoncfg.DefaultHTTPClientConfig
	if g.HTTPConfig != nil {
		hc = *g.HTTPConfig
	}
	client, err := promclient.New(g.PrometheusURL, hc)
	if err != nil {
		return nil, fmt.Errorf("global.%w", err)
	}
	return v1.NewAPI(client), nil
}

// reloader loads the configuration file again on Reload or POST /-/reload and applies it
// between two steps (Exporter.apply). A file that does not load, or that changes what cannot
// change while running, leaves the configuration in use as it is and says so in the log and in
// debi_exporter_config_last_reload_successful.
type reloader struct {
	opts   Options
	e      *Exporter
	log    *slog.Logger
	global config.Global // of the configuration in use, to tell when the client must change
	reqs   chan chan error
	// rl is the exporter's reload path (its gauges, its serialisation); Run's reloader calls it.
	rl *process.Reloader

	// file is the configuration file as last loaded, without the objects' policies.
	file *config.Config
	// scalers is global.elastic_scalers at start-up: the watch runs when it is enabled, and a
	// reload may not change it (config.ElasticScalersConfig.ReloadError); objects are the
	// policies the watch delivered last, merged into every reload.
	scalers config.ElasticScalersConfig
	objects []config.ObjectPolicy
	updates chan elasticscaler.Update
}

// withObjects is the file's configuration with the objects' valid policies (when the watch
// runs and the file still enables it); each rejected object is logged.
func (r *reloader) withObjects(file *config.Config) *config.Config {
	if !r.scalers.Enabled {
		return file
	}
	return elasticscaler.WithPolicies(file, r.objects, r.log)
}

// applyObjects puts the policies of a new set of ElasticScalers in force beside the file's,
// through the same path as a reload: unchanged policies keep their state, changed ones are
// rebuilt, new ones added and those of deleted objects removed.
func (r *reloader) applyObjects(u elasticscaler.Update) {
	r.objects = u.Policies
	elasticscaler.LogRejected(r.log, u.Errors)
	cfg := r.withObjects(r.file)
	policies := r.opts.Shard.Select(cfg.Policies)
	st, err := r.e.apply(cfg, policies, nil)
	if err != nil {
		r.log.Error("ElasticScaler policies not applied", "err", err)
		return
	}
	r.log.Info("ElasticScaler policies applied", "objects", len(u.Policies), "policies", len(policies), "of", len(cfg.Policies),
		"kept", st.kept, "rebuilt", st.rebuilt, "added", st.added, "removed", st.removed)
}

// load validates raw, the file's new content, and applies it between two steps.
func (r *reloader) load(raw []byte) error {
	file, err := config.LoadFileContent(r.opts.ConfigFile, raw)
	if err != nil {
		return err
	}
	if err := r.scalers.ReloadError(file.Global.ElasticScalers); err != nil {
		return fmt.Errorf("%s: %w", r.opts.ConfigFile, err)
	}
	cfg := r.withObjects(file)
	var q Querier
	if r.opts.Querier == nil && (cfg.Global.PrometheusURL != r.global.PrometheusURL || !reflect.DeepEqual(cfg.Global.HTTPConfig, r.global.HTTPConfig)) {
		if q, err = newQuerier(cfg.Global); err != nil {
			return fmt.Errorf("%s: %w", r.opts.ConfigFile, err)
		}
	}
	policies := r.opts.Shard.Select(cfg.Policies)
	st, err := r.e.apply(cfg, policies, q)
	if err != nil {
		return fmt.Errorf("%s: %w", r.opts.ConfigFile, err)
	}
	r.global, r.file = cfg.Global, file
	for _, w := range file.Warnings() {
		r.log.Warn("configuration setting replaced by its default", "warning", w)
	}
	r.log.Info("configuration reloaded", "config", r.opts.ConfigFile, "policies", len(policies), "of", len(cfg.Policies),
		"kept", st.kept, "rebuilt", st.rebuilt, "added", st.added, "removed", st.removed, "new_client", q != nil)
	return nil
}

// handler serves /-/reload as Prometheus does: POST or PUT reloads, 200 when the new
// configuration is in use, 500 with the error when the previous one still is.
func (r *reloader) handler(stopped <-chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		if !r.opts.EnableLifecycle {
			http.Error(w, "Lifecycle API is not enabled.", http.StatusForbidden)
			return
		}
		if req.Method != http.MethodPost && req.Method != http.MethodPut {
			w.Header().Set("Allow", "POST, PUT")
			http.Error(w, "This endpoint requires a POST or PUT request.", http.StatusMethodNotAllowed)
			return
		}
		errc := make(chan error, 1)
		select {
		case r.reqs <- errc:
		case <-req.Context().Done():
			return
		case <-stopped:
			http.Error(w, "the exporter is shutting down", http.StatusServiceUnavailable)
			return
		}
		if err := <-errc; err != nil {
			http.Error(w, fmt.Sprintf("failed to reload config: %s", err), http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "Reloaded")
	}
}

func (e *Exporter) handler(g prometheus.Gatherer, reg prometheus.Registerer, reload http.Handler) http.Handler {
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
	mux.Handle("/-/reload", reload)
	// Go's profiles, as Prometheus serves them: heap and CPU of a large fleet (docs/fleet.md).
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		st := *e.status.Load()
		names := make([]string, 0, len(st))
		for _, p := range st {
			name := p.labels[0]
			if p.failed {
				name += " (failed)"
			}
			names = append(names, name)
		}
		fmt.Fprintf(w, "debi exporter\n\n/metrics\n/-/reload (POST)\n\npolicies (%d): %s\n", len(names), strings.Join(names, ", "))
	})
	return mux
}

// descFailed is published for every policy, 0 or 1, so that an alert can fire on it.
var descFailed = prometheus.NewDesc("debi_policy_failed",
	"1 when the policy is at fault in the configuration (a query returns several series where one is expected, or Prometheus rejects it as bad data): it holds (stale, never below the current size) and is checked again at every step. 0 otherwise.",
	policyLabels, nil)

// statusCollector emits debi_policy_failed from the status snapshot, swapped with the
// policy set, so that the series of a removed policy vanish.
type statusCollector struct{ e *Exporter }

func (c statusCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descFailed }

func (c statusCollector) Collect(ch chan<- prometheus.Metric) {
	for _, p := range *c.e.status.Load() {
		v := 0.0
		if p.failed {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(descFailed, prometheus.GaugeValue, v, p.labels...)
	}
}
