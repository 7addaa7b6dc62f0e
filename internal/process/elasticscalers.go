package process

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/oklog/run"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/elasticscaler"
	"github.com/debi-scaler/debi/internal/kube"
)

// ElasticScalerOptions are the parts of a webhook process its ElasticScaler actors use.
type ElasticScalerOptions struct {
	Dynamic   dynamic.Interface
	Kube      kubernetes.Interface
	Informers *kube.Informers
	// Namespaces are global.elastic_scalers.namespaces (empty: every namespace).
	Namespaces []string
	// Get, Recorder, File and Recheck are the status writer's (elasticscaler.StatusOptions).
	Get      func(ctx context.Context, t config.Target) (*unstructured.Unstructured, error)
	Recorder record.EventRecorder
	File     func() *config.Config
	Recheck  time.Duration
	// Apply puts the objects' policies in force (ElasticScalers.With), with n objects'
	// policies: called after each delivery of the source (elasticscaler.RunSource).
	Apply  func(n int)
	Logger *slog.Logger
}

// ElasticScalers are the ElasticScaler actors of a webhook process (global.elastic_scalers):
// the source of the objects' policies and the status writer on every replica (all serve
// notifications and report their decisions), and, on the holder of the process's one Lease
// (Lead, SetLeader), the HPA owner of HPA-algorithm ElasticScalers and the status writer's
// validation.
type ElasticScalers struct {
	o      ElasticScalerOptions
	owner  *elasticscaler.Owner
	status *elasticscaler.StatusWriter

	mu sync.Mutex
	// objects are the policies the source delivered last.
	objects []config.ObjectPolicy
}

// NewElasticScalers builds the actors; nothing runs until Add's run group does.
func NewElasticScalers(o ElasticScalerOptions) *ElasticScalers {
	e := &ElasticScalers{o: o}
	e.owner = elasticscaler.NewOwner(elasticscaler.OwnerOptions{Dynamic: o.Dynamic, Informers: o.Informers, Kube: o.Kube,
		Namespaces: o.Namespaces, Logger: o.Logger.With("component", "hpaowner")})
	e.status = elasticscaler.NewStatusWriter(elasticscaler.StatusOptions{Dynamic: o.Dynamic, Discovery: o.Kube.Discovery(), Get: o.Get,
		Recorder: o.Recorder, Logger: o.Logger.With("component", "elasticscaler-status"), File: o.File, Namespaces: o.Namespaces,
		Informers: o.Informers, Recheck: o.Recheck,
		HPAProblems: e.owner.Problems, // reported in the objects' Validated condition
	})
	return e
}

// With is file with the valid policies of the ElasticScalers the source delivered last (each
// rejected object logged); e nil: file.
func (e *ElasticScalers) With(file *config.Config) *config.Config {
	if e == nil {
		return file
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return elasticscaler.WithPolicies(file, e.objects, e.o.Logger)
}

// deliver keeps the source's policies and has them put in force.
func (e *ElasticScalers) deliver(u elasticscaler.Update) {
	e.mu.Lock()
	e.objects = u.Policies
	e.mu.Unlock()
	elasticscaler.LogRejected(e.o.Logger, u.Errors)
	e.o.Apply(len(u.Policies))
}

// Observe reports a decision to the status writer (the Controllers' Observe hook); e may be
// nil.
func (e *ElasticScalers) Observe(d elasticscaler.Decision) {
	if e != nil {
		e.status.Observe(d)
	}
}

// Add adds the source and the status writer, which run on every replica, to g; they stop when
// ctx ends or g is interrupted. e may be nil.
func (e *ElasticScalers) Add(ctx context.Context, g *run.Group) {
	if e == nil {
		return
	}
	o := e.o
	{ // policies from ElasticScalers
		sctx, cancel := context.WithCancel(ctx)
		g.Add(func() error {
			return elasticscaler.RunSource(sctx, elasticscaler.SourceOptions{Dynamic: o.Dynamic, Informers: o.Informers, Discovery: o.Kube.Discovery(),
				Namespaces: o.Namespaces, StateTriggers: true, Logger: o.Logger.With("component", "elasticscalers")}, e.deliver)
		}, func(error) { cancel() })
	}
	w := e.status
	wctx, cancel := context.WithCancel(ctx)
	g.Add(func() error { return w.Run(wctx) }, func(error) { cancel() })
}

// SetLeader tells the status writer whether this replica holds the process's Lease: validation
// (the Validated condition and its Events) is the holder's only. e may be nil.
func (e *ElasticScalers) SetLeader(leading bool) {
	if e != nil {
		e.status.SetLeader(leading)
	}
}

// Lead runs the HPA owner until ctx ends: the work of the Lease holder (with leader election
// off, of every replica). An owner that stops on an error is logged; Lead still waits for ctx,
// so that the Lease is not handed over for it. e may be nil.
func (e *ElasticScalers) Lead(ctx context.Context) {
	if e == nil {
		return
	}
	if err := e.owner.Run(ctx); err != nil {
		e.o.Logger.Error("HPA owner stopped", "component", "hpaowner", "err", err)
	}
	<-ctx.Done()
}
