package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	kingpin "github.com/alecthomas/kingpin/v2"
	"github.com/google/uuid"
	oklogrun "github.com/oklog/run"
	"github.com/prometheus/client_golang/prometheus"
	commoncfg "github.com/prometheus/common/config"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/elasticscaler"
	"github.com/debi-scaler/debi/internal/kube"
	"github.com/debi-scaler/debi/internal/process"
	"github.com/debi-scaler/debi/internal/promclient"
	"github.com/debi-scaler/debi/webhook"
)

// webhookCommand is `debi webhook`: the process around a webhookServer. ctx ends on SIGINT or
// SIGTERM; SIGHUP, like POST|PUT /-/reload, reloads the configuration (webhookServer.Reload).
// The server finds the cluster as kubectl does (--kubeconfig, $KUBECONFIG, ~/.kube/config,
// in-cluster).
func webhookCommand(app *kingpin.Application) action {
	cmd := app.Command("webhook", "Receive Alertmanager and Tidal events and patch replicas through the scale subresource.")
	opts := webhookFlags(cmd)
	return func(ctx context.Context, logger *slog.Logger, _, _ io.Writer) int {
		routeKlog(logger)
		srv, err := newWebhookServer(*opts, logger, newRegistry())
		if err == nil {
			err = runReloading(ctx, logger, opts.ConfigFile, srv.Run, srv.Reload)
		}
		if err != nil {
			logger.Error("webhook stopped", "err", err)
			return 1
		}
		return 0
	}
}

// webhookOptions are the command-line settings of `debi webhook` (webhookFlags).
type webhookOptions struct {
	// ConfigFile is debi's configuration (--config.file), read again by Reload (SIGHUP) and on
	// POST|PUT /-/reload.
	ConfigFile string
	// ListenAddress is the HTTP address (--web.listen-address, default :9108).
	ListenAddress string
	// WebConfigFile is an exporter-toolkit web configuration for TLS and basic auth
	// (--web.config.file).
	WebConfigFile string
	// Kubeconfig is a kubeconfig file (--kubeconfig); empty follows client-go's default loading
	// rules, as kubectl does: $KUBECONFIG, then ~/.kube/config, then in-cluster.
	Kubeconfig string
	// Listener, when set, is used instead of ListenAddress (tests listen on 127.0.0.1:0).
	Listener net.Listener
	// RestConfig, when set, is used instead of Kubeconfig.
	RestConfig *rest.Config
	// EnableLifecycle serves POST|PUT /-/reload (--web.enable-lifecycle, as Prometheus's flag);
	// off, the endpoint answers 403 and SIGHUP still reloads.
	EnableLifecycle bool
}

// webhookServer is the webhook of one process, composed of package webhook's parts: the
// Kubernetes clients, the process's one informer cache, the Controller of the configuration in
// force with its endpoints, the router, and the actors Run runs — the Tidal watch and the
// ElasticScaler status writer under their Leases, the HPA owner, the ElasticScaler source and the
// readiness probe. newWebhookServer decides which clients, informers and Leases a webhook has;
// webhookCommand owns the process around it: the flags, client-go's klog, the registry and the
// signals (SIGHUP calls Reload).
type webhookServer struct {
	opts     webhookOptions
	file     string
	act      *webhook.KubeActuator
	recorder record.EventRecorder
	events   record.EventBroadcaster
	m        *webhook.Metrics
	logger   *slog.Logger
	// id is this replica's identity in the Leases, the same across reloads.
	id string
	// informers is the process's informer cache, shared by every watch (internal/kube).
	informers *kube.Informers
	// start is the file's configuration at start-up: what the reload does not change (the
	// ElasticScaler actors and their Leases) comes from it.
	start   *config.Config
	handler http.Handler
	ready   process.Readiness

	// reloader serialises the reloads and the ElasticScaler policies' changes.
	reloader *process.Reloader
	current  atomic.Pointer[generation]
	live     atomic.Pointer[webhook.Endpoints]
	// restart tells the watch to start again with the configuration in force; reloaded tells
	// the campaign (lead) that a configuration was put in force.
	restart, reloaded chan struct{}

	// scalers are the ElasticScaler actors: HPA owner, source, status writer (nil without
	// global.elastic_scalers at start-up); their policies are merged into every configuration
	// put in force.
	scalers *process.ElasticScalers
}

