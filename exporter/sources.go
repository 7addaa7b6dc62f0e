package exporter

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/internal/kube"
	"github.com/debi-scaler/debi/internal/metricsapi"
)

// Metrics read from the Kubernetes metrics APIs (a metric's external, object or pods source).
// Every step reads all of them, of every policy, in one MetricsReader.Read (bounded
// concurrency and a per-metric timeout: the metricsapi.Reader's), at the same time as the
// step's batched PromQL, and feeds each value into its metric's runner as a PromQL demand is
// fed: a failed read is a NaN demand, the metric is missing, and a missing metric never lets
// the others scale down. The APIs keep no history, so the exporter publishes what it read as
// debi_metric_source_value and loads the history of such a metric from that series
// (config.SourceHistoryQuery): after a restart the models start from what the previous
// exporter read; on the first start there is none and the model warms up as with any short
// history.

// MetricsReader reads metrics from the metrics APIs; *metricsapi.Reader is one.
type MetricsReader interface {
	Read(ctx context.Context, qs []metricsapi.Query) []metricsapi.Result
}

// PodSelectorFunc returns the pods of a target, for its Pods metrics: the selector its scale
// subresource publishes in status.selector, as the HPA reads it.
type PodSelectorFunc func(ctx context.Context, t config.Target) (labels.Selector, error)

// errNoPodSelector: the target's pod selector could not be read.
var errNoPodSelector = errors.New("no pod selector")

// errNoMetricsAPI: the exporter has no client of the metrics APIs.
var errNoMetricsAPI = errors.New("no client of the metrics APIs")

// podSelectorTTL is how long a target's pod selector is kept.
const podSelectorTTL = time.Minute

// sourceClients builds the clients of the metrics APIs and of the targets' scale subresources
// on first use and keeps them; a failure (no kube credentials) is kept for a minute and is
// every such read's error meanwhile.
type sourceClients struct {
	mu    sync.Mutex
	build func() (kubeReaders, error)
	kubeReaders
	built bool
	err   error
	at    time.Time

	selMu sync.Mutex
	sels  map[string]selEntry
}

// kubeReaders are what the exporter reads from the Kubernetes API: the metrics APIs, the pod
// selector of a target (Pods metrics) and the pods and size of a target of any kind.
type kubeReaders struct {
	reader   MetricsReader
	selector PodSelectorFunc
	pods     TargetPodsFunc
}

type selEntry struct {
	sel labels.Selector
	at  time.Time
}

// get returns the clients, building them if need be.
func (s *sourceClients) get(now time.Time) (kubeReaders, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.built {
		return s.kubeReaders, nil
	}
	if s.build == nil {
		return kubeReaders{}, fmt.Errorf("%w: the exporter runs without kube credentials", errNoMetricsAPI)
	}
	if s.err != nil && now.Sub(s.at) < time.Minute {
		return kubeReaders{}, s.err
	}
	k, err := s.build()
	if err != nil {
		s.err, s.at = fmt.Errorf("%w: %w", errNoMetricsAPI, err), now
		return kubeReaders{}, s.err
	}
	s.kubeReaders, s.built, s.err = k, true, nil
	return k, nil
}

// targetPods is the reader of targets' pods (errNoTargetPods when the exporter has none).
func (s *sourceClients) targetPods(now time.Time) (TargetPodsFunc, error) {
	k, err := s.get(now)
	if err == nil && k.pods == nil {
		err = errNoTargetPods
	}
	return k.pods, err
}

// errNoTargetPods: the exporter was given readers of the metrics APIs without one of the
// targets' pods (embedding, tests).
var errNoTargetPods = errors.New("nothing reads the targets' scale subresources and pods")

// podSelector is the target's pod selector, kept for podSelectorTTL (an error is not kept).
func (s *sourceClients) podSelector(ctx context.Context, f PodSelectorFunc, t config.Target, now time.Time) (labels.Selector, error) {
	key := t.Identity()
	s.selMu.Lock()
	e, ok := s.sels[key]
	s.selMu.Unlock()
	if ok && now.Sub(e.at) < podSelectorTTL {
		return e.sel, nil
	}
	if f == nil {
		return nil, fmt.Errorf("%w: nothing reads the target's scale subresource", errNoPodSelector)
	}
	sel, err := f(ctx, t)
	if err != nil {
		return nil, fmt.Errorf("%w of %s: %w", errNoPodSelector, t, err)
	}
	s.selMu.Lock()
	if s.sels == nil {
		s.sels = map[string]selEntry{}
	}
	s.sels[key] = selEntry{sel, now}
	s.selMu.Unlock()
	return sel, nil
}

// newSourceClients builds the readers from the exporter's connection to the API server: the
// metrics APIs' reader from its configuration (a copy with the reader's own timeout, and its
// rate limiter), the pod selector and the targets' pods from its clients.
func newSourceClients(conn *kubeConn) func() (kubeReaders, error) {
	return func() (kubeReaders, error) {
		rc, c, err := conn.get()
		if err != nil {
			return kubeReaders{}, err
		}
		r, err := metricsapi.New(rc, metricsapi.Options{})
		if err != nil {
			return kubeReaders{}, err
		}
		return kubeReaders{reader: r, selector: ScaleSelector(c), pods: ScaleTargetPods(c)}, nil
	}
}

// ScaleSelector is the PodSelectorFunc of the API server of c: the target's scale subresource's
// status.selector (a Deployment's, StatefulSet's or ReplicaSet's pod selector; a custom resource
// publishes one when its scale subresource sets labelSelectorPath).
func ScaleSelector(c *kube.Clients) PodSelectorFunc {
	scale := readScale(c)
	return func(ctx context.Context, t config.Target) (labels.Selector, error) {
		s, err := scale(ctx, t)
		return s.selector, err
	}
}

