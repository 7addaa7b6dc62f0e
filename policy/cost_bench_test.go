package policy_test

// The cost of a model per policy (issue 14): CPU seconds per training run and per day, how many
// policies of that model one core keeps trained, and the heap one policy holds. Every figure is
// at the exporter's defaults: the policy.Config is the one config.Load and Policy.RunnerConfig
// build for a policy that names only the model (history 760 steps of 5 min, retrain every 120
// steps, season 1 d). Run:
//
//	go test ./policy -run '^$' -bench 'BenchmarkTrainingCost|BenchmarkPolicyMemory' -benchtime 1x -cpu 1
//
// -cpu sets GOMAXPROCS: the neural models parallelise (gonum's gemm, the two directions of a
// BiLSTM), so their CPU per run grows with it while their wall-time budget stays the same.

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/forecast"
	"github.com/debi-scaler/debi/policy"
	"github.com/debi-scaler/debi/trace"
)

// costTrace is the embedded trace the cost figures train on: 30 days of the Azure 2019 VM
// fleet's total CPU at 5-minute steps (the history step of the defaults), a daily-periodic
// series with real noise.
const costTrace = "azure_vm2019_total_cpu_5min"

// costModels are the models measured: every registered one, so that a new model cannot be left
// out of the figures.
func costModels() []string { return forecast.Names() }

// costSeries returns n points of the cost trace scaled to cores (the p99 of the first 760 maps
// to 10 cores: the models standardise, but a Holt-Winters fit's stopping test sees the scale).
func costSeries(tb testing.TB, n int) []float64 {
	tb.Helper()
	ts, err := trace.Embedded()
	if err != nil {
		tb.Fatal(err)
	}
	for _, t := range ts {
		if t.Name != costTrace {
			continue
		}
		if t.StepMinutes != 5 {
			tb.Fatalf("%s: step %d min, want 5", t.Name, t.StepMinutes)
		}
		if len(t.Values) < n {
			tb.Fatalf("%s: %d points, need %d", t.Name, len(t.Values), n)
		}
		head := slices.Clone(t.Values[:min(760, n)])
		sort.Float64s(head)
		scale := 10 / head[int(0.99*float64(len(head)-1))]
		out := make([]float64, n)
		for i, v := range t.Values[:n] {
			out[i] = v * scale
		}
		return out
	}
	tb.Fatalf("embedded trace %s not found", costTrace)
	return nil
}

// exporterConfig is the runner configuration the exporter builds for a policy that names only
// its algorithm ("<model>-debi", "<model>-budget"): config.Load's defaults, RunnerConfig, and
// asynchronous training as the exporter runs it.
func exporterConfig(tb testing.TB, algorithm string) policy.Config {
	tb.Helper()
	yml := fmt.Sprintf("global: {prometheus_url: 'http://prometheus:9090'}\npolicies:\n  - {name: p, target: {namespace: ns, name: w}, algorithm: %s}\n", algorithm)
	cfg, err := config.Load([]byte(yml))
	if err != nil {
		tb.Fatalf("%s: %v", algorithm, err)
	}
	rc, err := cfg.Policies[0].RunnerConfig()
	if err != nil {
		tb.Fatalf("%s: %v", algorithm, err)
	}
	rc.AsyncTraining = true
	return rc
}

// processCPU is the CPU time (user + system) of the whole process. Training is measured on the
// process, not the thread: the neural models spread a run over goroutines.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type fitCost struct {
	cpu, wall time.Duration
	rep       forecast.FitReport
}

