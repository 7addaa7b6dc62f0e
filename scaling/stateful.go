package scaling

import "time"

// Stateful is implemented by the algorithms whose decision depends on their own past: hpa (the
// stabilisation windows over past recommendations and the rate limits over its scale events)
// and budget (the hold since the last change of size). Their state reduces to two counts: for
// any input, the decision is the stateless rule's answer clamped into Bounds,
//
//	Recommend(in).Replicas == Clamp(Rule().Recommend(in).Replicas, Bounds(in.Time, in.Current))
//
// (for inputs with a usable load; tested on random sequences). That split is the live path's
// contract (docs/webhook.md, "One decision"): the exporter runs the algorithm with its state,
// once per step, and publishes Bounds; the webhook runs the stateless Rule on fresh inputs and
// clamps into the published bounds, so no webhook process holds decision state.
type Stateful interface {
	Algorithm
	// Bounds is the range [lo, hi] the state allows a decision at t for a workload at current
	// replicas, as computed before that decision. It does not change the state; lo <= hi.
	Bounds(t time.Time, current int32) (lo, hi int32)
	// Rule is the stateless rule: the algorithm without its history.
	Rule() Algorithm
}

// Unapplied is implemented by the stateful algorithms whose state records their own changes of
// size as if they were applied — the HPA's scale events, the budget's hold — as the Kubernetes
// controller does after its own patch. SetUnapplied(true) is for a policy whose
// recommendations nothing applies (a shadow-mode or paused policy, e.g. a shadow hpa baseline
// beside the acting policy): its state then follows the observed changes of size only. Without
// it, an unapplied recommendation is a scale event that never happened: the rate limits count
// it, the recommendation falls back to the current size (rate-limited) at the next step, and
// the budget's hold restarts at every step.
type Unapplied interface {
	SetUnapplied(bool)
}

// Clamp returns n within [lo, hi].
func Clamp(n, lo, hi int32) int32 { return clamp(n, lo, hi) }

// boundLoad is a load so high that every rule asks for more than any bound: the probe of the
// upper bound.
const boundLoad = 1e12

// Bounds implements Stateful: the decisions of two copies of the state for the lowest and the
// highest load. The normalisation is monotone in the recommendation, so every other load lands
// in between, at the rule's answer clamped.
//
// The copies are made in a scratch state h keeps, so that once its slices have grown a step
// does not allocate; Bounds is not safe for concurrent use (no more than Recommend is).
func (h *HPA) Bounds(t time.Time, current int32) (lo, hi int32) {
	in := Input{Time: t, Current: current, Ready: current, W: 0}
	lo = h.probe().Recommend(in).Replicas
	in.W = boundLoad
	hi = h.probe().Recommend(in).Replicas
	return lo, max(lo, hi)
}

// probe is a copy of h's state in h's scratch state, its slices reused.
func (h *HPA) probe() *HPA {
	if h.scratch == nil {
		h.scratch = new(HPA)
	}
	c := h.scratch
	rec, up, down := c.recommendations[:0], c.upEvents[:0], c.downEvents[:0]
	*c = *h
	c.scratch = nil
	c.recommendations = append(rec, h.recommendations...)
	c.upEvents = append(up, h.upEvents...)
	c.downEvents = append(down, h.downEvents...)
	return c
}

// Rule implements Stateful: the replica calculator within min and max, without stabilisation
// or rate limits.
func (h *HPA) Rule() Algorithm { return hpaRule{h: NewHPA(h.p)} }

// hpaRule is the HPA's replica calculator alone.
type hpaRule struct{ h *HPA }

func (r hpaRule) Name() string { return "hpa" }

func (r hpaRule) Reads() Inputs { return r.h.Reads() }

func (r hpaRule) Recommend(in Input) Decision {
	p := r.h.p
	d := Decision{Target: p.Target}
	switch {
	case in.Current == 0:
		d.Replicas, d.Reason = 0, ReasonScaledToZero
		return d
	case in.Current > p.MaxReplicas:
		d.Replicas, d.Reason = p.MaxReplicas, ReasonMaxReplicas
		return d
	case in.Current < p.MinReplicas:
		d.Replicas, d.Reason = p.MinReplicas, ReasonMinReplicas
		return d
	}
	desired, ok := r.h.replicaCalculator(in)
	if !ok {
		d.Replicas, d.Reason = in.Current, ReasonNoLoad
		return d
	}
	d.Replicas, d.Reason = desired, ReasonTolerance
	switch {
	case desired > p.MaxReplicas:
		d.Replicas, d.Reason = p.MaxReplicas, ReasonMaxReplicas
	case desired < p.MinReplicas:
		d.Replicas, d.Reason = p.MinReplicas, ReasonMinReplicas
	case desired > in.Current:
		d.Reason = ReasonScaleUp
	case desired < in.Current:
		d.Reason = ReasonScaleDown
	}
	return d
}

// Bounds implements Stateful: while the hold runs, nothing below the current size.
func (b *Budget) Bounds(t time.Time, current int32) (lo, hi int32) {
	in := Input{Time: t, Current: current, Ready: current, W: 0, WNow: 0, WDown: 0}
	c := *b
	lo = c.Recommend(in).Replicas
	c = *b
	in.W, in.WNow, in.WDown = boundLoad, boundLoad, boundLoad
	hi = c.Recommend(in).Replicas
	return lo, max(lo, hi)
}

// Rule implements Stateful: the budget rule without the hold.
func (b *Budget) Rule() Algorithm {
	p := b.p
	p.Budget.Hold = 0
	return budgetRule{p: p}
}

// budgetRule is Budget with no hold: a fresh instance per decision, so it keeps nothing.
type budgetRule struct{ p Params }

func (budgetRule) Name() string { return "budget" }

func (r budgetRule) Reads() Inputs { return (&Budget{p: r.p}).Reads() }

func (r budgetRule) Recommend(in Input) Decision {
	b := &Budget{p: r.p}
	return b.Recommend(in)
}

// StatelessBounds are the bounds of an algorithm without state: its minimum and maximum.
func StatelessBounds(p Params) (lo, hi int32) {
	return p.MinReplicas, max(p.MinReplicas, p.MaxReplicas)
}