// newWebhookServer loads the configuration file, builds the clients (opts.RestConfig, or the
// kubeconfig found as kubectl finds it), the informer cache and the Controller, and registers
// the metrics with reg; /metrics serves reg when it is also a Gatherer, else the default
// gatherer. Nothing runs until Run: a configuration that does not load, or whose token files
// cannot be read, is an error here.
func newWebhookServer(opts webhookOptions, logger *slog.Logger, reg prometheus.Registerer) (*webhookServer, error) {
	if logger == nil {
		logger = slog.Default()
	}
	raw, err := os.ReadFile(opts.ConfigFile)
	if err != nil {
		return nil, err
	}
	cfg, err := loadConfig(opts.ConfigFile, raw, logger)
	if err != nil {
		return nil, err
	}
	rc, err := restConfig(opts)
	if err != nil {
		return nil, err
	}
	act, err := webhook.NewKubeActuator(rc)
	if err != nil {
		return nil, err
	}
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	gatherer := prometheus.DefaultGatherer
	if g, ok := reg.(prometheus.Gatherer); ok {
		gatherer = g
	}
	host, _ := os.Hostname()
	events := record.NewBroadcaster()
	s := &webhookServer{
		opts: opts, file: opts.ConfigFile, act: act, logger: logger, m: webhook.NewMetrics(reg), id: host + "_" + uuid.NewString(),
		events: events, recorder: events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "debi-webhook"}),
		start: cfg, restart: make(chan struct{}, 1), reloaded: make(chan struct{}, 1),
	}
	// One informer cache for the process (internal/kube): the ElasticScalers and Tidals are
	// listed and watched once, for the status writer, the ElasticScaler source, the HPA owner and
	// the Tidal watch. Its scope is global.elastic_scalers.namespaces (every namespace when
	// empty); the Tidal watch's namespaces outside it get namespaced informers of their own.
	var scope []string
	if cfg.Global.ElasticScalers.Enabled {
		scope = cfg.Global.ElasticScalers.Namespaces
		if len(scope) == 0 {
			scope = []string{metav1.NamespaceAll}
		}
	}
	s.informers = kube.NewInformers(act.Dynamic(), scope...)
	if cfg.Global.ElasticScalers.Enabled {
		s.scalers = process.NewElasticScalers(process.ElasticScalerOptions{Dynamic: act.Dynamic(), Kube: act.Kube(), Informers: s.informers,
			Namespaces: cfg.Global.ElasticScalers.Namespaces,
			Get:        act.GetObject, Recorder: s.recorder, File: s.file0, Recheck: webhook.DiscoveryRecheck, Apply: s.applyObjects, Logger: logger})
	}
	gen, err := s.build(raw, cfg)
	if err != nil {
		return nil, err
	}
	gen.file = cfg
	s.install(gen, nil)
	s.reloader = process.NewReloader(process.ReloaderOptions{File: s.file, Raw: raw, Component: "webhook", Registerer: reg,
		SuccessHelp:   "1 when the last configuration (re)load succeeded, 0 when it failed and the previous configuration stays in force.",
		TimestampHelp: "Unix time of the last successful configuration (re)load.",
		Apply:         s.apply,
		// Token files are read again on change by themselves; restarting the watch would only
		// hand the Lease over for nothing.
		Unchanged: func() { logger.Info("configuration unchanged", "file", s.file) },
		Failed: func(err error) {
			logger.Error("configuration reload failed; the previous configuration stays in force", "file", s.file, "err", err)
		}})
	s.handler = webhook.NewRouter(webhook.RouterOptions{
		Live: &s.live, Reload: s.Reload, Lifecycle: opts.EnableLifecycle, Gatherer: gatherer, Metrics: s.m, Logger: logger,
		Ready: s.ready.Err,
	})
	return s, nil
}

// Handler is the HTTP layer (webhook.NewRouter): the notification endpoints of the
// configuration in force, admission, /metrics, /-/healthy, /-/ready and /-/reload. Run serves it.
func (s *webhookServer) Handler() http.Handler { return s.handler }

