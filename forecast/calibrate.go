package forecast

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/debi-scaler/debi/internal/schema"
)

// This file is the model side of the overload-budget policy (METHOD §9): a forecast's own
// recent errors at its horizon turn a point forecast into an upper quantile, and adaptive
// conformal inference (Gibbs & Candès 2021) moves the quantile's level so that the realized
// exceedance tracks the budget under drift. Far in the tail the quantile is extrapolated with
// the peaks-over-threshold fit of METHOD §3 on the errors.

// Error kinds of CalibratorConfig.Errors: how an outcome is compared with its forecast.
const (
	// ErrorsRatio: e = ln(actual/forecast), Q = forecast·exp(q). Scale-free; a burst from
	// near zero is a huge ratio.
	ErrorsRatio = "ratio"
	// ErrorsAdditive: e = actual − forecast in cores, Q = forecast + q.
	ErrorsAdditive = "additive"
	// ErrorsScaled: e = (actual − forecast)/level with level the mean recent demand,
	// Q = forecast + q·level: additive, but in units of the workload's own size.
	ErrorsScaled = "scaled"
	// ErrorsLocal: e = (actual − forecast)/s with s the local scale of the errors (their recent
	// mean absolute value over localSpan errors, known before this one), Q = forecast + q·s:
	// normalised conformal scores (locally weighted conformal prediction), so the margin
	// shrinks when the errors have been small and widens after large ones.
	ErrorsLocal = "local"
	// ErrorsMin: the smaller of the additive and the ratio quantile, both read at one level α
	// (both see the same exceedances), so the calibration spends the budget on their minimum.
	ErrorsMin = "min"
)

// Scorings of CalibratorConfig.Scoring: when a forecast is made and scored.
const (
	ScoringSample = "sample" // once per history step, the largest forecast over the horizon
	ScoringTick   = "tick"   // at every decision, the demand at t + lead time, anchored at now
)

// Quantile methods of CalibratorConfig.Method.
const (
	QuantileEmpirical = "empirical" // Hyndman–Fan type 7 on the kept errors
	QuantilePOT       = "pot"       // GPD tail over the (1−τ) error quantile when α < τ
)

// CalibratorConfig configures a Calibrator.
type CalibratorConfig struct {
	// Budget is b, the target fraction of time above the quantile (0.01).
	Budget float64 `yaml:"overload_budget" json:"overload_budget"`
	// Gain is γ of α_{t+1} = α_t + γ·(b − exceeded_t) (0.005); 0 keeps α = b.
	Gain float64 `yaml:"calibration_gain" json:"calibration_gain"`
	// Window is the number of recent errors kept (2880): one per decision under scoring tick
	// (2880 decisions are 12 h at a 15 s sync period, whatever the history step), one per
	// history step under scoring sample; under the priced rule, of each class of forecast apart
	// (those for a time before the next history point, and those across it). At most 32,768;
	// under Neighbours each error takes 10 bytes. 760 (3.2 h) until issue 31's ninth round:
	// twelve hours won on both halves of the traces under both demand models
	// (docs/results-budget.md).
	Window int `yaml:"error_window" json:"error_window"`
	// Tau is the tail fraction of the POT fit (0.2).
	Tau float64 `yaml:"tail_fraction" json:"tail_fraction"`
	// Method is QuantilePOT or QuantileEmpirical.
	Method string `yaml:"quantile_method" json:"quantile_method"`
	// Errors is ErrorsRatio, ErrorsAdditive or ErrorsScaled.
	Errors string `yaml:"errors" json:"errors"`
	// Scoring is ScoringTick or ScoringSample.
	Scoring string `yaml:"scoring" json:"scoring"`
	// MinErrors is the fewest errors before the margin comes from them; until then the margin
	// is ColdMargin.
	MinErrors  int     `yaml:"min_errors" json:"min_errors"`
	ColdMargin float64 `yaml:"cold_margin" json:"cold_margin"`
	// Neighbours conditions the quantile on the level it is applied at: the margin of a
	// forecast is read from the errors of the kept forecasts nearest it (by ratio), this share
	// of them (0.125) but at least min_errors and at least 2/overload_budget (200 at 1 %), so
	// that the errors made at a spike's height do not widen the margin at the base level
	// (localised conformal prediction, with the forecast as the taxonomy). The level α stays
	// one, calibrated on every overload. 0 reads every kept error (one pool), the default with
	// quantile_method pot, which must have one pool. Chosen out of sample
	// (docs/results-budget.md, the seventh and eighth rounds).
	Neighbours float64 `yaml:"quantile_neighbours" json:"quantile_neighbours"`
}

