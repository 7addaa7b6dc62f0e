package backtest

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/debi-scaler/debi/trace"
)

// World is one trace laid on the tick grid: the demand every policy faces, shared read-only
// by all runs on that trace.
type World struct {
	Period time.Duration // sample period
	Tick   time.Duration
	// Inst is the demand at each tick; Obs the mean over the metric window before it (cores).
	// On a trace with several metrics they are the first metric's.
	Inst, Obs []float64
	// Metrics names the metrics of a trace with several (nil: one); MInst and MObs hold each
	// metric's Inst and Obs, in cores of the one request R (each metric is scaled so that its
	// capacity per pod is R), MInst[0] being Inst. Peak is the largest of the metrics' demands
	// at each tick (Inst itself for one metric): since every metric's capacity is R, a tick is
	// overloaded when Peak is above u_sla·Nr·R — when any metric is — and Peak is what the
	// unserved demand, the oracle and the need are scored on.
	Metrics     []string
	MInst, MObs [][]float64
	Peak        []float64
	// Warm is the first scored tick.
	Warm int
	// Recorded are the recorded spec replica counts per sample (nil: none), which the actual
	// row replays; RecordedReady the recorded ready counts (nil: modelled).
	Recorded, RecordedReady []float64
}

// UnavoidableTime is the share of scored time whose demand exceeds u_sla·N_max·R, read between
// the ticks as Metrics.OverloadTime reads.
func (w *World) UnavoidableTime(o Options) float64 {
	k := len(w.Inst) - w.Warm
	if k <= 0 {
		return 0
	}
	var t float64
	for i := w.Warm; i < len(w.Inst); i++ {
		t += w.overShare(i, o.Params.MaxReplicas, o.Params.MaxReplicas, o.SLAUtilization*o.Request, o.Demand == DemandStep)
	}
	return t / float64(k)
}

// overShare is the share of the interval that ends at tick i over which a demand is above
// ready·perPod, the capacity of the pods ready over it (those of tick i−1), when any metric's is:
// linear between the ticks, or at the level of tick i−1 under step demand (whose samples change
// at ticks, so an interval holds one sample's level). With no tick before i, or no ready count
// for it (ready < 0), the demand at tick i is read against the pods ready then (now), as the
// tick count reads it.
func (w *World) overShare(i int, ready, now int32, perPod float64, step bool) float64 {
	if i == 0 || ready < 0 {
		if w.peak()[i] > float64(now)*perPod {
			return 1
		}
		return 0
	}
	c := float64(ready) * perPod
	metrics := w.MInst
	if metrics == nil {
		metrics = [][]float64{w.Inst}
	}
	// Over the interval, each metric's demand is above c on a part that starts it (head), ends
	// it (tail), or all of it: the union is the largest head plus the largest tail.
	var head, tail float64
	for _, m := range metrics {
		a, b := m[i-1], m[i]
		if step {
			b = a
		}
		switch {
		case a > c && b > c:
			return 1
		case a > c:
			head = max(head, (a-c)/(a-b))
		case b > c:
			tail = max(tail, (b-c)/(b-a))
		}
	}
	return min(1, head+tail)
}

// Unavoidable is the share of scored ticks whose demand exceeds u_sla·N_max·R.
func (w *World) Unavoidable(o Options) float64 {
	n, k := 0, 0
	for _, d := range w.peak()[w.Warm:] {
		k++
		if d > o.SLAUtilization*float64(o.Params.MaxReplicas)*o.Request {
			n++
		}
	}
	if k == 0 {
		return 0
	}
	return float64(n) / float64(k)
}

// peak is Peak, or Inst for a World built without it.
func (w *World) peak() []float64 {
	if w.Peak != nil {
		return w.Peak
	}
	return w.Inst
}

// multi says whether the world has several metrics.
func (w *World) multi() bool { return len(w.Metrics) > 1 }

// NewWorldMetrics lays the samples of several metrics (cores of R each, columns[k] metric
// names[k]'s) with one sample period on the tick grid of o. One metric is NewWorld.
func NewWorldMetrics(names []string, columns [][]float64, period time.Duration, o Options) (*World, error) {
	if len(columns) == 0 || len(names) != len(columns) {
		return nil, fmt.Errorf("%d metric names for %d columns", len(names), len(columns))
	}
	w, err := NewWorld(columns[0], period, o)
	if err != nil || len(columns) == 1 {
		return w, err
	}
	w.Metrics = names
	w.MInst, w.MObs = [][]float64{w.Inst}, [][]float64{w.Obs}
	w.Peak = slices.Clone(w.Inst)
	for k, c := range columns[1:] {
		if len(c) != len(columns[0]) {
			return nil, fmt.Errorf("metric %s: %d samples, metric %s has %d", names[k+1], len(c), names[0], len(columns[0]))
		}
		wk, err := NewWorld(c, period, o)
		if err != nil {
			return nil, fmt.Errorf("metric %s: %w", names[k+1], err)
		}
		w.MInst, w.MObs = append(w.MInst, wk.Inst), append(w.MObs, wk.Obs)
		for i, d := range wk.Inst {
			w.Peak[i] = math.Max(w.Peak[i], d)
		}
	}
	return w, nil
}

