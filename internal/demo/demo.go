// Package demo turns a workload trace into the raw series a cluster with kube-prometheus-stack
// would have recorded while an HPA scaled the workload — cAdvisor's CPU counters per pod,
// kube-state-metrics' requests, owners and replica counts — as OpenMetrics text for
// `promtool tsdb create-blocks-from openmetrics`. Backfilled into a Prometheus on a laptop, they
// let the what-if (`debi backtest --config.file`) run end to end without a cluster: its default
// queries fall back to exactly these series while debi's recording rules have no history.
//
// The replica counts are the backtest's own HPA (backtest.Simulate with policy hpa), not a model
// written for the demo, so the what-if's actual row is what `debi backtest` calls hpa.
package demo

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/debi-scaler/debi/backtest"
	"github.com/debi-scaler/debi/trace"
)

// Options are the workload the series describe and the HPA that scaled it.
type Options struct {
	// Namespace, Deployment and Container name the workload as the series label it.
	Namespace, Deployment, Container string
	// Sim is the simulated cluster and its HPA: Request (cores per pod), Params (min/max
	// replicas, the HPA's target and behaviour), StartupDelay, StartupSpread, Tick, MetricWindow, and the
	// demand scale (Scale, else PeakUtilization over the first Warmup samples, as in
	// `debi backtest`). Its Demand is ignored: see Build.
	Sim backtest.Options
	// End is the time of the last sample (zero: now), truncated to the trace's step.
	End time.Time
	// Range is how much history ends at End (0: the whole trace).
	Range time.Duration
	// ScrapeInterval is the time between samples: a multiple of Sim.Tick, at most 30 s so that
	// rate(...[1m]) has two samples in its window.
	ScrapeInterval time.Duration
}

// DefaultOptions are a deployment web in namespace demo, 0.5 cores per pod, an HPA at 60 %
// between 1 and 20 replicas as kubectl autoscale creates it, scraped every 30 s for 7 days.
func DefaultOptions() Options {
	o := backtest.DefaultOptions()
	o.Request = 0.5
	o.Params.Target = 0.6
	o.Params.MaxReplicas = 20
	return Options{Namespace: "demo", Deployment: "web", Container: "app", Sim: o, Range: 7 * 24 * time.Hour, ScrapeInterval: 30 * time.Second}
}

// base is every pod's CPU counter at the first sample, in seconds: a pod that has run for a
// while. It also keeps rate() from limiting its extrapolation at a counter near zero, which
// would make the pods' rates not add up to the demand.
const base = 1000

// Demo is a trace laid on the time line ending at End, with the simulated HPA's replica counts.
type Demo struct {
	o Options
	// Start and End are the times of the first and last samples written; Step is the trace's
	// sample period.
	Start, End time.Time
	Step       time.Duration
	// Scale is the factor from trace values to cores; Pods the pods the series name (the most
	// replicas between Start and End).
	Scale float64
	Pods  int
	// HPA is the simulated HPA's run over the whole trace, with its per-tick series.
	HPA backtest.Run

	origin time.Time // the time of tick 0
	first  int       // the tick of Start
	inst   []float64 // demand per tick (cores), constant until the next tick
	// starts are the start-ups of the HPA's pods created between Start and End.
	starts []backtest.Startup
}

