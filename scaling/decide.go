package scaling

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Inputs is a set of the Input fields a rule reads beyond Time and Current. Each algorithm
// declares its own (Algorithm.Reads), so that whoever feeds a decision — the exporter's runner
// or the webhook at notification time — reads exactly those and knows no algorithm's needs: an
// algorithm that reads a field gets it, and one that does not is never held for its absence.
type Inputs uint8

// The inputs a rule may read.
const (
	// InputLoad is W, the load the rule sizes for.
	InputLoad Inputs = 1 << iota
	// InputReady is Ready, the ready replica count.
	InputReady
	// InputWindow is WindowW, the mean observed load over debi's window.
	InputWindow
	// InputNow is WNow, the load observed now (budget's floor).
	InputNow
	// InputDown is WDown, the load a scale-down must still fit (budget's gate).
	InputDown
)

// inputNames are the names of the inputs in the configuration (webhook.queries) and in errors.
var inputNames = []struct {
	in   Inputs
	name string
}{{InputLoad, "load"}, {InputReady, "ready"}, {InputWindow, "window_load"}, {InputNow, "now_load"}, {InputDown, "down_load"}}

// Has reports whether every input of i is in s.
func (s Inputs) Has(i Inputs) bool { return s&i == i }

// String lists the inputs by name, "+"-separated.
func (s Inputs) String() string {
	var names []string
	for _, n := range inputNames {
		if s.Has(n.in) {
			names = append(names, n.name)
		}
	}
	return strings.Join(names, "+")
}

// Value returns the input's field of in.
func (in Input) Value(i Inputs) float64 {
	switch i {
	case InputLoad:
		return in.W
	case InputReady:
		return float64(in.Ready)
	case InputWindow:
		return in.WindowW
	case InputNow:
		return in.WNow
	case InputDown:
		return in.WDown
	}
	return math.NaN()
}

// Bounds is the range of replica counts an algorithm's state allows its next decision, computed
// at one size, At: the size the decision's inputs were observed at (a stateless algorithm's
// bounds are its minimum and maximum).
type Bounds struct {
	Lo, Hi int32
	// At is the size the bounds, and the loads, were computed at.
	At int32
	// ToZero says the policy scales to zero (min_replicas 0): Decide goes to zero once the
	// input's Idle reaches ZeroAfter and wakes from zero while Idle is 0.
	ToZero    bool
	ZeroAfter time.Duration
}

// WithZero is b with p's scale to zero (Bounds.ToZero, ZeroAfter): from zero, a policy that
// scales to zero may always wake to one pod, whatever its state allows (Hi at least 1).
func (p Params) WithZero(b Bounds) Bounds {
	if p.MinReplicas != 0 {
		return b
	}
	b.ToZero, b.ZeroAfter = true, p.ScaleToZeroAfter
	if b.At == 0 {
		b.Hi = max(b.Hi, 1)
	}
	return b
}

// Validate says why the bounds cannot be trusted: not a range, or not of replica counts.
func (b Bounds) Validate() error {
	switch {
	case b.Lo < 0 || b.Hi < 0:
		return fmt.Errorf("bounds [%d, %d] are not replica counts", b.Lo, b.Hi)
	case b.Lo > b.Hi:
		return fmt.Errorf("bounds [%d, %d] are not a range", b.Lo, b.Hi)
	case b.At < 0:
		return fmt.Errorf("bounds computed at %d replicas, not a replica count", b.At)
	}
	return nil
}

// BoundsOf is the range alg's state allows a decision at t for a workload at current replicas,
// computed before that decision (it does not change the state): Stateful.Bounds at current, or
// p's minimum and maximum for a stateless algorithm.
func BoundsOf(alg Algorithm, p Params, t time.Time, current int32) Bounds {
	if st, ok := alg.(Stateful); ok {
		lo, hi := st.Bounds(t, current)
		return p.WithZero(Bounds{Lo: lo, Hi: hi, At: current})
	}
	lo, hi := StatelessBounds(p)
	return p.WithZero(Bounds{Lo: lo, Hi: hi, At: current})
}