// NewWorld lays samples (cores) with the given sample period on the tick grid of o.
func NewWorld(samples []float64, period time.Duration, o Options) (*World, error) {
	if len(samples) == 0 {
		return nil, errors.New("empty demand series")
	}
	if period <= 0 {
		return nil, fmt.Errorf("sample period must be positive, got %v", period)
	}
	if o.Tick <= 0 {
		return nil, fmt.Errorf("tick must be positive, got %v", o.Tick)
	}
	total := time.Duration(len(samples)-1) * period
	n := int(total/o.Tick) + 1
	w := &World{Period: period, Tick: o.Tick, Inst: make([]float64, n), Obs: make([]float64, n)}
	linear := o.Demand != DemandStep
	// cum[k] = ∫ demand over [0, k·period].
	cum := make([]float64, len(samples))
	P := period.Seconds()
	for k := 1; k < len(samples); k++ {
		if linear {
			cum[k] = cum[k-1] + P*(samples[k-1]+samples[k])/2
		} else {
			cum[k] = cum[k-1] + P*samples[k-1]
		}
	}
	at := func(t time.Duration) float64 { // instantaneous demand
		k := int(t / period)
		if k >= len(samples)-1 {
			return samples[len(samples)-1]
		}
		if !linear {
			return samples[k]
		}
		f := float64(t-time.Duration(k)*period) / float64(period)
		return samples[k] + f*(samples[k+1]-samples[k])
	}
	integral := func(t time.Duration) float64 { // ∫ demand over [0, t]
		k := int(t / period)
		if k >= len(samples)-1 {
			return cum[len(samples)-1] + (t-time.Duration(len(samples)-1)*period).Seconds()*samples[len(samples)-1]
		}
		dt := (t - time.Duration(k)*period).Seconds()
		if linear {
			return cum[k] + dt*(samples[k]+at(t))/2
		}
		return cum[k] + dt*samples[k]
	}
	warmTime := time.Duration(o.Warmup) * period
	w.Warm = n
	for i := range n {
		t := time.Duration(i) * o.Tick
		w.Inst[i] = at(t)
		from := max(0, t-o.MetricWindow)
		if o.MetricWindow <= 0 || t == 0 {
			w.Obs[i] = w.Inst[i]
		} else {
			w.Obs[i] = (integral(t) - integral(from)) / (t - from).Seconds()
		}
		if t >= warmTime && w.Warm == n {
			w.Warm = i
		}
	}
	return w, nil
}

// metricWorld scales each metric of t (truncated to Options.MaxSteps) to cores of R — by its
// capacity per pod where Options.Capacity gives one, else as a one-metric trace is — and lays
// them on the tick grid.
func metricWorld(t trace.Trace, period time.Duration, o Options) ([]MetricScale, *World, error) {
	for name := range o.Capacity {
		if !slices.Contains(t.Metrics, name) {
			return nil, nil, fmt.Errorf("trace.capacity: no metric %q (the trace's: %s)", name, strings.Join(t.Metrics, ", "))
		}
	}
	scales := make([]MetricScale, len(t.Metrics))
	cols := make([][]float64, len(t.Metrics))
	for k, name := range t.Metrics {
		vals := t.Columns[k]
		if o.MaxSteps > 0 && len(vals) > o.MaxSteps {
			vals = vals[:o.MaxSteps]
		}
		scale := o.Request / o.Capacity[name]
		if _, ok := o.Capacity[name]; !ok {
			var err error
			if scale, err = o.ScaleFor(vals); err != nil {
				return nil, nil, fmt.Errorf("metric %s: %w", name, err)
			}
		}
		scales[k] = MetricScale{Metric: name, Scale: scale, Capacity: o.Request / scale}
		cols[k] = make([]float64, len(vals))
		for j, v := range vals {
			cols[k][j] = v * scale
		}
	}
	w, err := NewWorldMetrics(t.Metrics, cols, period, o)
	return scales, w, err
}

// scaledWorld lays the samples vals of trace t (Options.MaxSteps applied) on the tick grid in
// cores of R: each metric of a trace with several by metricWorld, one metric scaled by
// Options.ScaleFor. scale is the first metric's factor, scales each metric's (nil for one).
func scaledWorld(t trace.Trace, vals []float64, period time.Duration, o Options) (scale float64, scales []MetricScale, w *World, err error) {
	if len(t.Metrics) > 1 {
		if scales, w, err = metricWorld(t, period, o); err != nil {
			return 0, nil, nil, err
		}
		return scales[0].Scale, scales, w, nil
	}
	if scale, err = o.ScaleFor(vals); err != nil {
		return 0, nil, nil, err
	}
	d := make([]float64, len(vals))
	for j, v := range vals {
		d[j] = v * scale
	}
	if w, err = NewWorld(d, period, o); err != nil {
		return 0, nil, nil, err
	}
	return scale, nil, w, nil
}
