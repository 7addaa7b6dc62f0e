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
	"github.com/debi-scaler/debi/trace"
)

type job struct {
	trace   int
	policy  string
	target  float64 // for sweep runs: the HPA target; 0 otherwise
	startup int     // index into the start-up delays; 0 is Options.StartupDelay
}

// RunTraces backtests every policy on every trace, plus the HPA target sweep and the oracle,
// at Options.StartupDelay and at each delay of Options.StartupSweep.
func RunTraces(ctx context.Context, traces []trace.Trace, o Options) (*Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	rep := &Report{Options: o, Traces: make([]TraceResult, len(traces))}
	worlds := make([]*World, len(traces))
	for i, t := range traces {
		vals := t.Values
		if o.MaxSteps > 0 && len(vals) > o.MaxSteps {
			vals = vals[:o.MaxSteps]
		}
		if len(vals) < o.Warmup+10 {
			return nil, fmt.Errorf("trace %s: %d samples; need more than warmup (%d) + 10 to score anything", t.Name, len(vals), o.Warmup)
		}
		period := o.SamplePeriod
		if period == 0 {
			period = time.Duration(max(t.StepMinutes, 1)) * time.Minute
		}
		var (
			scale  float64
			scales []MetricScale
			err    error
		)
		if len(t.Metrics) > 1 {
			if scales, worlds[i], err = metricWorld(t, period, o); err != nil {
				return nil, fmt.Errorf("trace %s: %w", t.Name, err)
			}
			scale = scales[0].Scale
		} else {
			if scale, err = o.ScaleFor(vals); err != nil {
				return nil, fmt.Errorf("trace %s: %w", t.Name, err)
			}
			d := make([]float64, len(vals))
			for j, v := range vals {
				d[j] = v * scale
			}
			if worlds[i], err = NewWorld(d, period, o); err != nil {
				return nil, fmt.Errorf("trace %s: %w", t.Name, err)
			}
		}
		rec := o.Recorded[t.Name]
		if rec.Replicas != nil {
			if len(rec.Replicas) < len(vals) {
				return nil, fmt.Errorf("trace %s: %d recorded replica counts for %d samples", t.Name, len(rec.Replicas), len(vals))
			}
			worlds[i].Recorded = rec.Replicas[:len(vals)]
			if rec.Ready != nil {
				if len(rec.Ready) < len(vals) {
					return nil, fmt.Errorf("trace %s: %d recorded ready counts for %d samples", t.Name, len(rec.Ready), len(vals))
				}
				worlds[i].RecordedReady = rec.Ready[:len(vals)]
			}
		}
		rep.Traces[i] = TraceResult{Trace: t.Name, Class: t.Class, Samples: len(vals), SamplePeriod: period, Scale: scale, Metrics: scales,
			Start: rec.Start, WarmupTime: time.Duration(o.Warmup) * period, Ticks: len(worlds[i].Inst), OracleFrontierRatio: math.NaN(),
			Unavoidable: worlds[i].Unavoidable(o), ActualReady: actualReady(rec)}
		rep.Traces[i].bound = worlds[i].NeedBound(o, boundReach(rep.Traces[i].Unavoidable, o))
		if rec.Asked > 0 {
			sr := NewScoredRange(rec.Asked, rec.RangeStart, rec.Start, len(vals), o.Warmup, period)
			rep.Traces[i].Range = &sr
		}
		rep.Coverage = append(rep.Coverage, rec.Coverage...)
	}
	delays := append([]time.Duration{o.StartupDelay}, o.StartupSweep...)
	delays = slices.DeleteFunc(slices.Clone(delays[1:]), func(d time.Duration) bool { return d == o.StartupDelay })
	delays = append([]time.Duration{o.StartupDelay}, delays...)
	var jobs []job
	for s := range delays {
		for i := range traces {
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
		}
	}
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
				po := o
				po.StartupDelay = delays[j.startup]
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
					results[k], errs[k] = simulateActual(ctx, worlds[j.trace], po)
				} else {
					results[k], errs[k] = Simulate(ctx, worlds[j.trace], j.policy, po)
				}
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
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for s := range delays[1:] {
		rep.Startup = append(rep.Startup, StartupResult{Delay: delays[s+1], Traces: make([]TraceResult, len(traces))})
		for i := range traces {
			tr := rep.Traces[i]
			tr.Runs, tr.Frontier = nil, nil
			so := o
			so.StartupDelay = delays[s+1]
			tr.bound = worlds[i].NeedBound(so, boundReach(tr.Unavoidable, so))
			rep.Startup[s].Traces[i] = tr
		}
	}
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
			return nil, fmt.Errorf("trace %s, policy %s: %w", tr.Trace, j.policy, errs[k])
		}
		if j.target > 0 {
			r := results[k]
			tr.Frontier = append(tr.Frontier, FrontierPoint{Target: j.target, Cost: r.Cost, OverloadFraction: r.OverloadFraction, ActionsPerDay: r.ActionsPerDay})
			continue
		}
		tr.Runs = append(tr.Runs, results[k])
	}
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
	return rep, nil
}

// HistoryWarnings lists, before a run, every policy whose model needs more samples than the
// warm-up gives on a trace (a daily Holt-Winters on one-minute samples needs two days): it
// forecasts nothing until then, and the report's forecast_coverage column says how much of the
// scored time it missed.
func HistoryWarnings(traces []trace.Trace, o Options) []string {
	var out []string
	for _, t := range traces {
		period := o.SamplePeriod
		if period == 0 {
			period = time.Duration(max(t.StepMinutes, 1)) * time.Minute
		}
		for _, p := range o.Policies {
			if _, ok, _ := ParseClairvoyant(p); ok {
				continue
			}
			spec, err := policy.Parse(p, o.DebiModel)
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