// Build lays tr's samples on the time line ending at o.End and runs the HPA on them. Sample k
// of n (value v_k) is the demand over the step that ends at End − (n−1−k)·step: the pods' CPU
// counters grow by v_k·step over it, so that rate(...[1m]) at a sample's time — where the
// what-if reads the demand, its grid being aligned on the step — gives v_k back exactly. The
// HPA faces that same demand (backtest's step demand, from one step before the first sample).
func Build(ctx context.Context, tr trace.Trace, o Options) (*Demo, error) {
	s := o.Sim
	switch {
	case o.Namespace == "" || o.Deployment == "" || o.Container == "":
		return nil, errors.New("namespace, deployment and container: must not be empty")
	case len(tr.Values) == 0:
		return nil, fmt.Errorf("trace %s: no samples", tr.Name)
	case len(tr.Metrics) > 1:
		return nil, fmt.Errorf("trace %s: has %d metrics (%v); the demo replays a one-metric CPU trace", tr.Name, len(tr.Metrics), tr.Metrics)
	case tr.StepMinutes <= 0:
		return nil, fmt.Errorf("trace %s: step must be positive, got %d minutes", tr.Name, tr.StepMinutes)
	case o.Range < 0:
		return nil, fmt.Errorf("range: must not be negative, got %v", o.Range)
	case s.StartupDelay < 0:
		return nil, fmt.Errorf("startup-delay: must not be negative, got %v", s.StartupDelay)
	case s.StartupSpread < 0:
		return nil, fmt.Errorf("startup-spread: must not be negative, got %v", s.StartupSpread)
	case s.Tick <= 0:
		return nil, fmt.Errorf("tick: must be positive, got %v", s.Tick)
	case o.ScrapeInterval <= 0 || o.ScrapeInterval%s.Tick != 0 || o.ScrapeInterval > 30*time.Second:
		return nil, fmt.Errorf("scrape-interval: must be a multiple of the HPA's sync period (%v) of at most 30s, so that rate(...[1m]) has two samples; got %v", s.Tick, o.ScrapeInterval)
	}
	if err := s.Params.Validate(); err != nil {
		return nil, err
	}
	if !(s.Request > 0) || math.IsInf(s.Request, 0) {
		return nil, fmt.Errorf("request: must be a positive number of cores, got %v", s.Request)
	}
	step := time.Duration(tr.StepMinutes) * time.Minute
	if step%s.Tick != 0 {
		return nil, fmt.Errorf("trace %s: its step %v is not a multiple of the HPA's sync period %v", tr.Name, step, s.Tick)
	}
	scale, err := s.ScaleFor(tr.Values)
	if err != nil {
		return nil, fmt.Errorf("trace %s: %w", tr.Name, err)
	}
	n := len(tr.Values)
	// The step demand holds sample k over [k·step, (k+1)·step): one more sample makes the world
	// reach the last sample's end.
	samples := make([]float64, n+1)
	for k, v := range tr.Values {
		samples[k] = v * scale
	}
	samples[n] = samples[n-1]
	s.Demand, s.KeepSeries, s.Scale = backtest.DemandStep, true, 1
	w, err := backtest.NewWorld(samples, step, s)
	if err != nil {
		return nil, fmt.Errorf("trace %s: %w", tr.Name, err)
	}
	run, err := backtest.Simulate(ctx, w, "hpa", s)
	if err != nil {
		return nil, fmt.Errorf("trace %s: the HPA: %w", tr.Name, err)
	}
	end := o.End
	if end.IsZero() {
		end = time.Now()
	}
	end = end.Truncate(step)
	d := &Demo{o: o, End: end, Step: step, Scale: scale, HPA: run, inst: w.Inst}
	d.origin = end.Add(-time.Duration(n) * step)
	// From one step before the range, so that the rate at its first point has its window.
	from := d.origin
	if o.Range > 0 {
		from = end.Add(-o.Range - step)
		if from.Before(d.origin) {
			from = d.origin
		}
	}
	scrape := int(o.ScrapeInterval / s.Tick)
	d.first = (int((from.Sub(d.origin)+s.Tick-1)/s.Tick) + scrape - 1) / scrape * scrape
	d.Start = d.origin.Add(time.Duration(d.first) * s.Tick)
	last := int(end.Sub(d.origin) / s.Tick)
	for i := d.first; i <= last; i++ {
		d.Pods = max(d.Pods, int(run.Series.Replicas[i]))
	}
	for _, p := range run.Series.Startups {
		if c := int(p.Created / s.Tick); c >= d.first && c <= last {
			d.starts = append(d.starts, p)
		}
	}
	return d, nil
}

// Startups are the start-ups of the HPA's pods created between Start and End, as the series
// record them (kube_pod_created, kube_pod_status_ready_time): when each pod was created and
// when it was ready.
func (d *Demo) Startups() []Startup {
	out := make([]Startup, len(d.starts))
	for i, p := range d.starts {
		out[i] = Startup{Pod: d.pod(d.Pods + i), UID: fmt.Sprintf("0d3b1e5a-0000-4000-8000-%012d", i), Created: d.origin.Add(p.Created), Ready: d.readyTime(p)}
	}
	return out
}