// DefaultNeighbours is the default CalibratorConfig.Neighbours of the empirical quantile: the
// eighth of the kept errors whose forecasts were nearest (360 of 2880).
const DefaultNeighbours = 0.125

// NeighboursPerBudget/Budget is the fewest errors the quantile of a forecast is read from under
// CalibratorConfig.Neighbours (200 at a budget of 1 %, 400 at 0.5 %), so that the budget's
// level falls between their third and second largest: with fewer, the (1 − b) quantile is their
// largest, and a level α the calibration lowers to cover the rare tall errors cannot go further
// (at 0.5 %, 95 neighbours overspent the budget 1.5–2.3× on 10 of 38 (trace, demand) cells, 1/b
// of them on 3, 2/b on none: docs/results-budget.md, the eighth round).
const NeighboursPerBudget = 2

// DefaultCalibratorConfig returns the defaults of METHOD §9.
func DefaultCalibratorConfig() CalibratorConfig {
	return CalibratorConfig{Budget: 0.01, Gain: 0.005, Window: 2880, Tau: 0.2, Method: QuantileEmpirical, Errors: ErrorsAdditive, Scoring: ScoringTick, MinErrors: 30, ColdMargin: 2, Neighbours: DefaultNeighbours}
}

// WithMethodDefaults is c with the defaults that depend on the quantile method applied to the
// fields left at their general default: Neighbours, unless set (neighboursSet), is 0 under
// QuantilePOT, whose tail is fitted on one pool of errors.
func (c CalibratorConfig) WithMethodDefaults(neighboursSet bool) CalibratorConfig {
	if !neighboursSet && c.Method == QuantilePOT {
		c.Neighbours = 0
	}
	return c
}

// Validate reports every invalid setting, each error naming the field by its YAML name first:
// one error as it is, several joined by errors.Join in the order of the fields, the first being
// the one a field-by-field check stops at. With an invalid error_window, min_errors is only
// checked against its lower bound. The checks are the table's (CalibratorConfig.Table).
func (c CalibratorConfig) Validate() error {
	return joinErrors(schema.Errors(calibratorTable, c, nil))
}

// joinErrors is nil for none, the error itself for one, and errors.Join of them for several (its
// Unwrap() []error gives them back one by one).
func joinErrors(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return errors.Join(errs...)
}

// alphaMin and alphaMax bound the adapted level: below alphaMin the quantile is the largest
// error ever kept times a safety factor (ACI's "infinite" interval, capped by the bounds of the
// caller), above alphaMax the quantile would fall under the median.
const (
	alphaMin = 1e-5
	alphaMax = 0.5
)

