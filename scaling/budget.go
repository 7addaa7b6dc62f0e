package scaling

import (
	"math"
	"strings"
	"time"
)

func init() { Register("budget", func(p Params) Algorithm { return &Budget{p: p} }) }

// BudgetParams are the decision side of the overload-budget policy (METHOD §9); the quantile
// and its calibration are the model side (forecast.Calibrator).
type BudgetParams struct {
	// SLAUtilization is u_sla: a pod is sized to run at most at this utilization (0.9).
	SLAUtilization float64 `yaml:"u_sla" json:"u_sla"`
	// Hold is the least time between the last change of size and a scale-down (10m): the
	// hysteresis that keeps scaling actions at or below the HPA's. Under the priced rule it is
	// the longest hold the price may choose: the rule holds its size for 0, 1, 2 or 4 lead
	// times, each alone or also through the ticks after a history point before the nowcast has
	// read it, whichever would have cost least in pods + λ·(overloaded ticks), none longer than
	// this (0: never held).
	Hold time.Duration `yaml:"hold" json:"hold"`
	// MinSaving is the least share of the current size a scale-down must save, on top of at
	// least one pod (0: one pod is enough).
	MinSaving float64 `yaml:"min_saving" json:"min_saving"`
	// Rule is how the size is chosen from the demand to come: RulePriced (a price on
	// overload, the default; METHOD §9) or RuleQuantile (every tick covered at one calibrated
	// level, never below the load observed now).
	Rule BudgetRule `yaml:"rule" json:"rule"`
	// Idle is what a tick the priced rule serves at min_replicas whatever overload costs does
	// to the price: IdleEarn (the default) lowers it as any tick served does, IdleHold leaves it
	// where the last load set it.
	Idle BudgetIdle `yaml:"idle" json:"idle"`
}

// BudgetIdle is BudgetParams.Idle.
type BudgetIdle string

// The values of BudgetParams.Idle.
const (
	// IdleEarn: the budget is a share of all the time. A tick served at min_replicas lowers the
	// price as any tick served does, so what a quiet spell earns is spent on the load after it.
	IdleEarn BudgetIdle = "earn"
	// IdleHold: a tick the priced rule serves at min_replicas whatever overload costs (its plan
	// needs no more at any tick ahead, even with the margin at the price's ceiling) leaves the
	// price alone; an overloaded one still raises it.
	// A quiet spell earns nothing, so a workload that idles spends less than its budget over all
	// the time, and the load after a quiet night or weekend meets the price the last load set.
	IdleHold BudgetIdle = "hold"
)

// BudgetRule is BudgetParams.Rule.
type BudgetRule string

// The rules of BudgetParams.Rule.
const (
	// RuleQuantile sizes for the calibrated upper quantile of the demand over the lead time and
	// never below the load observed now.
	RuleQuantile BudgetRule = "quantile"
	// RulePriced orders the size that minimises pods + λ·(overloaded ticks) over the lead ahead,
	// with λ priced online so that the overload tracks the budget: the runner publishes that
	// size as W and WDown, and the load observed now is priced with the rest (no floor).
	RulePriced BudgetRule = "priced"
)

// DefaultBudgetParams are the defaults of METHOD §9.
func DefaultBudgetParams() BudgetParams {
	return BudgetParams{SLAUtilization: 0.9, Hold: 10 * time.Minute, Rule: RulePriced, Idle: IdleEarn}
}

// Validate reports every invalid setting, each error naming the field (budget.u_sla …): one
// error as it is, several joined by errors.Join in the order u_sla, hold, min_saving, rule, idle.
func (b BudgetParams) Validate() error { return joinErrors(b.fieldErrors()) }

// fieldErrors is every error of Validate, in order: the budget.* rows of Params' table.
func (b BudgetParams) fieldErrors() []error {
	return tableErrors(Params{Budget: b}, func(d Param) bool { return strings.HasPrefix(d.Key, "budget.") })
}

// Budget holds the fewest replicas that keep demand under u_sla at the calibrated upper
// quantile of the demand to come (METHOD §9):
//
//   - in.W is that quantile over the lead time (decision delay + start-up, plus the next
//     step): the size is ceil(W·N/u_sla), and a larger size is ordered at once;
//   - in.WNow is the load observed now: never below ceil(WNow·N/u_sla);
//   - a scale-down needs in.WDown, the quantile over the lead time plus the hold, to fit in
//     fewer pods, a saving of at least one pod (and MinSaving of the size), and Hold since the
//     last change of size;
//   - no scale-down without an observation (NaN WNow or W keeps the size).
//
// Loads are utilizations at the current size, as everywhere in package scaling.
type Budget struct {
	p          Params
	lastChange time.Time
	seen       bool
	lastSize   int32
	unapplied  bool // SetUnapplied: the hold restarts at observed changes of size only
}

// SetUnapplied implements Unapplied.
func (b *Budget) SetUnapplied(u bool) { b.unapplied = u }

// Name implements Algorithm.
func (b *Budget) Name() string { return "budget" }

// Reads implements Algorithm: the quantile over the lead time (W), the observed load (its floor)
// and the quantile a scale-down must still fit.
func (b *Budget) Reads() Inputs { return InputLoad | InputNow | InputDown }

// Recommend implements Algorithm.
func (b *Budget) Recommend(in Input) Decision {
	bp := b.p.Budget
	d := Decision{Target: bp.SLAUtilization, Replicas: in.Current, Reason: ReasonTolerance}
	if !b.seen || in.Current != b.lastSize {
		// A change of size, by us or anyone, restarts the hold.
		b.seen, b.lastSize, b.lastChange = true, in.Current, in.Time
	}
	// No observation, or none of the demand to come (a tick whose observation is missing: the
	// quantile, or the priced size, is NaN): keep the size.
	if math.IsNaN(in.WNow) || in.WNow < 0 || math.IsNaN(in.W) {
		d.Reason = ReasonNoLoad
		return b.finish(in, d)
	}
	n := float64(max(in.Current, 1))
	pods := func(w float64) int32 {
		if math.IsNaN(w) || w < 0 {
			return 0
		}
		return ceilInt32(w * n / bp.SLAUtilization)
	}
	now := pods(in.WNow)
	if bp.Rule == RulePriced {
		now = 0 // the load now is in the price (the runner's W), not a floor
	}
	up := max(pods(in.W), now)
	switch {
	case up > in.Current:
		d.Replicas, d.Reason = up, ReasonScaleUp
	default:
		down := max(pods(in.WDown), up)
		saving := in.Current - down
		need := max(int32(1), ceilInt32(bp.MinSaving*float64(in.Current)))
		switch {
		case saving < need:
			// Within the dead band: keep the size.
		case bp.Rule != RulePriced && in.Time.Sub(b.lastChange) < bp.Hold:
			// (The priced rule's hold is in its size, the runner's W: pricedHold.)
			d.Reason = ReasonStabilized
		default:
			d.Replicas, d.Reason = down, ReasonScaleDown
		}
	}
	return b.finish(in, d)
}

func (b *Budget) finish(in Input, d Decision) Decision {
	switch {
	case d.Replicas > b.p.MaxReplicas:
		d.Replicas, d.Reason = b.p.MaxReplicas, ReasonMaxReplicas
	case d.Replicas < b.p.MinReplicas:
		d.Replicas, d.Reason = b.p.MinReplicas, ReasonMinReplicas
	}
	if d.Replicas != in.Current && !b.unapplied {
		b.lastSize, b.lastChange = d.Replicas, in.Time
	}
	return d
}