// Startup is one pod's start-up in the series.
type Startup struct {
	Pod, UID       string
	Created, Ready time.Time
}

// readyTime is when a start-up's pod turned Ready, to the second as Kubernetes records it.
func (d *Demo) readyTime(p backtest.Startup) time.Time {
	return d.origin.Add(p.Ready).Truncate(time.Second)
}

// startupLinger is how long a started pod's own series go on after it is Ready.
const startupLinger = 5 * time.Minute

// tick is the index of the tick at t.
func (d *Demo) tick(t time.Time) int { return int(t.Sub(d.origin) / d.o.Sim.Tick) }

// At returns, at a time on the tick grid between Start and End, the demand in cores over the
// step that ends there (what rate() reads back at a sample's time) and the replicas and ready
// pods the HPA had; ok is false outside.
func (d *Demo) At(t time.Time) (demand float64, replicas, ready int32, ok bool) {
	i := d.tick(t)
	if t.Before(d.Start) || t.After(d.End) || i < 1 || d.origin.Add(time.Duration(i)*d.o.Sim.Tick) != t {
		return 0, 0, 0, false
	}
	return d.inst[i-1], d.HPA.Series.Replicas[i], d.HPA.Series.Ready[i], true
}

// replicaSet is the name of the deployment's ReplicaSet; pod its i-th pod's, with the suffix
// alphabet of Kubernetes' generated names.
func (d *Demo) replicaSet() string { return d.o.Deployment + "-7c9f6d8b5" }

func (d *Demo) pod(i int) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	b := []byte("-xxxxx")
	for k := len(b) - 1; k > 0; k-- {
		b[k] = alphabet[i%len(alphabet)]
		i /= len(alphabet)
	}
	return d.replicaSet() + string(b)
}

