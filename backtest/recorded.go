package backtest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/debi-scaler/debi/policy"
	"github.com/debi-scaler/debi/scaling"
)

// Recorded is what Prometheus recorded beside a trace's demand, for the what-if.
type Recorded struct {
	// Start is the time of the trace's first sample (the plots' x axis shows dates from it).
	Start time.Time
	// Replicas are the workload's spec replica counts at the trace's sample times (nil: no
	// actual row).
	Replicas []float64
	// Ready are the workload's recorded ready replica counts at the same times, which the
	// actual row scores as the pods that served (nil: modelled from the spec and the start-up
	// delay, as for the policies); ReadyQuery is the query they were read with ("" when none
	// was), for the report.
	Ready      []float64
	ReadyQuery string
	// Coverage says how much of the requested range each input series covered.
	Coverage []Coverage
	// RangeStart is the start of the requested range and Asked its length (--range): the trace
	// may start before it, with the warm-up history read from before the range (zero Asked: no
	// ScoredRange in the report).
	RangeStart time.Time
	Asked      time.Duration
	// Notes are said in the report's notes: how the replay was set up from what was recorded
	// (the measured lead time).
	Notes []string
}

// ScoredRange is how much of a what-if's requested range a replay scored, and where its
// warm-up came from: read from before the range (Before), or, when Prometheus had less history
// before it, taken out of the range (Inside), which is then not scored.
type ScoredRange struct {
	Asked, Scored, Warmup, Before, Inside time.Duration
}

// NewScoredRange is the ScoredRange of a trace of samples samples every period from traceStart
// with warmup of them unscored, for a requested range of asked from rangeStart.
func NewScoredRange(asked time.Duration, rangeStart, traceStart time.Time, samples, warmup int, period time.Duration) ScoredRange {
	w := time.Duration(warmup) * period
	end := traceStart.Add(time.Duration(samples-1) * period)
	before := min(w, max(0, rangeStart.Sub(traceStart)))
	return ScoredRange{Asked: asked, Scored: max(0, end.Sub(traceStart.Add(w))), Warmup: w, Before: before, Inside: w - before}
}

// String says it in words: "scored 7d of the 7d asked, after 2d15h of warm-up read from before
// the range", or "scored 4d9h of the 7d asked: 2d15h of warm-up came from inside the range
// (Prometheus had 3h of history before it)".
func (s ScoredRange) String() string {
	head := fmt.Sprintf("scored %s of the %s asked", humanDuration(s.Scored), humanDuration(s.Asked))
	switch {
	case s.Warmup <= 0:
		return head + ", without a warm-up"
	case s.Inside <= 0:
		return head + fmt.Sprintf(", after %s of warm-up read from before the range", humanDuration(s.Warmup))
	}
	had := "no history"
	if s.Before > 0 {
		had = humanDuration(s.Before) + " of history"
	}
	return head + fmt.Sprintf(": %s of warm-up came from inside the range (Prometheus had %s before it)", humanDuration(s.Inside), had)
}

// Coverage is how much of a what-if range one input series covered: the time with samples
// (FromFallback of it from the raw series that stand in for a recording rule without history),
// the time outside the replayed span (missing, not replayed) and the time inside it without
// samples (filled with the sample before).
type Coverage struct {
	Series       string        `json:"series"`
	Query        string        `json:"query"`
	Fallback     string        `json:"fallback,omitempty"`
	Range        time.Duration `json:"range"`
	Covered      time.Duration `json:"covered"`
	FromFallback time.Duration `json:"from_fallback"`
	Missing      time.Duration `json:"missing"`
	Filled       time.Duration `json:"filled"`
}

// actualReady is TraceResult.ActualReady for a recording.
func actualReady(rec Recorded) string {
	switch {
	case rec.Replicas == nil:
		return ""
	case rec.Ready != nil:
		return "recorded (" + rec.ReadyQuery + ")"
	case rec.ReadyQuery != "":
		return "modelled from the start-up delay: " + rec.ReadyQuery + " has no samples"
	}
	return "modelled from the start-up delay: the policy has no queries.ready_replicas"
}

// simulateActual replays the recorded replica counts of w: the spec follows the recording
// (each count holds until the next sample) without decision delay, and the run is scored like
// every policy's. The pods that served are the recorded ready counts where w has them (pods
// that crashed, failed their probes or waited for a node count as they did), else new pods
// serve after the start-up delay, as in the policies' rows.
func simulateActual(ctx context.Context, w *World, o Options) (Run, error) {
	if len(w.Recorded) == 0 {
		return Run{}, errors.New("no recorded replicas")
	}
	o.DecisionDelay = 0
	sample := func(i int, vals []float64) int32 {
		return ceilInt32(math.Round(vals[min(int(time.Duration(i)*w.Tick/w.Period), len(vals)-1)]))
	}
	var ready func(int) int32
	if len(w.RecordedReady) > 0 {
		ready = func(i int) int32 { return max(sample(i, w.RecordedReady), 0) }
	}
	return simulate(ctx, w, ActualPolicy, o, ceilInt32(w.Recorded[0]), func(_ context.Context, i int, _ policy.Observation) (policy.Result, error) {
		return policy.Result{W2: math.NaN(), Decision: scaling.Decision{Replicas: sample(i, w.Recorded), Reason: "recorded"}}, nil
	}, false, 0, ready)
}