// Calibrator keeps the multiplicative errors e = ln(actual/forecast) of one forecast and
// answers the calibrated margin exp(q_{1−α}(e)), so that forecast × margin is the upper
// (1−α) quantile of what comes. It is not safe for concurrent use. After warm-up it does not
// allocate.
type Calibrator struct {
	cfg  CalibratorConfig
	ring []float64  // errors in arrival order (a ring of cfg.Window), without Neighbours
	byF  errorStore // Neighbours: the errors with their forecasts and classes
	// Neighbours: the class a quantile is read from (-1: every class; UpperAtOf).
	want   int
	next   int
	sorted []float64 // the same errors, ascending
	alpha  float64
	alt    *Calibrator // ErrorsMin: the ratio side (this one is additive)
	// The POT fit of the sorted errors over their (1−τ) quantile: level t, GPD(ξ, σ), share nt/n.
	potOK         bool
	potT, xi, sig float64
	potShare      float64
	// floor keeps the ratio finite when the forecast or the demand is 0; level is the mean
	// recent demand (ErrorsScaled).
	floor    float64
	level    float64
	scale    float64 // ErrorsLocal: the recent mean absolute error (0 before the first)
	exceeded int
	observed int
}

// NewCalibrator returns a Calibrator with a validated configuration.
func NewCalibrator(cfg CalibratorConfig) (*Calibrator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Errors == ErrorsMin {
		alt := cfg
		alt.Errors = ErrorsRatio
		a, _ := NewCalibrator(alt)
		cfg.Errors = ErrorsAdditive
		c, _ := NewCalibrator(cfg)
		c.alt = a
		return c, nil
	}
	c := &Calibrator{cfg: cfg, alpha: cfg.Budget, want: -1}
	if cfg.Neighbours > 0 {
		c.byF = newErrorStore(cfg.Window)
	} else {
		c.ring, c.sorted = make([]float64, 0, cfg.Window), make([]float64, 0, cfg.Window)
	}
	return c, nil
}

// ErrNoForecast is returned by AddError for a forecast or an actual that is not a finite
// non-negative number.
var ErrNoForecast = errors.New("forecast or actual missing")

// Classes is the number of classes of forecasts a Calibrator keeps apart (AddErrorOf).
const Classes = 2

// AddError records the outcome of one forecast of class 0: actual is what came, forecast what
// was said.
func (c *Calibrator) AddError(actual, forecast float64) error {
	return c.AddErrorOf(0, actual, forecast)
}

// AddErrorOf records the outcome of one forecast of the class given (0 ≤ class < Classes): each
// class keeps its last Window errors, and UpperAtOf reads the quantile from one class's.
// Without Neighbours the class is not kept: every error counts for every class.
func (c *Calibrator) AddErrorOf(class int, actual, forecast float64) error {
	if !potFinite(actual) || !potFinite(forecast) || actual < 0 || forecast < 0 {
		return fmt.Errorf("%w: actual %v, forecast %v", ErrNoForecast, actual, forecast)
	}
	if class < 0 || class >= Classes {
		return fmt.Errorf("forecast class %d: want 0 to %d", class, Classes-1)
	}
	if c.alt != nil {
		_ = c.alt.AddErrorOf(class, actual, forecast)
	}
	// The floor is 1 % of the typical level, so an idle stretch (0 against 0) is no error and
	// a forecast of 0 against real load is a large but finite one.
	if lvl := 0.01 * math.Max(actual, forecast); lvl > c.floor {
		c.floor = lvl
	} else {
		c.floor = 0.999*c.floor + 0.001*lvl
	}
	f := math.Max(c.floor, 1e-12)
	if c.level == 0 {
		c.level = actual
	}
	c.level += (actual - c.level) / float64(c.cfg.Window)
	var e float64
	switch c.cfg.Errors {
	case ErrorsAdditive:
		e = actual - forecast
	case ErrorsScaled:
		e = (actual - forecast) / math.Max(c.level, f)
	case ErrorsLocal:
		a := actual - forecast
		if c.scale == 0 {
			c.scale = math.Abs(a)
		}
		e = a / math.Max(c.scale, f)
		c.scale += (math.Abs(a) - c.scale) / localSpan
	default:
		e = math.Log(math.Max(actual, f) / math.Max(forecast, f))
	}
	switch {
	case c.cfg.Neighbours > 0:
		// The errors are kept by their forecasts (byF) instead of by their values (sorted), the
		// quantile read from the nearest ones only.
		c.byF.add(class, fcError{float32(forecast), float32(e)})
	case len(c.ring) < c.cfg.Window:
		c.ring = append(c.ring, e)
		c.sorted = insertSorted(c.sorted, e)
	default:
		old := c.ring[c.next]
		c.ring[c.next] = e
		c.next = (c.next + 1) % c.cfg.Window
		c.sorted = removeSorted(c.sorted, old)
		c.sorted = insertSorted(c.sorted, e)
	}
	c.refit()
	return nil
}