// Run serves the Handler on opts.Listener (or opts.ListenAddress, with exporter-toolkit's
// opts.WebConfigFile) and runs the webhook's actors in a run group until ctx ends (then it
// returns nil) or one of them fails. It may be called once.
//
// A reload (Reload, POST|PUT /-/reload) that does not load, or whose token files cannot be
// read, leaves the running configuration in force, says so in the log and sets
// debi_webhook_config_last_reload_successful to 0. A good one replaces the Controller at once
// (requests in flight finish on the old one), with the token files read again, and restarts
// the Tidal watch with it.
func (s *webhookServer) Run(ctx context.Context) error {
	logger, act := s.logger, s.act
	hs := process.HTTP{Handler: s.handler, Listener: s.opts.Listener, Address: s.opts.ListenAddress, WebConfigFile: s.opts.WebConfigFile,
		ReadTimeout: time.Minute, Logger: logger}
	l, err := hs.Listen()
	if err != nil {
		return err
	}
	s.events.StartStructuredLogging(4)
	s.events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: act.Kube().CoreV1().Events("")})
	defer s.events.Shutdown()
	s.informers.Start(ctx)
	defer s.informers.Shutdown()

	var g oklogrun.Group
	hs.Add(&g, l)
	// readiness: the API server answers with our credentials
	s.ready.Add(ctx, &g, act.Kube().Discovery().ServerVersion, logger)
	{ // the process's one Lease: its holder runs the Tidal watch, the HPA owner and validation
		lctx, cancel := context.WithCancel(ctx)
		g.Add(func() error { return s.lead(lctx) }, func(error) { cancel() })
	}
	// ElasticScaler actors on every replica (global.elastic_scalers): the source and the status
	// writer.
	s.scalers.Add(ctx, &g)
	wc := s.start.Webhook
	logger.Info("starting debi webhook", "mode", wc.Mode, "policies", len(s.start.Policies), "tidal_watch", wc.Tidal.IsEnabled(),
		"tidal_push", wc.Tidal.Push.Enabled)
	return g.Run()
}

// restConfig is opts.RestConfig, or the kubeconfig found by client-go's default loading rules
// (--kubeconfig, else $KUBECONFIG, else ~/.kube/config), or the in-cluster configuration when
// there is none: what kubectl and controller-runtime do.
func restConfig(opts webhookOptions) (*rest.Config, error) {
	// client-go's default rate (5/s, burst 10) would cap the webhook at ~2 patches/s.
	return kube.RestConfig(opts.RestConfig, opts.Kubeconfig, "debi-webhook", 50, 100)
}

