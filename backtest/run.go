package backtest

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/debi-scaler/debi/forecast"
	"github.com/debi-scaler/debi/policy"
	"github.com/debi-scaler/debi/scaling"
	"github.com/debi-scaler/debi/trace"
)

// job is one run of RunTraces: a policy, or one HPA target of the sweep, on one trace at one
// start-up delay.
type job struct {
	trace   int
	policy  string
	target  float64 // for sweep runs: the HPA target; 0 otherwise
	startup int     // index into the start-up delays; 0 is Options.StartupDelay
	// variant: the what-if's configured budget policy again under another setting
	// (TraceResult.IdleHold, TraceResult.Naive); variantNone otherwise.
	variant variant
}

// variant is a setting the what-if replays its configured budget policy under, beside the
// configuration, for the recommendation to say what it would have done.
type variant int

const (
	variantNone     variant = iota
	variantIdleHold         // scaling.budget.idle hold
	variantNaive            // model naive, the last value
)

// RunTraces backtests every policy on every trace, plus the HPA target sweep and the oracle,
// at Options.StartupDelay and at each delay of Options.StartupSweep.
func RunTraces(ctx context.Context, traces []trace.Trace, o Options) (*Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	rep := &Report{Options: o, Traces: make([]TraceResult, len(traces))}
	worlds := make([]*World, len(traces))
	for i, t := range traces {
		var (
			rec Recorded
			err error
		)
		if rep.Traces[i], worlds[i], rec, err = traceWorld(t, o); err != nil {
			return nil, err
		}
		rep.Coverage = append(rep.Coverage, rec.Coverage...)
		rep.Notes = append(rep.Notes, rec.Notes...)
	}
	delays := startupDelays(o)
	jobs := planJobs(worlds, delays, o)
	results, errs := runJobs(ctx, jobs, worlds, delays, o)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rep.Startup = startupTraces(rep.Traces, worlds, delays[1:], o)
	if err := rep.collect(jobs, results, errs); err != nil {
		return nil, err
	}
	rep.finish()
	return rep, nil
}

// samplePeriod is the sample period of trace t: Options.SamplePeriod when set, else the
// trace's own (at least a minute).
func samplePeriod(t trace.Trace, o Options) time.Duration {
	if o.SamplePeriod != 0 {
		return o.SamplePeriod
	}
	return time.Duration(max(t.StepMinutes, 1)) * time.Minute
}

// traceWorld lays trace t, truncated to Options.MaxSteps, on the tick grid with what Prometheus
// recorded beside it (Options.Recorded), and starts its result: the trace's figures, its
// NeedBound and, for a what-if, the range it scores.
func traceWorld(t trace.Trace, o Options) (TraceResult, *World, Recorded, error) {
	vals := t.Values
	if o.MaxSteps > 0 && len(vals) > o.MaxSteps {
		vals = vals[:o.MaxSteps]
	}
	if len(vals) < o.Warmup+10 {
		return TraceResult{}, nil, Recorded{}, fmt.Errorf("trace %s: %d samples; need more than warmup (%d) + 10 to score anything", t.Name, len(vals), o.Warmup)
	}
	period := samplePeriod(t, o)
	scale, scales, w, err := scaledWorld(t, vals, period, o)
	if err != nil {
		return TraceResult{}, nil, Recorded{}, fmt.Errorf("trace %s: %w", t.Name, err)
	}
	rec := o.Recorded[t.Name]
	if rec.Replicas != nil {
		if len(rec.Replicas) < len(vals) {
			return TraceResult{}, nil, Recorded{}, fmt.Errorf("trace %s: %d recorded replica counts for %d samples", t.Name, len(rec.Replicas), len(vals))
		}
		w.Recorded = rec.Replicas[:len(vals)]
		if rec.Ready != nil {
			if len(rec.Ready) < len(vals) {
				return TraceResult{}, nil, Recorded{}, fmt.Errorf("trace %s: %d recorded ready counts for %d samples", t.Name, len(rec.Ready), len(vals))
			}
			w.RecordedReady = rec.Ready[:len(vals)]
		}
	}
	tr := TraceResult{Trace: t.Name, Class: t.Class, Samples: len(vals), SamplePeriod: period, Scale: scale, Metrics: scales,
		Start: rec.Start, WarmupTime: time.Duration(o.Warmup) * period, Ticks: len(w.Inst), OracleFrontierRatio: math.NaN(),
		Unavoidable: w.Unavoidable(o), UnavoidableTime: w.UnavoidableTime(o), ActualReady: actualReady(rec)}
	if o.Overload == OverloadTime {
		tr.Unavoidable = tr.UnavoidableTime
	}
	tr.bound = w.NeedBound(o, boundReach(tr.Unavoidable, o))
	if rec.Asked > 0 {
		sr := NewScoredRange(rec.Asked, rec.RangeStart, rec.Start, len(vals), o.Warmup, period)
		tr.Range = &sr
	}
	return tr, w, rec, nil
}

