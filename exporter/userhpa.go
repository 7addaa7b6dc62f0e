package exporter

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/debi-scaler/debi/config"
)

// HPA is a workload's own HorizontalPodAutoscaler as kube-state-metrics (v2) exported it over a
// what-if range: the what-if's hpa row replays it rather than an HPA at the policy's
// scaling.target, so that the row is what the user runs.
type HPA struct {
	// Namespace and Name name the HPA object.
	Namespace, Name string
	// Metrics are the HPA's metrics at its last sample, as "name (target type)": "cpu
	// (utilization)", "memory (average)". Only an HPA on CPU utilization alone is replayable.
	Metrics []string
	// Target is the CPU AverageUtilization target as a fraction (60 % is 0.6; 0 without one),
	// MinReplicas and MaxReplicas the bounds: each the last value within the range.
	Target                   float64
	MinReplicas, MaxReplicas int32
	// Changes say what of the spec changed within the range, first value → last ("target 50 %
	// → 60 %"), and when the HPA was last seen if that is before the range's end: the last
	// values are the ones replayed.
	Changes []string
	// Others are the other HPAs found on the same workload (the one last seen is read).
	Others []string
}

// CPUUtilization says the HPA scales on the CPU AverageUtilization target alone, the HPA the
// simulator reproduces (scaling.HPA).
func (h HPA) CPUUtilization() bool {
	return len(h.Metrics) == 1 && h.Metrics[0] == "cpu (utilization)" && h.Target > 0
}

// The kube-state-metrics v2 families FindHPA reads (internal/store/horizontalpodautoscaler.go):
// every series has namespace and horizontalpodautoscaler; the info series names the scale
// target, the target metric series the metric and its target type (value, utilization,
// average), a utilization in percent.
const (
	kubeHPAInfo         = "kube_horizontalpodautoscaler_info"
	kubeHPATargetMetric = "kube_horizontalpodautoscaler_spec_target_metric"
	kubeHPAMinReplicas  = "kube_horizontalpodautoscaler_spec_min_replicas"
	kubeHPAMaxReplicas  = "kube_horizontalpodautoscaler_spec_max_replicas"
)

// maxHPAPoints bounds the points per series of FindHPA's range queries: a spec changes rarely,
// and the step is widened over long ranges (the lookback still sees every scrape).
const maxHPAPoints = 1000