// localSpan is the number of recent errors whose mean absolute value is the local scale of
// ErrorsLocal (an exponential mean of that span): 240, 1 h of 15 s ticks.
const localSpan = 240

// insertSorted inserts v into the ascending s (which has room: no allocation at capacity).
func insertSorted(s []float64, v float64) []float64 {
	i, _ := slices.BinarySearch(s, v)
	s = append(s, 0)
	copy(s[i+1:], s[i:])
	s[i] = v
	return s
}

func removeSorted(s []float64, v float64) []float64 {
	i, found := slices.BinarySearch(s, v)
	if !found {
		return s
	}
	return append(s[:i], s[i+1:]...)
}

// nearQuantile is q_{1−α} of the errors whose forecasts were nearest f (Neighbours): the
// share Neighbours of those kept, at least MinErrors and at least NeighboursPerBudget/Budget,
// nearest by |ln(forecast/f)| (each side lifted by the floor, so that 0 is a level like any
// other), and every one as near as the last. byF is sorted by forecast, so they are a run of it
// around f, grown from both ends; a side's distance is compared as a ratio (the logarithm is
// monotone), and the quantile found by selection (quantileOf).
func (c *Calibrator) nearQuantile(f float64) float64 {
	buf := nearPool.Get().(*[]float64)
	defer nearPool.Put(buf)
	*buf = c.nearErrors(f, *buf)
	return quantileOf(*buf, 1-c.Alpha())
}

// nearPool holds the scratch the errors nearest a forecast are read into: shared by every
// Calibrator (a fleet holds as many as read at once), and once grown it does not allocate.
var nearPool = sync.Pool{New: func() any { return new([]float64) }}

// nearErrors appends to near[:0] the errors of the kept forecasts nearest f, of the class read.
func (c *Calibrator) nearErrors(f float64, near []float64) []float64 {
	n := c.byF.len()
	m := n // the errors of the class read (every error: n)
	if c.want >= 0 {
		m = c.byF.count(c.want)
	}
	// in is whether the kept error i is of the class read.
	in := func(i int) bool { return c.want < 0 || c.byF.classAt(i) == c.want }
	k := min(m, max(c.cfg.MinErrors, int(math.Round(c.cfg.Neighbours*float64(m))), int(math.Ceil(NeighboursPerBudget/c.cfg.Budget))))
	fl := math.Max(c.floor, 1e-12)
	g := math.Max(f, 0) + fl
	// Above f (i ≥ hi) the ratio is (forecast + fl)/g, below it g/(forecast + fl): both ≥ 1
	// (AddError keeps no negative forecast). ra and rb are the next ones on each side.
	hi := c.byF.search(fcError{f: float32(f), e: float32(math.Inf(-1))})
	lo := hi - 1
	for hi < n && !in(hi) {
		hi++
	}
	for lo >= 0 && !in(lo) {
		lo--
	}
	inf := math.Inf(1)
	ra, rb := inf, inf
	if hi < n {
		ra = (float64(c.byF.at(hi).f) + fl) / g
	}
	if lo >= 0 {
		rb = g / (float64(c.byF.at(lo).f) + fl)
	}
	near = near[:0]
	last := math.Inf(-1)
	for len(near) < k {
		if ra < rb {
			near, last = append(near, float64(c.byF.at(hi).e)), ra
			for hi++; hi < n && !in(hi); hi++ {
			}
			if hi < n {
				ra = (float64(c.byF.at(hi).f) + fl) / g
			} else {
				ra = inf
			}
		} else {
			near, last = append(near, float64(c.byF.at(lo).e)), rb
			for lo--; lo >= 0 && !in(lo); lo-- {
			}
			if lo >= 0 {
				rb = g / (float64(c.byF.at(lo).f) + fl)
			} else {
				rb = inf
			}
		}
	}
	// Every error as near as the k-th comes too: which of equally near forecasts to take must
	// not depend on their errors (the order of byF among equal forecasts).
	for ; lo >= 0 && g/(float64(c.byF.at(lo).f)+fl) == last; lo-- {
		if in(lo) {
			near = append(near, float64(c.byF.at(lo).e))
		}
	}
	for ; hi < n && (float64(c.byF.at(hi).f)+fl)/g == last; hi++ {
		if in(hi) {
			near = append(near, float64(c.byF.at(hi).e))
		}
	}
	return near
}