// RuleOf is the stateless rule of alg: Stateful.Rule, or the algorithm itself.
func RuleOf(alg Algorithm) Algorithm {
	if st, ok := alg.(Stateful); ok {
		return st.Rule()
	}
	return alg
}

// ReasonSizeChanged: the target is at a size the algorithm's state has not seen (someone else
// resized it since the bounds were computed): the size is held, or raised within the old
// ceiling when the load asks for more; never lowered until the state has seen the new size.
const ReasonSizeChanged = "size-changed"

// Decide is the one composition of a decision, used by the exporter's runner at every step and
// by the webhook at every notification: the stateless rule's answer on in, clamped into the
// bounds of the algorithm's state.
//
//   - At the size the bounds were computed at, the answer is the rule's clamped into [Lo, Hi]:
//     raised to Lo is "stabilized" (a stabilisation window or hold keeps the size up), lowered
//     to Hi is "rate-limited".
//   - At any other size (someone resized the target since) the bounds are for another size: the
//     decision never goes below the current size, and above it at most to max(Hi, current) — so
//     it holds while the load asks for less, and never scales down while the load asks for more
//     (ReasonSizeChanged when that changed the rule's answer). For a stateless algorithm Hi is
//     its maximum: a scale-up is free, a scale-down waits for a step at the new size.
//
// The stateful algorithms' own Recommend equals Decide(RuleOf(alg), in, BoundsOf(alg, …, in.Time,
// in.Current)) (TestStatefulSplit): the exporter advances the state with Recommend and takes the
// decision from Decide, the webhook takes it from Decide on fresh inputs and published bounds.
//
// A policy that scales to zero (b.ToZero, min_replicas 0) has one more step, KEDA's: once its
// wake metrics have been idle (in.Idle, seconds) for b.ZeroAfter the decision is zero, whatever
// the rule says (ReasonIdle), at the size the bounds were computed at (after an outside resize,
// not until a step has seen the new size); at zero it stays there while they are idle, or Idle
// is not known, and wakes as soon as one is active (Idle 0: observed, or forecast over the lead
// time), to the rule's answer at one pod within [1, max(1, Hi)] (ReasonWoken). The loads of a workload at
// zero are those at one pod (the runner's capacity is max(current, 1)·request). An algorithm
// whose state allows nothing above zero from zero (hpa, as the HPA does not act on a workload
// at zero) wakes to one pod, as KEDA does, and sizes from there.
func Decide(rule Algorithm, in Input, b Bounds) Decision {
	if b.ToZero {
		return decideZero(rule, in, b)
	}
	return decide(rule, in, b)
}

// decideZero is Decide for a policy that scales to zero.
func decideZero(rule Algorithm, in Input, b Bounds) Decision {
	idle := in.Idle > 0 && in.Idle >= b.ZeroAfter.Seconds()
	if in.Current > 0 {
		d := decide(rule, in, b)
		if idle && b.At == in.Current { // after an outside resize, not before the size is seen
			d.Replicas, d.Reason = 0, ReasonIdle
		}
		return d
	}
	if in.Idle != 0 { // idle for any time, or not known: nothing asks for a pod
		return Decision{Replicas: 0, Reason: ReasonIdle}
	}
	in.Current = 1
	d := rule.Recommend(in)
	d.Replicas, d.Reason = clamp(d.Replicas, 1, max(1, b.Hi)), ReasonWoken
	return d
}

func decide(rule Algorithm, in Input, b Bounds) Decision {
	d := rule.Recommend(in)
	lo, hi := b.Lo, b.Hi
	seen := b.At == in.Current
	if !seen {
		lo, hi = in.Current, max(in.Current, b.Hi)
	}
	n := clamp(d.Replicas, lo, hi)
	switch {
	case n == d.Replicas:
	case !seen:
		d.Reason = ReasonSizeChanged
	case n > d.Replicas:
		d.Reason = ReasonStabilized
	default:
		d.Reason = ReasonRateLimited
	}
	d.Replicas = n
	return d
}