// startupDelays are the start-up delays every policy runs at: Options.StartupDelay first, then
// each other delay of Options.StartupSweep.
func startupDelays(o Options) []time.Duration {
	delays := append([]time.Duration{o.StartupDelay}, o.StartupSweep...)
	delays = slices.DeleteFunc(slices.Clone(delays[1:]), func(d time.Duration) bool { return d == o.StartupDelay })
	return append([]time.Duration{o.StartupDelay}, delays...)
}

// planJobs lists the runs at each start-up delay on each world: the actual row where one was
// recorded, every policy, the oracle (unless a policy is) and each HPA target of the sweep.
func planJobs(worlds []*World, delays []time.Duration, o Options) []job {
	var jobs []job
	for s := range delays {
		for i := range worlds {
			if worlds[i].Recorded != nil {
				jobs = append(jobs, job{trace: i, policy: ActualPolicy, startup: s})
			}
			for _, p := range o.Policies {
				jobs = append(jobs, job{trace: i, policy: p, startup: s})
			}
			if !slices.ContainsFunc(o.Policies, func(p string) bool { return strings.EqualFold(p, OraclePolicy) }) {
				jobs = append(jobs, job{trace: i, policy: OraclePolicy, startup: s})
			}
			for _, tg := range o.SweepTargets {
				jobs = append(jobs, job{trace: i, policy: "hpa", target: tg, startup: s})
			}
			if s == 0 && o.idleHoldVariant() {
				jobs = append(jobs, job{trace: i, policy: o.Configured, variant: variantIdleHold})
			}
			if s == 0 && o.naiveVariant() {
				jobs = append(jobs, job{trace: i, policy: o.Configured, variant: variantNaive})
			}
		}
	}
	return jobs
}

// runJobs runs the jobs on Options.Parallel workers (GOMAXPROCS by default), calling
// Options.Progress after each, and returns each job's run and error at its index. It stops
// handing out jobs when ctx is done; the caller checks ctx.
func runJobs(ctx context.Context, jobs []job, worlds []*World, delays []time.Duration, o Options) ([]Run, []error) {
	results := make([]Run, len(jobs))
	errs := make([]error, len(jobs))
	par := o.Parallel
	if par <= 0 {
		par = runtime.GOMAXPROCS(0)
	}
	var (
		wg   sync.WaitGroup
		next = make(chan int)
		mu   sync.Mutex
		done int
	)
	for range par {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range next {
				j := jobs[k]
				results[k], errs[k] = runJob(ctx, j, worlds[j.trace], delays[j.startup], o)
				mu.Lock()
				done++
				if o.Progress != nil {
					o.Progress(done, len(jobs))
				}
				mu.Unlock()
			}
		}()
	}
	for k := range jobs {
		if ctx.Err() != nil {
			break
		}
		next <- k
	}
	close(next)
	wg.Wait()
	return results, errs
}

// runJob runs one job on its world w at start-up delay delay: series are kept for the runs at
// Options.StartupDelay alone, a sweep point runs the HPA at its target and the hpa row at the
// workload's own HPA where a what-if found one.
func runJob(ctx context.Context, j job, w *World, delay time.Duration, o Options) (Run, error) {
	po := o
	po.StartupDelay = delay
	if j.target > 0 || j.startup > 0 {
		po.KeepSeries = false
	}
	switch {
	case j.target > 0:
		po.Params.Target = j.target
	case strings.EqualFold(j.policy, "hpa"):
		po.Params = o.hpaParams() // the workload's HPA, where the what-if found it
	}
	if j.policy == ActualPolicy {
		return simulateActual(ctx, w, po)
	}
	if j.variant != variantNone {
		rc := *o.Runner
		switch j.variant {
		case variantIdleHold:
			rc.Params.Budget.Idle = scaling.IdleHold
		case variantNaive:
			rc.Spec.Model, rc.Fallback = "naive", ""
		}
		po.Runner, po.KeepSeries = &rc, false
	}
	return Simulate(ctx, w, j.policy, po)
}

// startupTraces are the results at each start-up delay of Options.StartupSweep (delays),
// started as traces are, with each world's NeedBound at that delay (nil without a sweep).
func startupTraces(traces []TraceResult, worlds []*World, delays []time.Duration, o Options) []StartupResult {
	var out []StartupResult
	for _, d := range delays {
		sr := StartupResult{Delay: d, Traces: make([]TraceResult, len(traces))}
		for i := range traces {
			tr := traces[i]
			tr.Runs, tr.Frontier, tr.IdleHold, tr.Naive = nil, nil, nil, nil
			so := o
			so.StartupDelay = d
			tr.bound = worlds[i].NeedBound(so, boundReach(tr.Unavoidable, so))
			sr.Traces[i] = tr
		}
		out = append(out, sr)
	}
	return out
}