// measureFits runs fit reps times and returns the mean CPU and wall time per run and the last
// report.
func measureFits(tb testing.TB, reps int, fit func() (forecast.FitReport, error)) fitCost {
	tb.Helper()
	runtime.GC()
	c0, w0 := processCPU(), time.Now()
	var rep forecast.FitReport
	for range reps {
		var err error
		if rep, err = fit(); err != nil {
			tb.Fatal(err)
		}
	}
	return fitCost{cpu: (processCPU() - c0) / time.Duration(reps), wall: time.Since(w0) / time.Duration(reps), rep: rep}
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// TestTrainingCostDefaults pins the premise of the cost figures: every registered model builds
// a runner from the exporter's defaults, and those are the defaults the figures are quoted at
// (760 history steps of 5 min, a retrain every 120, a season of one day = 288 steps).
func TestTrainingCostDefaults(t *testing.T) {
	models := costModels()
	if len(models) == 0 {
		t.Fatal("no model registered")
	}
	for _, model := range models {
		for _, alg := range []string{"debi", "budget"} {
			rc := exporterConfig(t, model+"-"+alg)
			if rc.History != 760 || rc.Retrain != 120 || rc.Step != 5*time.Minute || rc.Season != 24*time.Hour {
				t.Errorf("%s-%s: history %d × %v, retrain %d, season %v; the cost figures are quoted at 760 × 5m, 120, 24h",
					model, alg, rc.History, rc.Step, rc.Retrain, rc.Season)
			}
			r, err := policy.New(rc)
			if err != nil {
				t.Fatalf("%s-%s: %v", model, alg, err)
			}
			if got := r.Config().Model.Season; got != 288 {
				t.Errorf("%s-%s: season %d steps, want 288", model, alg, got)
			}
			if need, _ := r.ModelHistory(); need > rc.History {
				t.Errorf("%s-%s: the model needs %d history steps, more than the %d of the defaults", model, alg, need, rc.History)
			}
			r.Close()
		}
	}
}

// BenchmarkTrainingCost measures, per model, the CPU time of one training run as the runner does
// it (Fit of a Clone of the current model on the runner's history, 760 points):
//
//   - cold-cpu-s/train: a first run, from a new model, on the full history (the exporter's
//     start-up run starts as soon as MinHistory points of the loaded history are in, so it
//     trains on that many);
//   - cpu-s/train: a retrain, the steady state: a clone of the model trained on the previous
//     window fits the window Retrain steps later (median over several retrains; one only if a
//     run costs more than a minute);
//
// and from the retrain figure the day's cost at the default retrain interval (a day of history
// steps / Retrain runs) and the policies one core, or 10 % of one (training shares the core
// with the decision loop), keeps trained. A run that stops on its wall-time budget (the neural
// models: 20 s cold, 5 s warm) costs at most the budget times GOMAXPROCS, and on a busy machine
// less, with fewer iterations: cpu-s/iter is the figure that does not depend on the load.
func BenchmarkTrainingCost(b *testing.B) {
	const retrains = 5
	for _, model := range costModels() {
		b.Run("model="+model, func(b *testing.B) {
			rc := exporterConfig(b, model+"-debi")
			r, err := policy.New(rc)
			if err != nil {
				b.Fatal(err)
			}
			mc := r.Config().Model // with the season in steps, as the runner builds its model
			r.Close()
			proto, err := forecast.New(rc.Spec.Model, mc)
			if err != nil {
				b.Fatal(err)
			}
			n := max(rc.History, proto.MinHistory()+rc.LeadSteps)
			series := costSeries(b, n+retrains*rc.Retrain)
			ctx := context.Background()
			window := func(k int) []float64 { return slices.Clone(series[k*rc.Retrain : k*rc.Retrain+n]) }

			// Cheap models: repeat each run until a sample costs ≥ 200 ms of CPU.
			h0 := window(0)
			probe := measureFits(b, 1, func() (forecast.FitReport, error) { return proto.Clone().Fit(ctx, h0) })
			reps := 1
			if probe.cpu < 200*time.Millisecond {
				reps = int(min(1_000_000, 200*time.Millisecond/max(probe.cpu, 100*time.Nanosecond)+1))
			}
			var cold fitCost
			var trained forecast.Forecaster
			if reps == 1 {
				cold = probe
			} else {
				cold = measureFits(b, reps, func() (forecast.FitReport, error) { return proto.Clone().Fit(ctx, h0) })
			}
			trained = proto.Clone()
			if _, err := trained.Fit(ctx, h0); err != nil {
				b.Fatal(err)
			}

			runs := retrains
			if cold.cpu > 60*time.Second {
				runs = 1
			}
			var cpus, walls []time.Duration
			var iters []int
			reasons := map[string]int{}
			for k := 1; k <= runs; k++ {
				h := window(k)
				var next forecast.Forecaster
				c := measureFits(b, reps, func() (forecast.FitReport, error) {
					next = trained.Clone()
					return next.Fit(ctx, h)
				})
				trained = next
				cpus, walls = append(cpus, c.cpu), append(walls, c.wall)
				iters = append(iters, c.rep.Iterations)
				reasons[c.rep.StopReason]++
				if c.cpu > 60*time.Second {
					break
				}
			}
			sort.Ints(iters)
			cpu := median(cpus).Seconds()
			perDay := float64(24*time.Hour/rc.Step) / float64(rc.Retrain) // 288 / 120
			daily := perDay * cpu
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(cold.cpu.Seconds(), "cold-cpu-s/train")
			b.ReportMetric(cpu, "cpu-s/train")
			b.ReportMetric(median(walls).Seconds(), "wall-s/train")
			b.ReportMetric(float64(iters[len(iters)/2]), "iters/train")
			if it := iters[len(iters)/2]; it > 0 {
				b.ReportMetric(cpu/float64(it), "cpu-s/iter")
			}
			b.ReportMetric(perDay, "trains/day")
			b.ReportMetric(daily, "cpu-s/policy/day")
			b.ReportMetric(86400/daily, "policies/core")
			b.ReportMetric(0.1*86400/daily, "policies/0.1core")
			b.Logf("%s: history %d, retrain every %d × %v, season %d steps; cold run %.4gs CPU / %.4gs wall (%d iterations, %s); %d retrains (×%d reps each) CPU %v, stop reasons %v, GOMAXPROCS %d",
				model, n, rc.Retrain, rc.Step, mc.Season, cold.cpu.Seconds(), cold.wall.Seconds(), cold.rep.Iterations, cold.rep.StopReason,
				len(cpus), reps, cpus, reasons, runtime.GOMAXPROCS(0))
		})
	}
}

// BenchmarkPolicyMemory measures the heap one policy's Runner holds, at two moments:
//
//   - bytes/policy@startup: after the start-up history (760 points, one observation per history
//     step, as the exporter feeds it) and the training run it starts. Training is asynchronous,
//     as in the exporter, so that run starts as soon as the model's MinHistory points are in
//     (41 for the neural models, 576 for holtwinters) and trains on that much history;
//   - bytes/policy (steady state): after Retrain more history steps, in which each runner
//     retrains on the full 760-point history, and that run has finished. A model keeps the buffers of its last training run, so
//     this is what a running policy holds.
//
// 50 runners are built, fed and kept alive, and the growth of the live heap (HeapAlloc after a
// GC) is divided by 50; heap-inuse counts whole spans. Their training runs go on in the
// background together, as in the exporter, so a neural model costs its wall-time budget once,
// not 50 times.
func BenchmarkPolicyMemory(b *testing.B) {
	const runners = 50
	for _, alg := range []string{"debi", "budget"} {
		for _, model := range costModels() {
			b.Run(fmt.Sprintf("algorithm=%s/model=%s", alg, model), func(b *testing.B) {
				rc := exporterConfig(b, model+"-"+alg)
				series := costSeries(b, rc.History+rc.Retrain+2)
				ctx := context.Background()
				t0 := time.Unix(1_700_000_000, 0).Truncate(rc.Step)
				at := func(j int) policy.Observation {
					return policy.Observation{Time: t0.Add(time.Duration(j) * rc.Step), Demand: series[j], Current: 4, Ready: 4}
				}
				rs := make([]*policy.Runner, runners)
				defer func() {
					for _, r := range rs {
						if r != nil {
							r.Close()
						}
					}
				}()
				var before, ms runtime.MemStats
				heap := func() (alloc, inuse float64) {
					for _, r := range rs {
						r.Wait()
					}
					runtime.GC()
					runtime.GC()
					runtime.ReadMemStats(&ms)
					return float64(int64(ms.HeapAlloc)-int64(before.HeapAlloc)) / runners,
						float64(int64(ms.HeapInuse)-int64(before.HeapInuse)) / runners
				}
				step := func(j int) []policy.Result {
					out := make([]policy.Result, 0, runners)
					for i, r := range rs {
						res, err := r.Step(ctx, at(j))
						if err != nil {
							b.Fatalf("runner %d, step %d: %v", i, j, err)
						}
						out = append(out, res)
					}
					return out
				}
				runtime.GC()
				runtime.ReadMemStats(&before)
				for i := range rs {
					r, err := policy.New(rc)
					if err != nil {
						b.Fatal(err)
					}
					rs[i] = r
					for j := range rc.History {
						if _, err := r.Step(ctx, at(j)); err != nil {
							b.Fatal(err)
						}
					}
				}
				startAlloc, startInuse := heap()
				// Retrain more history steps: each runner starts a training run on the full history
				// in them (the neural models' at the first, since the start-up run began Retrain
				// steps ago); after it has finished, the next step collects it.
				seen := make([]bool, runners)
				var last []policy.Result
				for j := rc.History; j <= rc.History+rc.Retrain+1; j++ {
					if j == rc.History+rc.Retrain+1 {
						for _, r := range rs {
							r.Wait()
						}
					}
					last = step(j)
					for i, res := range last {
						if res.TrainError != nil {
							b.Fatalf("runner %d: training failed: %v", i, res.TrainError)
						}
						seen[i] = seen[i] || res.Training != nil
					}
				}
				for i, res := range last {
					if !seen[i] {
						b.Fatalf("runner %d: no training run finished after the start-up history", i)
					}
					if math.IsNaN(res.DemandForecast) {
						b.Fatalf("runner %d: no forecast after training: %v", i, res.ForecastError)
					}
				}
				alloc, inuse := heap()
				runtime.KeepAlive(rs)
				b.ReportMetric(0, "ns/op")
				b.ReportMetric(startAlloc, "bytes/policy@startup")
				b.ReportMetric(startInuse, "heap-inuse-bytes/policy@startup")
				b.ReportMetric(alloc, "bytes/policy")
				b.ReportMetric(inuse, "heap-inuse-bytes/policy")
			})
		}
	}
}
