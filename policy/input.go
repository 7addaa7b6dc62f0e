package policy

import (
	"fmt"
	"math"
	"time"

	"github.com/debi-scaler/debi/scaling"
)

// The published series of a step, read back: the exporter publishes each step's loads, the size
// it stepped at and the range its algorithm's state allowed (debi_load_ratio,
// debi_current_replicas, debi_decision_floor_replicas, …), and the webhook reads them from
// Prometheus at decision time (webhook.queries) and decides on them at the target's current
// size, with the one composition (scaling.Decide). FromPublished is that translation, next to
// the runner whose step it reads back: the runner's tests and the webhook's decide through it.

// Published is one step as the exporter publishes it and the webhook reads it back. A value not
// read is NaN (no series, or a query the policy does not have), but Floor and Ceiling, which are
// 0 when not read.
type Published struct {
	// Replicas is the size the step saw the loads at (webhook.queries.load_replicas); NaN: the
	// current size.
	Replicas float64
	// W, WindowW, WNow and WDown are the loads, utilizations at Replicas (queries.load,
	// window_load, now_load, down_load): the rule's scaling.Input fields of the same names.
	W, WindowW, WNow, WDown float64
	// Metrics are the loads of each metric of a policy with several metrics (the single-metric
	// loads above are then NaN), in the policy's order.
	Metrics []MetricLoads
	// Floor and Ceiling are the range the state of a stateful algorithm allowed the step
	// (queries.floor, queries.ceiling).
	Floor, Ceiling float64
	// Idle is, for a policy that scales to zero, the step's scaling.Input.Idle (queries.idle).
	Idle float64
}

// MetricLoads are one metric's published loads (Published's fields of the same names). A load
// the policy reads but that is missing is 0, with Complete false; one it does not read is NaN.
type MetricLoads struct {
	W, WindowW, WNow, WDown float64
	Complete                bool
}

// PublishedInput is the decision's input from a step read back (FromPublished).
type PublishedInput struct {
	// Input is the single input: the loads converted to the current size.
	Input scaling.Input
	// Metrics and Complete are the inputs of a policy with several metrics, one per metric
	// (Input with the metric's loads), and whether each metric's loads were all there: the
	// arguments of scaling.DecideMax.
	Metrics  []scaling.Input
	Complete []bool
	// Basis is the size the loads were published at (Published.Replicas, else the current size).
	Basis float64
}

// FromPublished is the input of a decision at the target's current size from a step read
// back: base carries what the target says at decision time (scaling.Input's Time, Current and
// Ready), and the published loads, utilizations at the size the step saw, are converted to the
// current size, so that a figure from before the last resize is not applied twice. hold says why
// no decision can be taken (the published size is not a replica count).
func FromPublished(p Published, base scaling.Input) (in PublishedInput, hold string) {
	in.Basis = float64(max(base.Current, 1))
	if b := p.Replicas; !math.IsNaN(b) {
		if b < 0 || b != math.Trunc(b) {
			return in, fmt.Sprintf("load_replicas is %v, not a replica count", b)
		}
		in.Basis = max(b, 1) // the loads of a workload at zero are at one pod
	}
	conv := in.Basis / float64(max(base.Current, 1))
	in.Input = base
	in.Input.Idle = p.Idle
	in.Input.W, in.Input.WindowW, in.Input.WNow, in.Input.WDown = p.W*conv, p.WindowW*conv, p.WNow*conv, p.WDown*conv
	for _, m := range p.Metrics {
		mi := in.Input
		mi.W, mi.WindowW, mi.WNow, mi.WDown = m.W*conv, m.WindowW*conv, m.WNow*conv, m.WDown*conv
		in.Metrics, in.Complete = append(in.Metrics, mi), append(in.Complete, m.Complete)
	}
	return in, ""
}

// PublishedBounds are the bounds of a decision on a step read back, at the size the step saw
// (basis, PublishedInput.Basis): those of params for a stateless algorithm; for a stateful one
// the range its state published, with a note saying so, or why the size is held when that is
// not a range of replica counts.
func PublishedBounds(p Published, params scaling.Params, stateful bool, basis float64) (b scaling.Bounds, note, hold string) {
	lo, hi := scaling.StatelessBounds(params)
	b = params.WithZero(scaling.Bounds{Lo: lo, Hi: hi, At: int32(basis)})
	if !stateful {
		return b, "", ""
	}
	fl, ce := p.Floor, p.Ceiling
	if fl != math.Trunc(fl) || ce != math.Trunc(ce) || fl < 0 || ce > math.MaxInt32 {
		return b, "", fmt.Sprintf("published bounds [%v, %v] are not a range of replica counts", fl, ce)
	}
	b = params.WithZero(scaling.Bounds{Lo: int32(fl), Hi: int32(ce), At: int32(basis)})
	if err := b.Validate(); err != nil {
		return b, "", "published " + err.Error()
	}
	return b, fmt.Sprintf("state allows [%d, %d] at %d replicas", b.Lo, b.Hi, b.At), ""
}

// PublishedOf is what the exporter publishes of a single-metric step res taken at current
// replicas of request cores each: the loads (w, window, w1 as now_load, the budget's quantile
// over the lead time plus the hold as down_load), the size and the state's range.
func PublishedOf(res Result, current int32, request float64) Published {
	p := Published{Replicas: float64(current), W: res.W, WindowW: res.WindowW, WNow: res.W1, WDown: math.NaN(),
		Floor: float64(res.Floor), Ceiling: float64(res.Ceiling), Idle: res.Idle}
	if res.Budget != nil {
		p.WDown = res.Budget.QuantileDown / (float64(max(current, 1)) * request)
	}
	return p
}

// idleClock tells how long a policy's wake metrics have been idle (scaling.Input.Idle): 0 while
// one is active, else the seconds since one last was, counted from the first step when none
// has been — so that a restarted exporter waits scale_to_zero_after again before going to zero —
// and never 0 when idle (at least the smallest positive number), since 0 means active.
type idleClock struct {
	since, last time.Time
}

// idle records a step at t and returns Idle; known false (a wake metric's sample is missing and
// none is active) gives NaN, which never goes to zero nor wakes.
func (c *idleClock) idle(t time.Time, active, known bool) float64 {
	if c.since.IsZero() {
		c.since = t
	}
	switch {
	case active:
		c.last = t
		return 0
	case !known:
		return math.NaN()
	}
	from := c.since
	if c.last.After(from) {
		from = c.last
	}
	return math.Max(t.Sub(from).Seconds(), math.SmallestNonzeroFloat64)
}