// collect files each job's run under its trace and start-up delay, a policy's run or a point of
// the sweep. A failed sweep point marks its trace (TraceResult.SweepFailed); a failed run fails
// the backtest.
func (rep *Report) collect(jobs []job, results []Run, errs []error) error {
	for k, j := range jobs {
		tr := &rep.Traces[j.trace]
		if j.startup > 0 {
			tr = &rep.Startup[j.startup-1].Traces[j.trace]
		}
		if errs[k] != nil {
			if j.target > 0 {
				tr.SweepFailed = errs[k].Error()
				continue
			}
			return fmt.Errorf("trace %s, policy %s: %w", tr.Trace, j.policy, errs[k])
		}
		switch r := results[k]; j.variant {
		case variantIdleHold:
			tr.IdleHold = &r
			continue
		case variantNaive:
			tr.Naive = &r
			continue
		}
		if j.target > 0 {
			r := results[k]
			tr.Frontier = append(tr.Frontier, FrontierPoint{Target: j.target, Cost: r.Cost, OverloadFraction: r.OverloadFraction, ActionsPerDay: r.ActionsPerDay,
				Pages: r.Pages, Tickets: r.Tickets})
			continue
		}
		tr.Runs = append(tr.Runs, results[k])
	}
	return nil
}

// finish scores every trace's runs against the frontier and the oracle (finishTrace), adds the
// notes of the traces at Options.StartupDelay and, for a what-if, the recommendation.
func (rep *Report) finish() {
	o := rep.Options
	for i := range rep.Traces {
		finishTrace(&rep.Traces[i], o.Calibration.Budget)
		rep.notes(&rep.Traces[i])
		rep.metricNotes(&rep.Traces[i])
	}
	for s := range rep.Startup {
		for i := range rep.Startup[s].Traces {
			finishTrace(&rep.Startup[s].Traces[i], o.Calibration.Budget)
		}
	}
	if o.Configured != "" && len(rep.Traces) > 0 {
		rep.Recommendation = Recommend(rep.Traces[0], o)
	}
}

// HistoryWarnings lists, before a run, every policy whose model needs more samples than the
// warm-up gives on a trace (a daily Holt-Winters on one-minute samples needs two days): it
// forecasts nothing until then, and the report's forecast_coverage column says how much of the
// scored time it missed.
func HistoryWarnings(traces []trace.Trace, o Options) []string {
	var out []string
	for _, t := range traces {
		period := samplePeriod(t, o)
		for _, p := range o.Policies {
			if _, ok, _ := ParseClairvoyant(p); ok {
				continue
			}
			spec, err := o.parse(p)
			if err != nil || spec.Model == "" {
				continue
			}
			mc := o.Model
			if mc.Season == 0 {
				mc.Season = policy.SeasonSteps(o.Season, period)
			}
			f, err := forecast.New(spec.Model, mc)
			if err != nil {
				continue
			}
			if need := f.MinHistory(); need > o.Warmup {
				out = append(out, fmt.Sprintf("%s/%s: %s needs %d samples (%v) before its first forecast; the warm-up is %d samples",
					t.Name, spec.Name, spec.Model, need, time.Duration(need)*period, o.Warmup))
			}
		}
	}
	return out
}

// metricNotes names, on a trace with several metrics, how many overloaded ticks each metric
// caused in each policy's run.
func (rep *Report) metricNotes(tr *TraceResult) {
	for _, r := range tr.Runs {
		if r.MetricOverload == nil {
			continue
		}
		parts := make([]string, len(r.MetricOverload))
		for k, m := range r.MetricOverload {
			parts[k] = fmt.Sprintf("%s %.2f%% (%d ticks, %d alone)", m.Metric, 100*m.Fraction, m.Ticks, m.Alone)
		}
		rep.Notes = append(rep.Notes, fmt.Sprintf("%s/%s: overloaded %.2f%% of the scored ticks (any metric); by metric: %s",
			tr.Trace, r.Policy, 100*r.OverloadFraction, strings.Join(parts, ", ")))
	}
}

// notes says what a reader of the trace's figures must know.
func (rep *Report) notes(tr *TraceResult) {
	for _, r := range tr.Runs {
		if r.ModelHistory > rep.Options.Warmup && !math.IsNaN(r.ForecastCoverage) {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s/%s: the model needs %d samples (%v), the warm-up gives %d: it forecast %.0f%% of the scored time",
				tr.Trace, r.Policy, r.ModelHistory, time.Duration(r.ModelHistory)*tr.SamplePeriod, rep.Options.Warmup, 100*r.ForecastCoverage))
		}
	}
}