// FindHPA reads from kube-state-metrics the HorizontalPodAutoscaler whose scale target is t
// (scaletargetref_kind and scaletargetref_name, and the group of scaletargetref_api_version
// where kube-state-metrics exports it) over [start, end]: its metrics, CPU utilization target
// and replica bounds, the last values within the range. found is false when no HPA of t has a
// sample in the range; several give the one seen last, the others named. Duplicate series (two
// kube-state-metrics replicas) are one. The behavior field is not exported: the caller assumes
// one.
func FindHPA(ctx context.Context, q Querier, t config.Target, start, end time.Time, step time.Duration) (h HPA, found bool, err error) {
	step = max(step, time.Minute, (end.Sub(start)/maxHPAPoints).Truncate(time.Minute)+time.Minute)
	r := v1.Range{Start: start, End: end, Step: step}
	read := func(expr string) (model.Matrix, error) {
		v, _, _, err := q.QueryRange(ctx, expr, r)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", expr, err)
		}
		m, ok := v.(model.Matrix)
		if !ok && v != nil {
			return nil, fmt.Errorf("%s: a %s, want a matrix", expr, v.Type())
		}
		return m, nil
	}
	info, err := read(fmt.Sprintf(`%s{namespace=%q,scaletargetref_name=%q}`, kubeHPAInfo, t.Namespace, t.Name))
	if err != nil {
		return h, false, err
	}
	names := lastByLabel(matchTarget(info, t), "horizontalpodautoscaler")
	if len(names) == 0 {
		return h, false, nil
	}
	h.Namespace, h.Name = t.Namespace, names[0].key
	for _, o := range names[1:] {
		h.Others = append(h.Others, t.Namespace+"/"+o.key)
	}
	if last := names[0].last.Timestamp.Time(); end.Sub(last) > step {
		h.Changes = append(h.Changes, "last seen "+last.UTC().Format("2006-01-02 15:04")+", before the range's end")
	}
	sel := fmt.Sprintf(`{namespace=%q,horizontalpodautoscaler=%q}`, h.Namespace, h.Name)
	tm, err := read(kubeHPATargetMetric + sel)
	if err != nil {
		return h, true, err
	}
	metrics := lastByLabel(tm, "metric_name", "metric_target_type")
	for _, m := range metrics {
		if m.last.Timestamp != metrics[0].last.Timestamp {
			continue // a metric the HPA no longer has
		}
		name, typ, _ := strings.Cut(m.key, "\x00")
		h.Metrics = append(h.Metrics, name+" ("+typ+")")
		if name == "cpu" && typ == "utilization" {
			h.Target = float64(m.last.Value) / 100
			if m.first.Value != m.last.Value {
				h.Changes = append(h.Changes, fmt.Sprintf("target %g %% → %g %%", float64(m.first.Value), float64(m.last.Value)))
			}
		}
	}
	slices.Sort(h.Metrics)
	for _, b := range []struct {
		family, what string
		into         *int32
	}{{kubeHPAMinReplicas, "min_replicas", &h.MinReplicas}, {kubeHPAMaxReplicas, "max_replicas", &h.MaxReplicas}} {
		m, err := read(b.family + sel)
		if err != nil {
			return h, true, err
		}
		if v := lastByLabel(m); len(v) > 0 {
			*b.into = int32(v[0].last.Value)
			if v[0].first.Value != v[0].last.Value {
				h.Changes = append(h.Changes, fmt.Sprintf("%s %g → %g", b.what, float64(v[0].first.Value), float64(v[0].last.Value)))
			}
		}
	}
	return h, true, nil
}

// matchTarget keeps the info series whose scale target is t's kind (any case) and, where
// kube-state-metrics exports the scale target's API version, t's group.
func matchTarget(m model.Matrix, t config.Target) model.Matrix {
	var out model.Matrix
	for _, s := range m {
		if !strings.EqualFold(string(s.Metric["scaletargetref_kind"]), t.Kind) {
			continue
		}
		if av, ok := s.Metric["scaletargetref_api_version"]; ok && av != "" {
			g, _, versioned := strings.Cut(string(av), "/")
			if !versioned {
				g = ""
			}
			if g != t.Group() {
				continue
			}
		}
		out = append(out, s)
	}
	return out
}

// seriesSpan is the first and last sample of the series of one key.
type seriesSpan struct {
	key         string
	first, last model.SamplePair
}

// lastByLabel groups m's series by the values of labels (joined by NUL; every series one group
// without labels) and returns each group's first and last sample, the group seen last first
// (then by key).
func lastByLabel(m model.Matrix, labels ...string) []seriesSpan {
	by := map[string]*seriesSpan{}
	var out []*seriesSpan
	for _, s := range m {
		if len(s.Values) == 0 {
			continue
		}
		vals := make([]string, len(labels))
		for i, l := range labels {
			vals[i] = string(s.Metric[model.LabelName(l)])
		}
		key := strings.Join(vals, "\x00")
		first, last := s.Values[0], s.Values[len(s.Values)-1]
		g, ok := by[key]
		if !ok {
			g = &seriesSpan{key: key, first: first, last: last}
			by[key] = g
			out = append(out, g)
			continue
		}
		if first.Timestamp < g.first.Timestamp {
			g.first = first
		}
		if last.Timestamp > g.last.Timestamp {
			g.last = last
		}
	}
	slices.SortFunc(out, func(a, b *seriesSpan) int {
		if c := b.last.Timestamp.Time().Compare(a.last.Timestamp.Time()); c != 0 {
			return c
		}
		return strings.Compare(a.key, b.key)
	})
	res := make([]seriesSpan, len(out))
	for i, g := range out {
		res[i] = *g
	}
	return res
}
