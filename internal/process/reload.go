package process

import (
	"bytes"
	"os"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Reloader is a component's one reload path (SIGHUP in cmd/debi, POST|PUT /-/reload): reloads
// are serialised; each reads the configuration file again, skips a file holding what the last
// good load read (when Unchanged is set), and hands it to Apply, which validates it and puts it
// in force, or fails and leaves the configuration in force as it is. The gauges
// debi_<component>_config_last_reload_successful and
// debi_<component>_config_last_reload_success_timestamp_seconds say how the last one went; the
// start-up load counts as a good one.
type Reloader struct {
	o      ReloaderOptions
	mu     sync.Mutex
	raw    []byte
	ok, ts prometheus.Gauge
}

// ReloaderOptions configure NewReloader.
type ReloaderOptions struct {
	// File is the configuration file; Raw is its content at start-up, in force.
	File string
	Raw  []byte
	// Component names the gauges (exporter, webhook); SuccessHelp and TimestampHelp are their
	// help texts. They are registered with Registerer.
	Component                  string
	SuccessHelp, TimestampHelp string
	Registerer                 prometheus.Registerer
	// Apply validates raw, the file's new content, and puts it in force.
	Apply func(raw []byte) error
	// Unchanged, when set, is called instead of Apply for an unchanged file (a good reload).
	Unchanged func()
	// Failed is told of a failed reload (to log it).
	Failed func(error)
}

// NewReloader registers the gauges, at 1 and now: the start-up load succeeded.
func NewReloader(o ReloaderOptions) *Reloader {
	f := promauto.With(o.Registerer)
	r := &Reloader{o: o, raw: o.Raw,
		ok: f.NewGauge(prometheus.GaugeOpts{Name: "debi_" + o.Component + "_config_last_reload_successful", Help: o.SuccessHelp}),
		ts: f.NewGauge(prometheus.GaugeOpts{Name: "debi_" + o.Component + "_config_last_reload_success_timestamp_seconds", Help: o.TimestampHelp}),
	}
	r.ok.Set(1)
	r.ts.SetToCurrentTime()
	return r
}

// Reload reads the file again and puts it in force; on error the configuration in force stays,
// the success gauge goes to 0 and Failed is told.
func (r *Reloader) Reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.load(); err != nil {
		r.ok.Set(0)
		r.o.Failed(err)
		return err
	}
	r.ok.Set(1)
	r.ts.SetToCurrentTime()
	return nil
}

func (r *Reloader) load() error {
	raw, err := os.ReadFile(r.o.File)
	if err != nil {
		return err
	}
	if r.o.Unchanged != nil && bytes.Equal(raw, r.raw) {
		r.o.Unchanged()
		return nil
	}
	if err := r.o.Apply(raw); err != nil {
		return err
	}
	r.raw = raw
	return nil
}

// Do runs f serialised with the reloads: for another change of the configuration in force (the
// ElasticScalers' policies).
func (r *Reloader) Do(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f()
}