// PricedUpperAtOf is the upper bound of what comes after forecast f that a caller who prices
// exceedance buys: of the bounds UpperAtOf(class, f, α) at the levels α = 1/λ, 2/λ, 4/λ, … up to
// ½, the one whose margin over f (at least 0), in units of unit, plus λ·α is least (the lowest
// level of equal ones). With unit a pod's worth of demand and λ the price of an overloaded tick in
// pod-ticks, that is the bound at which a tick's pods plus its expected overload cost least: at
// 1/λ an exceedance costs a pod-tick, and the level doubles while the margin it gives up is worth
// more than the overload it adds — past errors so rare and so tall that covering them costs more
// than leaving them (a spike's onset among the errors at its base), not where they are dense.
func (c *Calibrator) PricedUpperAtOf(class int, f, lambda, unit float64) float64 {
	if !(lambda > 0) || !(unit > 0) || math.IsNaN(f) {
		return c.UpperAtOf(class, f, 1/lambda)
	}
	price := lambda * unit // of a level of 1, in the errors' unit
	var v fallingQuantiles // the errors read: the default configuration's fast path
	top := alphaMax
	if c.cfg.Neighbours > 0 && c.cfg.Errors == ErrorsAdditive && c.alt == nil && c.Errors() >= c.cfg.MinErrors {
		if class >= 0 && class < Classes && c.byF.count(class) >= c.cfg.MinErrors {
			c.want = class
		}
		buf := nearPool.Get().(*[]float64)
		defer nearPool.Put(buf)
		*buf = c.nearErrors(f, *buf)
		c.want = -1
		v = fallingQuantiles{v: *buf, bound: len(*buf), at: -1}
		// Only a level whose price alone is under the cost at 1/λ can be cheaper.
		a0 := min(max(1/lambda, alphaMin), alphaMax)
		top = min(alphaMax, (math.Max(0, math.Max(0, f+v.quantile(1-a0))-f)+price/lambda)/price)
	}
	best, cost := math.NaN(), math.Inf(1)
	for a := 1 / lambda; ; a *= 2 {
		var u float64
		if v.v != nil {
			u = math.Max(0, f+v.quantile(1-min(max(a, alphaMin), alphaMax)))
		} else {
			u = c.UpperAtOf(class, f, a)
		}
		if x := math.Max(0, u-f) + price*a; x < cost {
			best, cost = u, x
		}
		if 2*a > top { // the next level is above ½, or can cost no less than the first
			break
		}
	}
	return best
}

// fallingQuantiles reads quantileSorted of v sorted at falling p, by selection instead of a
// sort: each quantile's order statistic is selected among the errors below the one before
// (selectNth leaves none of them above it), and the next one up is the least of those between
// the two. v is reordered; the values read are those of the sort, to the last bit.
type fallingQuantiles struct {
	v []float64
	// bound: v[bound:] holds no value below any of v[:bound], and v[bound] is the sorted v's
	// (len(v): nothing selected yet).
	bound int
	// at is the last order statistic selected (-1: none), lo its value and next the one after.
	at       int
	lo, next float64
}