// loadConfig validates raw, the content of the configuration file.
func loadConfig(file string, raw []byte, logger *slog.Logger) (*config.Config, error) {
	cfg, err := config.Load(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	for _, w := range cfg.Warnings() {
		logger.Warn("configuration setting replaced by its default", "warning", w)
	}
	return cfg, nil
}

// applyObjects puts a new set of ElasticScalers' policies (n objects') in force beside the
// file's, as a reload does: a new Controller, the Tidal watch restarted with it.
func (s *webhookServer) applyObjects(n int) { s.reloader.Do(func() { s.applyObjectsLocked(n) }) }

func (s *webhookServer) applyObjectsLocked(n int) {
	old := s.current.Load()
	cfg := s.scalers.With(old.file)
	g, err := s.build(old.raw, cfg)
	if err != nil {
		s.logger.Error("ElasticScaler policies not applied; the configuration in force stays", "err", err)
		return
	}
	g.file = old.file
	s.install(g, old)
	s.signalReload()
	s.logger.Info("ElasticScaler policies applied", "objects", n, "policies", len(cfg.Policies))
}

// generation is one loaded configuration and what was built from it.
type generation struct {
	raw []byte
	cfg *config.Config
	// file is the file's configuration, without the objects' policies (cfg has both).
	file *config.Config
	ctl  *webhook.Controller
	ep   *webhook.Endpoints
}

// build makes a Controller and the endpoints (with their token files read) of a configuration.
// Nothing is installed: a failure leaves the configuration in force untouched.
func (s *webhookServer) build(raw []byte, cfg *config.Config) (*generation, error) {
	wc := cfg.Webhook
	if wc.BearerTokenFile == "" && !wc.AllowUnauthenticated {
		return nil, errors.New("webhook.bearer_token_file: required to run the webhook (or set webhook.allow_unauthenticated: true)")
	}
	query, err := newQuery(cfg, s.logger)
	if err != nil {
		return nil, err
	}
	ctl, err := webhook.NewController(cfg, webhook.ControllerOptions{Actuator: s.act, Query: query, Recorder: s.recorder, Metrics: s.m,
		Logger: s.logger, Observe: s.observeDecision})
	if err != nil {
		return nil, err
	}
	g := &generation{raw: raw, cfg: cfg, ctl: ctl}
	if g.ep, err = webhook.NewEndpoints(cfg, ctl, s.m, s.logger); err != nil {
		return nil, err
	}
	return g, nil
}

// install puts g in force; old is the generation it replaces (nil at start). Its policies paused
// at a count are scaled to it in the background (Controller.Pin).
func (s *webhookServer) install(g *generation, old *generation) {
	s.current.Store(g)
	s.live.Store(g.ep)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), g.cfg.Webhook.DecisionTimeout)
		defer cancel()
		if _, err := g.ctl.Pin(ctx); err != nil {
			s.logger.Warn("cannot scale a paused policy to its paused_replicas; the next trigger tries again", "err", err)
		}
	}()
	var prev *config.Config
	if old != nil {
		prev = old.cfg
	}
	s.m.Configured(g.cfg, prev)
}

// Reload reads the configuration file again and puts it in force (apply); on error the
// configuration in force stays (see Run). It is the webhook's one reload path
// (process.Reloader): webhookCommand calls it on SIGHUP, the router on POST|PUT /-/reload.
func (s *webhookServer) Reload() error { return s.reloader.Reload() }

// apply puts raw, the file's new content, in force: a new Controller and endpoints, the Tidal
// watch restarted with them.
func (s *webhookServer) apply(raw []byte) error {
	file, err := loadConfig(s.file, raw, s.logger)
	if err != nil {
		return err
	}
	old := s.current.Load()
	if err := s.start.Global.ElasticScalers.ReloadError(file.Global.ElasticScalers); err != nil {
		return fmt.Errorf("%s: %w", s.file, err)
	}
	cfg := s.scalers.With(file)
	g, err := s.build(raw, cfg)
	if err != nil {
		return err
	}
	g.file = file
	s.install(g, old)
	s.signalReload()
	wc := cfg.Webhook
	s.logger.Info("configuration reloaded", "file", s.file, "mode", wc.Mode, "policies", len(cfg.Policies),
		"tidal_watch", wc.Tidal.IsEnabled(), "tidal_push", wc.Tidal.Push.Enabled)
	return nil
}

// file0 is the file's configuration in force (without the objects' policies): the status
// writer's (its policies win any conflict).
func (s *webhookServer) file0() *config.Config {
	if g := s.current.Load(); g != nil {
		return g.file
	}
	return nil
}

// observeDecision is the Controllers' Observe hook.
func (s *webhookServer) observeDecision(d elasticscaler.Decision) { s.scalers.Observe(d) }

// newQuery reads Prometheus as global.prometheus_url and global.http_config say; nil when no
// Prometheus is configured (decisions use the alerts' annotations).
func newQuery(cfg *config.Config, logger *slog.Logger) (webhook.QueryFunc, error) {
	if cfg.Global.PrometheusURL == "" {
		logger.Warn("global.prometheus_url is empty: decisions use the alerts' annotations (fallback)")
		return nil, nil
	}
	var hc commoncfg.HTTPClientConfig
	if cfg.Global.HTTPConfig != nil {
		hc = *cfg.Global.HTTPConfig
	}
	client, err := promclient.New(cfg.Global.PrometheusURL, hc)
	if err != nil {
		return nil, fmt.Errorf("global.prometheus_url: %w", err)
	}
	return webhook.PrometheusQuery(client, cfg.Global.QueryTimeout, cfg.Global.LookbackDelta), nil
}