// sourceQuery is the metricsapi query of a metric's source; podSel is the target's pods (Pods).
func sourceQuery(s *config.MetricSource, podSel labels.Selector) (metricsapi.Query, error) {
	sel, err := s.Selector.Selector()
	if err != nil {
		return metricsapi.Query{}, err
	}
	q := metricsapi.Query{Namespace: s.Namespace, Metric: s.Metric, Selector: sel}
	switch s.Type {
	case config.SourceExternal:
		q.Type = metricsapi.External
	case config.SourceObject:
		q.Type = metricsapi.Object
		q.Object = metricsapi.ObjectRef{APIVersion: s.Object.APIVersion, Kind: s.Object.Kind, Name: s.Object.Name}
	case config.SourcePods:
		q.Type, q.PodSelector = metricsapi.Pods, podSel
	default:
		return q, fmt.Errorf("unknown source type %q", s.Type)
	}
	return q, nil
}

// sourceReason is the reason label of a failed read (config.SourceReasons).
func sourceReason(err error) string {
	switch {
	case errors.Is(err, metricsapi.ErrNotServed):
		return "not_served"
	case errors.Is(err, metricsapi.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, metricsapi.ErrNoValues):
		return "no_values"
	case errors.Is(err, errNoPodSelector), errors.Is(err, errNoStatusSelector):
		return "no_pod_selector"
	case apierrors.IsNotFound(err):
		return "not_found"
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return "forbidden"
	}
	return "error"
}

// sourceRead is the step's read of one metric's source.
type sourceRead struct {
	value  float64
	err    error
	reason string // of err
}

// readSources reads every metrics-API metric of the policies that step at t, in one Read, and
// leaves each result in its metric's state for stepPolicy. The Read is bounded by the interval,
// as a policy's step is.
func (e *Exporter) readSources(ctx context.Context) {
	type slot struct {
		ps *policyState
		m  *metricState
	}
	var slots []slot
	for _, ps := range e.policies {
		for _, m := range ps.metrics {
			if m.spec.Source != nil {
				m.read = sourceRead{value: math.NaN(), err: errors.New("not read")}
				if ps.failed == nil {
					slots = append(slots, slot{ps, m})
				}
			}
		}
	}
	if len(slots) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, e.interval)
	defer cancel()
	now := e.now()
	k, err := e.sources.get(now)
	if err == nil && k.reader == nil {
		err = fmt.Errorf("%w: none given", errNoMetricsAPI)
	}
	reader, podSel := k.reader, k.selector
	var qs []metricsapi.Query
	var asked []slot
	for _, s := range slots {
		src := s.m.spec.Source
		if err != nil {
			s.m.read.err = fmt.Errorf("%s: %w", src, err)
			continue
		}
		var sel labels.Selector
		if src.Type == config.SourcePods {
			var serr error
			if sel, serr = e.sources.podSelector(ctx, podSel, s.ps.cfg.Target, now); serr != nil {
				s.m.read.err = fmt.Errorf("%s: %w", src, serr)
				continue
			}
		}
		q, qerr := sourceQuery(src, sel)
		if qerr != nil {
			s.m.read.err = fmt.Errorf("%s: %w", src, qerr)
			continue
		}
		qs, asked = append(qs, q), append(asked, s)
	}
	if len(qs) > 0 {
		start := time.Now()
		res := reader.Read(ctx, qs)
		e.metrics.queryDuration.WithLabelValues("metrics_api", "instant").Observe(time.Since(start).Seconds())
		for i, s := range asked {
			r := res[i]
			switch {
			case r.Err != nil:
				s.m.read.err = r.Err
			case math.IsNaN(r.Value) || math.IsInf(r.Value, 0):
				s.m.read.err = fmt.Errorf("%s: %w: value is %v", r.Query, metricsapi.ErrNoValues, r.Value)
			default:
				s.m.read = sourceRead{value: r.Value}
			}
		}
	}
	for _, s := range slots {
		e.noteSource(s.ps, s.m)
	}
}

// noteSource counts a failed read by reason and logs each metric's transitions: failing (or
// failing for another reason), and back.
func (e *Exporter) noteSource(ps *policyState, m *metricState) {
	r := &m.read
	prev := m.failedReason
	if r.err == nil {
		m.failedReason = ""
		if prev != "" {
			e.log.Info("metric read from its metrics API again", "policy", ps.cfg.Name, "metric", m.spec.Name, "source", m.spec.Source.String())
		}
		return
	}
	r.value = math.NaN()
	r.reason = sourceReason(r.err)
	m.sourceErrors[r.reason]++
	m.failedReason = r.reason
	if prev != r.reason {
		e.log.Warn("metric not read from its metrics API: it is missing, and no scale-down happens while it fails",
			"policy", ps.cfg.Name, "metric", m.spec.Name, "field", ps.path+"."+m.spec.Source.Path, "reason", r.reason, "err", r.err)
		return
	}
	e.log.Debug("metric still not read from its metrics API", "policy", ps.cfg.Name, "metric", m.spec.Name, "reason", r.reason, "err", r.err)
}

// SetMetricsAPI makes the exporter read the metrics APIs through r, the pods of Pods metrics
// through sel (nil: such metrics fail with reason no_pod_selector) and the pods and size of
// targets of any kind through pods (nil: they are not published), instead of the clients built
// from the kube credentials (embedding, tests). Call it before the first step.
func (e *Exporter) SetMetricsAPI(r MetricsReader, sel PodSelectorFunc, pods TargetPodsFunc) {
	e.sources.mu.Lock()
	defer e.sources.mu.Unlock()
	e.sources.kubeReaders, e.sources.built = kubeReaders{reader: r, selector: sel, pods: pods}, true
}
