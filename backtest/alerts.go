package backtest

import (
	"math"
	"time"
)

// The burn-rate alerts debi ships for a budget policy (rules/debi.alerts.yaml, group
// debi.budget.alerts), replayed over a run's overload: the page and the tickets an on-call
// would have had. The burn rate over a window is the share of it overloaded, in units of the
// budget b (rules/debi.rules.yaml, policy:debi_budget_burn_rate:ratio_rate<w>). Each alert
// also needs its long window to hold more overload than a number of lead times (the policy's
// debi_policy_lead_time_seconds): a policy that spends its budget does so in episodes about a
// lead time long, and a few of them in a window are how it spends, not a fault.
// TestAlertsAsShipped checks these against the rule files.
var (
	// burnWindows are the recording rules' windows.
	burnWindows = [...]time.Duration{5 * time.Minute, 30 * time.Minute, time.Hour, 6 * time.Hour, 24 * time.Hour}
	// burnAlerts are the alerts: a burn above factor over both windows (indices into
	// burnWindows) for the duration, or, for exhausted, more than two days' budget of overload in
	// the last day and a burn above factor over the short window.
	burnAlerts = [...]burnAlert{
		{name: "page", long: 2, short: 0, factor: 14.4, leads: 4, hold: 2 * time.Minute, keep: 10 * time.Minute},
		{name: "ticket", long: 3, short: 1, factor: 3, leads: 6, hold: 15 * time.Minute, keep: time.Hour},
		{name: "exhausted", long: 4, short: 3, factor: 1, leads: 8, hold: 15 * time.Minute, keep: time.Hour, exhausted: 2},
	}
)

type burnAlert struct {
	name        string
	long, short int
	factor      float64
	// leads: the long window's overload must also exceed this many lead times.
	leads float64
	hold  time.Duration
	// keep is keep_firing_for: a firing alert stays firing this long after its condition last
	// held, and a condition that holds again within it continues that firing. A burn beyond the
	// budget comes in episodes, and between them the short window lets the condition go.
	keep time.Duration
	// exhausted: the long window's overload against this many days' budget, not its burn rate.
	exhausted float64
}

// burnReplay adds up a run's overload over the alerts' windows, tick by tick, and counts each
// alert's firings (a condition that holds for the alert's duration, from not firing; a firing
// continues while the condition holds again within its keep_firing_for).
type burnReplay struct {
	b     float64 // the budget
	tick  time.Duration
	lead  time.Duration // the policy's lead time: decision and start-up
	ring  []float64     // the overload of the last ticks of the longest window
	added int
	ticks [len(burnWindows)]int
	sum   [len(burnWindows)]float64
	// pending counts the ticks each alert's condition has held; firing whether it fires.
	pending [len(burnAlerts)]int
	firing  [len(burnAlerts)]bool
	// since counts the ticks since a firing alert's condition last held.
	since [len(burnAlerts)]int
	fired [len(burnAlerts)]int
	// quiet: no alert's condition held at the last evaluation, and none is kept firing.
	quiet bool
}

// newBurnReplay is nil where the alerts cannot be read: without a budget, or a tick.
func newBurnReplay(b float64, tick, lead time.Duration) *burnReplay {
	if !(b > 0) || tick <= 0 {
		return nil
	}
	r := &burnReplay{b: b, tick: tick, lead: lead}
	for k, w := range burnWindows {
		r.ticks[k] = max(1, int(math.Round(float64(w)/float64(tick))))
	}
	r.ring = make([]float64, r.ticks[len(burnWindows)-1])
	return r
}

// burn is the burn rate over window k: its overloaded share over the ticks it holds so far (a
// window that began after the run did holds fewer), over the budget.
func (r *burnReplay) burn(k int) float64 {
	return r.sum[k] / float64(min(r.added, r.ticks[k])) / r.b
}

// add reads the next tick's overload x (its share of the tick, 0–1) and evaluates the alerts.
func (r *burnReplay) add(x float64) {
	n := len(r.ring)
	for k, w := range r.ticks {
		r.sum[k] += x
		if r.added >= w {
			r.sum[k] -= r.ring[(r.added-w)%n]
		}
		r.sum[k] = max(r.sum[k], 0) // no rounding below zero
	}
	r.ring[r.added%n] = x
	r.added++
	if x == 0 && r.quiet {
		return // the sums only fell: nothing pending or firing starts
	}
	r.quiet = true
	for a, al := range burnAlerts {
		var on bool
		if al.exhausted > 0 {
			on = r.sum[al.long]*r.tick.Seconds() > al.exhausted*r.b*burnWindows[al.long].Seconds() && r.burn(al.short) > al.factor
		} else {
			on = r.burn(al.long) > al.factor && r.burn(al.short) > al.factor
		}
		on = on && r.sum[al.long]*r.tick.Seconds() > al.leads*r.lead.Seconds()
		if !on {
			r.pending[a] = 0
			if r.firing[a] {
				r.since[a]++
				if time.Duration(r.since[a])*r.tick > al.keep {
					r.firing[a] = false
				} else {
					r.quiet = false // still firing: the next ticks count down its keep
				}
			}
			continue
		}
		r.quiet = false
		r.since[a] = 0
		r.pending[a]++
		if !r.firing[a] && time.Duration(r.pending[a])*r.tick > al.hold {
			r.firing[a] = true
			r.fired[a]++
		}
	}
}