// WriteOpenMetrics writes the series between Start and End, one sample per scrape interval,
// then # EOF:
//
//   - container_cpu_usage_seconds_total per pod (cAdvisor; a counter): the demand shared
//     evenly by the ready pods; a pod beyond them idles, its counter flat;
//   - kube_pod_container_resource_requests{resource="cpu"} per pod, kube_pod_owner and
//     kube_replicaset_owner (kube-state-metrics): the request and the pod → ReplicaSet →
//     Deployment chain the default queries join on;
//   - kube_deployment_spec_replicas and kube_deployment_status_replicas_ready: the HPA's;
//   - kube_pod_created and kube_pod_status_ready_time (with kube_pod_owner) of a pod for each
//     start-up of the HPA's pods (Startups), from its creation to startupLinger after it was
//     Ready: the start-ups the what-if measures and replays.
//
// Every pod that serves is there for the whole range: a pod that came and went would leave the
// rate of its first and last minute out of the sum, and the demand would not read back as the
// trace. So the pods that start are pods of their own, which use no CPU.
func (d *Demo) WriteOpenMetrics(out io.Writer) error {
	w := bufio.NewWriterSize(out, 1<<16)
	s := d.o.Sim
	scrape := int(d.o.ScrapeInterval / s.Tick)
	last := d.tick(d.End)
	ns, rs := strconv.Quote(d.o.Namespace), strconv.Quote(d.replicaSet())
	var buf []byte
	// series writes one series' samples; value gives the value at tick i.
	// seriesIn writes one series' samples from tick from to tick to; value gives the value at
	// tick i.
	seriesIn := func(labels string, from, to int, value func(i int) float64) {
		for i := (from + scrape - 1) / scrape * scrape; i <= to; i += scrape {
			buf = append(buf[:0], labels...)
			buf = append(buf, ' ')
			buf = strconv.AppendFloat(buf, value(i), 'g', -1, 64)
			buf = append(buf, ' ')
			buf = strconv.AppendInt(buf, d.origin.Add(time.Duration(i)*s.Tick).Unix(), 10)
			buf = append(buf, '\n')
			w.Write(buf)
		}
	}
	series := func(labels string, value func(i int) float64) { seriesIn(labels, d.first, last, value) }
	starts := d.Startups()
	// startupSeries writes a series of every started pod, value giving it from the pod's start-up.
	startupSeries := func(name string, ready bool, labels func(p Startup) string, value func(p Startup) float64) {
		for _, p := range starts {
			from := d.tick(p.Created)
			if ready {
				from = int((p.Ready.Sub(d.origin) + s.Tick - 1) / s.Tick)
			}
			v := value(p)
			seriesIn(name+labels(p), max(from, d.first), min(d.tick(p.Ready.Add(startupLinger)), last), func(int) float64 { return v })
		}
	}
	podUID := func(p Startup) string {
		return fmt.Sprintf(`{namespace=%s,pod=%q,uid=%q}`, ns, p.Pod, p.UID)
	}
	family := func(name, typ, help string) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
	}
	family("container_cpu_usage_seconds", "counter", "Cumulative cpu time consumed in seconds (debi demo: the trace's demand shared by the ready pods).")
	for p := range d.Pods {
		labels := fmt.Sprintf(`container_cpu_usage_seconds_total{container=%q,cpu="total",image=%q,namespace=%s,pod=%q}`,
			d.o.Container, d.o.Deployment+":demo", ns, d.pod(p))
		c, at := float64(base), d.first
		series(labels, func(i int) float64 {
			for ; at < i; at++ { // the pod's share of each tick's demand since the last sample
				if r := max(int(d.HPA.Series.Ready[at]), 1); p < r {
					c += d.inst[at] * s.Tick.Seconds() / float64(r)
				}
			}
			return c
		})
	}
	gauge := func(name, help string, labels func(p int) string, value func(i int) float64) {
		family(name, "gauge", help)
		if labels == nil {
			return
		}
		for p := range d.Pods {
			series(name+labels(p), value)
		}
	}
	one := func(int) float64 { return 1 }
	gauge("kube_pod_container_resource_requests", "The number of requested request resource by a container (debi demo).", func(p int) string {
		return fmt.Sprintf(`{container=%q,namespace=%s,node="demo",pod=%q,resource="cpu",unit="core"}`, d.o.Container, ns, d.pod(p))
	}, func(int) float64 { return s.Request })
	owner := func(pod string) string {
		return fmt.Sprintf(`{namespace=%s,owner_is_controller="true",owner_kind="ReplicaSet",owner_name=%s,pod=%q}`, ns, rs, pod)
	}
	gauge("kube_pod_owner", "Information about the Pod's owner (debi demo).", func(p int) string { return owner(d.pod(p)) }, one)
	startupSeries("kube_pod_owner", false, func(p Startup) string { return owner(p.Pod) }, func(Startup) float64 { return 1 })
	gauge("kube_pod_created", "Unix creation timestamp (debi demo: a pod the simulated HPA started).", nil, nil)
	startupSeries("kube_pod_created", false, podUID, func(p Startup) float64 { return float64(p.Created.Unix()) })
	gauge("kube_pod_status_ready_time", "Readiness achieved time in unix timestamp for a pod (debi demo: a pod the simulated HPA started).", nil, nil)
	startupSeries("kube_pod_status_ready_time", true, podUID, func(p Startup) float64 { return float64(p.Ready.Unix()) })
	gauge("kube_replicaset_owner", "Information about the ReplicaSet's owner (debi demo).", nil, nil)
	series(fmt.Sprintf(`kube_replicaset_owner{namespace=%s,owner_is_controller="true",owner_kind="Deployment",owner_name=%q,replicaset=%s}`, ns, d.o.Deployment, rs), one)
	dep := fmt.Sprintf(`{deployment=%q,namespace=%s}`, d.o.Deployment, ns)
	gauge("kube_deployment_spec_replicas", "Number of desired pods for a deployment (debi demo: the simulated HPA's).", nil, nil)
	series("kube_deployment_spec_replicas"+dep, func(i int) float64 { return float64(d.HPA.Series.Replicas[i]) })
	gauge("kube_deployment_status_replicas_ready", "The number of ready replicas per deployment (debi demo: the simulated HPA's).", nil, nil)
	series("kube_deployment_status_replicas_ready"+dep, func(i int) float64 { return float64(d.HPA.Series.Ready[i]) })
	w.WriteString("# EOF\n")
	return w.Flush()
}