// NoScaleDown is the rule for a decision on incomplete data (a missing demand sample, a failed
// query, an annotation fallback): it may scale up, never down. Every such path goes through it.
func NoScaleDown(n, current int32) int32 { return max(n, current) }

// Overloaded is the one overload predicate (METHOD §7, §9): demand above u_sla·ready·request.
// The budget's calibration, the exporter's burn, the backtest's score and the plots all count
// overload with it.
func Overloaded(demand, sla float64, ready int32, request float64) bool {
	return demand > sla*float64(ready)*request
}

// OverloadedAny is Overloaded over several metrics of one workload: overloaded when any metric's
// demand is above u_sla·ready·its capacity per pod. demands[i] and capacities[i] are metric i's;
// a metric with no usable demand (NaN, ±Inf, negative) counts as not overloaded, as a missing
// sample is no overload for one metric either.
func OverloadedAny(sla float64, ready int32, demands, capacities []float64) bool {
	for i, d := range demands {
		if i >= len(capacities) || math.IsNaN(d) || math.IsInf(d, 0) || d < 0 {
			continue
		}
		if Overloaded(d, sla, ready, capacities[i]) {
			return true
		}
	}
	return false
}

// DecideMax is the decision over several metrics, as the Kubernetes HPA combines its metrics:
// each metric's count is Decide(rule, ins[i], b), the one composition, and the decision is the
// largest. ok[i] false marks a metric whose input is missing (its query failed, its sample is
// absent): as the HPA does, a missing metric never lets the others scale down — with any metric
// missing the decision is at least the current size — and with every metric missing it is the
// current size, b.At (ReasonNoLoad). It returns the decision and the index of the deciding metric
// (-1 when none decided). Metrics clamped to the same count are told apart by the rule's own
// count before the clamp, then by their order.
func DecideMax(rule Algorithm, ins []Input, ok []bool, b Bounds) (Decision, int) {
	best, at, missing := Decision{}, -1, false
	bestRaw := int32(-1) // the rule's own count for best, computed on a tie only
	for i, in := range ins {
		if !ok[i] {
			missing = true
			continue
		}
		d := Decide(rule, in, b)
		switch {
		case at < 0 || d.Replicas > best.Replicas:
			best, at, bestRaw = d, i, -1
		case d.Replicas == best.Replicas:
			// Clamped to the same count (a stabilisation floor, a rate limit): the metric whose
			// own proposal is the larger decided, as the HPA takes the largest proposal first.
			if bestRaw < 0 {
				bestRaw = rule.Recommend(ins[at]).Replicas
			}
			if raw := rule.Recommend(in).Replicas; raw > bestRaw {
				best, at, bestRaw = d, i, raw
			}
		}
	}
	if at < 0 {
		return Decision{Replicas: b.At, Reason: ReasonNoLoad}, -1
	}
	if missing && best.Replicas < ins[at].Current {
		best.Replicas, best.Reason = NoScaleDown(best.Replicas, ins[at].Current), ReasonMetricMissing
	}
	return best, at
}

// ReasonMetricMissing: a policy with several metrics held its size because a metric's input is
// missing while the others ask for less (never a scale-down on missing data, as the HPA).
const ReasonMetricMissing = "metric-missing"

// ReferenceUtilization is the utilization a policy's per-metric target (autoscaling/v2's
// averageValue, value or averageUtilization) is meant at: the fixed target of hpa and apa, the
// upper bound of debi's dynamic target, budget's u_sla. A metric whose pods should each carry
// averageValue at that utilization has the capacity averageValue / ReferenceUtilization per pod,
// so that the rule, applying its target to every metric alike, holds each at its own target.
func ReferenceUtilization(algorithm string, p Params) float64 {
	switch algorithm {
	case "debi":
		return p.Upper
	case "budget":
		return p.Budget.SLAUtilization
	}
	return p.Target
}