// quantile is quantileSorted(sorted v, p); fastest for p at most the last call's.
func (q *fallingQuantiles) quantile(p float64) float64 {
	m := len(q.v)
	h := float64(m-1) * p
	lo := int(h)
	if lo >= m-1 {
		return slices.Max(q.v)
	}
	if q.at >= 0 && lo > q.at {
		q.bound = m // p rose: select among them all again
	}
	if lo != q.at {
		selectNth(q.v[:q.bound], lo)
		q.at, q.lo, q.next = lo, q.v[lo], slices.Min(q.v[lo+1:min(q.bound+1, m)])
		q.bound = lo
	}
	return q.lo + (h-float64(lo))*(q.next-q.lo)
}

// quantileOf is quantileSorted of v sorted, found by selection (selectNth, which reorders v)
// instead of a sort.
func quantileOf(v []float64, p float64) float64 {
	m := len(v)
	h := float64(m-1) * p
	lo := int(h)
	if lo >= m-1 {
		return slices.Max(v)
	}
	selectNth(v, lo)
	return v[lo] + (h-float64(lo))*(slices.Min(v[lo+1:])-v[lo])
}

// selectNth reorders v so that v[k] is the value v sorted would have there, none before it
// larger and none after it smaller (Hoare's selection, median-of-three pivots).
func selectNth(v []float64, k int) {
	lo, hi := 0, len(v)-1
	for hi > lo {
		mid := lo + (hi-lo)/2
		if v[mid] < v[lo] {
			v[mid], v[lo] = v[lo], v[mid]
		}
		if v[hi] < v[lo] {
			v[hi], v[lo] = v[lo], v[hi]
		}
		if v[hi] < v[mid] {
			v[hi], v[mid] = v[mid], v[hi]
		}
		pivot := v[mid]
		i, j := lo, hi
		for i <= j {
			for v[i] < pivot {
				i++
			}
			for v[j] > pivot {
				j--
			}
			if i <= j {
				v[i], v[j] = v[j], v[i]
				i++
				j--
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return
		}
	}
}

// refit fits the GPD tail of the errors over their (1−τ) quantile.
func (c *Calibrator) refit() {
	c.potOK = false
	n := len(c.sorted)
	if c.cfg.Method != QuantilePOT || n < c.cfg.MinErrors {
		return
	}
	t := quantileSorted(c.sorted, 1-c.cfg.Tau)
	i, _ := slices.BinarySearch(c.sorted, math.Nextafter(t, math.Inf(1)))
	for i < n && c.sorted[i] <= t {
		i++
	}
	if n-i < 10 {
		return
	}
	// The excesses over t, shifted in place into a scratch view: the fit reads them only.
	ex := c.sorted[i:]
	var sum, sumSq float64
	for _, v := range ex {
		y := v - t
		sum += y
		sumSq += y * y
	}
	k := float64(len(ex))
	mean := sum / k
	variance := (sumSq - sum*sum/k) / (k - 1)
	if !(mean > 0) || !(variance > 0) {
		return
	}
	xi, sigma := potMomentsFromStats(mean, variance)
	if !potFinite(xi) || !potFinite(sigma) || sigma <= 0 {
		return
	}
	c.potOK, c.potT, c.xi, c.sig, c.potShare = true, t, xi, sigma, k/float64(n)
}

// quantileSorted is the Hyndman–Fan type 7 quantile of the ascending, non-empty s.
func quantileSorted(s []float64, p float64) float64 {
	h := float64(len(s)-1) * p
	lo := int(h)
	if lo >= len(s)-1 {
		return s[len(s)-1]
	}
	return s[lo] + (h-float64(lo))*(s[lo+1]-s[lo])
}

// Observe records whether the quantity the margin covers was exceeded at this decision (a tick
// overloaded) and adapts α: α ← α + γ·(b − exceeded).
func (c *Calibrator) Observe(exceeded bool) {
	if c.alt != nil {
		c.alt.Observe(exceeded)
	}
	c.observed++
	x := 0.0
	if exceeded {
		c.exceeded++
		x = 1
	}
	// α itself is not clamped (adaptive conformal inference lets it leave [0, 1]: a level
	// below 0 asks for the widest quantile until the exceedances are paid back); only the level
	// the quantile is read at is. Clamping α would forget exceedances and overshoot the budget.
	c.alpha += c.cfg.Gain * (c.cfg.Budget - x)
}

// Alpha is the current level: the margin is the (1−α) quantile of the errors, α clamped to
// [alphaMin, alphaMax].
func (c *Calibrator) Alpha() float64 { return min(max(c.alpha, alphaMin), alphaMax) }

// Exceeded returns how many observations were exceeded and how many were made.
func (c *Calibrator) Exceeded() (exceeded, observed int) { return c.exceeded, c.observed }

// Errors is the number of errors kept.
func (c *Calibrator) Errors() int { return len(c.ring) + c.byF.len() }

// Upper is the calibrated upper (1−α) quantile of what comes after forecast f (never below 0).
// With fewer than MinErrors errors it is f·ColdMargin.
func (c *Calibrator) Upper(f float64) float64 {
	u := c.upper(f)
	if c.alt != nil {
		u = math.Min(u, c.alt.upper(f))
	}
	return u
}

// UpperAtOf is UpperAt read from the errors of the class given alone (AddErrorOf), when it
// has MinErrors of them; else, and without Neighbours, from every error.
func (c *Calibrator) UpperAtOf(class int, f, alpha float64) float64 {
	if c.cfg.Neighbours > 0 && class >= 0 && class < Classes && c.byF.count(class) >= c.cfg.MinErrors {
		c.want = class
		if c.alt != nil {
			c.alt.want = class
		}
		defer func() {
			c.want = -1
			if c.alt != nil {
				c.alt.want = -1
			}
		}()
	}
	return c.UpperAt(f, alpha)
}

// UpperAt is Upper at the level α given (clamped as Alpha is) instead of the calibrated one:
// the quantile a caller that prices the level itself reads (the priced rule: α = 1/λ).
func (c *Calibrator) UpperAt(f, alpha float64) float64 {
	saved := c.alpha
	c.alpha = alpha
	u := c.Upper(f)
	c.alpha = saved
	return u
}

func (c *Calibrator) upper(f float64) float64 {
	if math.IsNaN(f) { // no forecast (a missing observation): no quantile, whatever the errors
		return f
	}
	if c.Errors() < c.cfg.MinErrors {
		return f * c.cfg.ColdMargin
	}
	var q float64
	if c.cfg.Neighbours > 0 {
		q = c.nearQuantile(f)
	} else {
		q = c.errorQuantile()
	}
	switch c.cfg.Errors {
	case ErrorsAdditive:
		return math.Max(0, f+q)
	case ErrorsScaled:
		return math.Max(0, f+q*c.level)
	case ErrorsLocal:
		return math.Max(0, f+q*math.Max(c.scale, c.floor))
	}
	return f * math.Exp(q)
}

// errorQuantile is q_{1−α} of the kept errors: empirical, or from the POT tail past (1−τ).
func (c *Calibrator) errorQuantile() float64 {
	n := len(c.sorted)
	alpha := c.Alpha()
	p := 1 - alpha
	var q float64
	switch {
	case c.potOK && alpha < c.cfg.Tau && alpha < c.potShare:
		// r = α·n/N_t < 1: the level is inside the fitted tail.
		q = potTailLevel(c.potT, c.sig, c.xi, alpha/c.potShare)
		// A GPD with ξ < 0 has a finite end point; past it the fit says nothing more.
		if !potFinite(q) {
			q = c.sorted[n-1]
		}
	default:
		q = quantileSorted(c.sorted, p)
	}
	return q
}
