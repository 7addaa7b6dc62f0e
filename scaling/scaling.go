// Package scaling turns a load figure into a replica count: the Kubernetes HPA rule, the Elastic
// Scaler APA rule and debi's Algorithm 2 with its dynamic target utilization, plus the metric
// stabilisation that produces the observed load W1 and the effective-load rule
// W = max(min(W2, W3), W1). Pure decisions: no I/O, no clocks (time comes in the Input), so the
// backtest and the live webhook run exactly the same code.
//
// Algorithms register by name in a registry (case-insensitive), as in the Elastic Scaler's
// AlgorithmManager: adding one is one file plus one Register call.
package scaling

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/debi-scaler/debi/internal/registry"
)

// Input is everything one decision may see. Loads are utilizations at the current size:
// demand divided by Current·Request, so 1.0 means every current pod is fully used.
type Input struct {
	// Time of the decision; stateful algorithms (HPA stabilisation, rate limits) use it.
	Time time.Time
	// Current is the spec replica count N(t); Ready the ready replicas Nr(t).
	Current int32
	Ready   int32
	// W is the load fed to the rule (W1 for hpa/apa, max(W2,W1) or the effective load for the
	// predictive policies).
	W float64
	// WindowW is the mean observed load over the algorithm's window (debi's 5-minute window,
	// METHOD §5.5), as utilization at the current size; NaN when not available.
	WindowW float64
	// WNow is the load observed now (budget's floor) and WDown the load a scale-down must
	// still fit (budget: the calibrated quantile over the lead time plus the hold); both
	// utilizations at the current size, read only by budget.
	WNow, WDown float64
	// Idle is how long, in seconds, the policy's wake metrics have been at or below their
	// activation, observed and forecast (0 while one is above it; NaN when not known): read
	// only by a policy that scales to zero (min_replicas: 0), whose decision goes to zero once
	// Idle reaches scale_to_zero_after and wakes from zero while Idle is 0 (Decide).
	Idle float64
}

// Decision is an algorithm's answer. Replicas is always an absolute count.
type Decision struct {
	Replicas int32 `json:"replicas"`
	// Target is the target utilization the rule aimed at (dynamic for debi).
	Target float64 `json:"target"`
	// Reason says which branch decided: see the Reason* constants.
	Reason string `json:"reason"`
}

// Reasons for a decision.
const (
	ReasonTolerance    = "within-tolerance"
	ReasonScaleUp      = "scale-up"
	ReasonScaleDown    = "scale-down"
	ReasonMinReplicas  = "at-min-replicas"
	ReasonMaxReplicas  = "at-max-replicas"
	ReasonStabilized   = "stabilized"
	ReasonRateLimited  = "rate-limited"
	ReasonNoLoad       = "no-load-data"
	ReasonWindow       = "window"
	ReasonScaledToZero = "scaled-to-zero"
	// ReasonIdle: a policy with min_replicas 0 whose wake metrics have been idle for
	// scale_to_zero_after goes to, or stays at, zero.
	ReasonIdle = "idle"
	// ReasonWoken: a policy at zero replicas whose wake metric is active (observed, or forecast
	// over the lead time) wakes to the size its rule asks for at one pod.
	ReasonWoken = "woken"
)

// Algorithm recommends replicas. Implementations may keep state between calls (stabilisation
// windows, scale events) and are not safe for concurrent use: one instance per policy.
type Algorithm interface {
	Name() string
	// Reads is the set of Input fields the algorithm's rule reads beyond Time and Current.
	Reads() Inputs
	Recommend(in Input) Decision
}

// Rounding selects how Algorithm 2 turns its continuous optimum into a replica count.
type Rounding string

// Rounding modes of Algorithm 2 (METHOD §5.4).
const (
	RoundNearest Rounding = "nearest" // the paper: minimise |U(n)·n − L|
	RoundCeil    Rounding = "ceil"    // never plan a pod above its target
)

// HPABehavior selects which HPA object hpa models (Params.HPABehavior).
type HPABehavior string

// HPA behaviours.
const (
	// BehaviorDefault is an autoscaling/v2 HPA with behavior set to the API defaults, modelled
	// with the ScaleUp*/ScaleDown* parameters.
	BehaviorDefault HPABehavior = "default"
	// BehaviorNone is an HPA without behavior (kubectl autoscale): the controller's legacy path,
	// ScaleDownStabilization as its --horizontal-pod-autoscaler-downscale-stabilization and at
	// most max(2·current, 4) per sync; the other ScaleUp*/ScaleDown* parameters are not used.
	BehaviorNone HPABehavior = "none"
)

// Params holds every algorithm's parameters; each algorithm reads the ones it uses.
// The YAML names are the ones of debi's configuration file.
type Params struct {
	MinReplicas int32 `yaml:"min_replicas" json:"min_replicas"`
	MaxReplicas int32 `yaml:"max_replicas" json:"max_replicas"`
	// Target is the fixed target utilization of hpa and apa.
	Target float64 `yaml:"target" json:"target"`
	// Tolerance is the dead band of hpa and debi: no change while |W/target − 1| ≤ Tolerance.
	Tolerance float64 `yaml:"tolerance" json:"tolerance"`

	// Lower and Upper bound debi's dynamic target U(n) = Upper − (Upper−Lower)·MinReplicas/n.
	Lower float64 `yaml:"lower" json:"lower"`
	Upper float64 `yaml:"upper" json:"upper"`
	// Rounding of Algorithm 2: nearest or ceil.
	Rounding Rounding `yaml:"rounding" json:"rounding"`
	// Window is debi's observation window (METHOD §5.5): the recommendation is the larger of the
	// one for W and the one for the mean observed load over this window. 0 disables it.
	Window time.Duration `yaml:"window" json:"window"`

	// ScaleDownStabilization is HPA's scale-down stabilisation window (default 5m).
	ScaleDownStabilization time.Duration `yaml:"scale_down_stabilization" json:"scale_down_stabilization"`
	// ScaleUpStabilization is HPA's scale-up stabilisation window (default 0).
	ScaleUpStabilization time.Duration `yaml:"scale_up_stabilization" json:"scale_up_stabilization"`
	// ScaleUpPods, ScaleUpPercent and ScaleUpPeriod are HPA's default scale-up policies
	// (4 pods or 100 % per 15 s, whichever allows more).
	ScaleUpPods    int32         `yaml:"scale_up_pods" json:"scale_up_pods"`
	ScaleUpPercent float64       `yaml:"scale_up_percent" json:"scale_up_percent"`
	ScaleUpPeriod  time.Duration `yaml:"scale_up_period" json:"scale_up_period"`
	// ScaleDownPercent and ScaleDownPeriod are HPA's default scale-down policy (100 % per 15 s).
	ScaleDownPercent float64       `yaml:"scale_down_percent" json:"scale_down_percent"`
	ScaleDownPeriod  time.Duration `yaml:"scale_down_period" json:"scale_down_period"`
	// HPABehavior is the HPA modelled: "default" (behavior set to the API defaults, shaped by
	// the scale_* parameters) or "none" (no behavior, as kubectl autoscale creates).
	HPABehavior HPABehavior `yaml:"hpa_behavior" json:"hpa_behavior"`

	// UpTolerance, DownTolerance, MaxScaleUpRate and MaxScaleDownRate are the Elastic Scaler
	// APA's parameters: no scale-up below Target·(1+UpTolerance), no scale-down above
	// Target·(1−DownTolerance), at most ×MaxScaleUpRate up and ÷MaxScaleDownRate down per decision.
	UpTolerance      float64 `yaml:"up_tolerance" json:"up_tolerance"`
	DownTolerance    float64 `yaml:"down_tolerance" json:"down_tolerance"`
	MaxScaleUpRate   float64 `yaml:"max_scale_up_rate" json:"max_scale_up_rate"`
	MaxScaleDownRate float64 `yaml:"max_scale_down_rate" json:"max_scale_down_rate"`

	// Budget holds the decision parameters of the overload-budget algorithm (METHOD §9).
	Budget BudgetParams `yaml:"budget" json:"budget"`

	// ScaleToZeroAfter is, with MinReplicas 0, how long the wake metrics must stay at or below
	// their activation before the workload goes to zero (KEDA's cooldownPeriod).
	ScaleToZeroAfter time.Duration `yaml:"scale_to_zero_after" json:"scale_to_zero_after"`
}

// DefaultParams are the paper's settings (METHOD §7) and Kubernetes' HPA defaults.
func DefaultParams() Params {
	return Params{
		MinReplicas:            1,
		MaxReplicas:            50,
		Target:                 0.5,
		Tolerance:              0.1,
		Lower:                  0.3,
		Upper:                  0.7,
		Rounding:               RoundNearest,
		Window:                 5 * time.Minute,
		ScaleDownStabilization: 5 * time.Minute,
		ScaleUpStabilization:   0,
		ScaleUpPods:            4,
		ScaleUpPercent:         100,
		ScaleUpPeriod:          15 * time.Second,
		ScaleDownPercent:       100,
		ScaleDownPeriod:        15 * time.Second,
		HPABehavior:            BehaviorDefault,
		UpTolerance:            0.1,
		DownTolerance:          0.1,
		MaxScaleUpRate:         2,
		MaxScaleDownRate:       2,
		Budget:                 DefaultBudgetParams(),
		ScaleToZeroAfter:       5 * time.Minute,
	}
}

// Validate checks the parameters and returns an error for each bad field, each naming the field
// by its YAML name first, so that a configuration error points at the line to fix: one error as
// it is, several joined by errors.Join in the order of the fields below (then those of Budget),
// the first being the one a field-by-field check stops at. A check that rests on a field already
// found bad (max_replicas against min_replicas, upper against lower) is skipped rather than
// reported as its echo.
func (p Params) Validate() error { return joinErrors(p.fieldErrors()) }

// fieldErrors is every independent error of Validate, in order: the bounds and cross-checks of
// Params' table (scaling.Param), Budget's among them.
func (p Params) fieldErrors() []error {
	return tableErrors(p, func(Param) bool { return true })
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

// Factory builds an algorithm from validated parameters.
type Factory func(p Params) Algorithm

var plugins = registry.New[Factory]("scaling algorithm")

// Register makes an algorithm available by name (case-insensitive). It panics on an empty or
// duplicate name: both are programming errors found at start-up.
func Register(name string, f Factory) { plugins.Register(name, f) }

// New validates p and builds the algorithm registered under name (case-insensitive).
func New(name string, p Params) (Algorithm, error) {
	f, err := plugins.Get(name)
	if err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return f(p.RuleParams()), nil
}

// RuleParams are the parameters the algorithms size with: p with a minimum of at least one
// replica. Going to zero and waking from it is not any algorithm's rule but a step of the one
// composition (Decide), on the bounds of p (BoundsOf: ToZero when MinReplicas is 0).
func (p Params) RuleParams() Params {
	p.MinReplicas = max(p.MinReplicas, 1)
	return p
}

// Names lists the registered algorithms, sorted.
func Names() []string { return plugins.Names() }

// Known reports whether an algorithm of that name is registered.
func Known(name string) bool { return plugins.Known(name) }

// EffectiveLoad is the paper's eq. (16), W = max(min(W2, W3), W1): predictive while the forecast
// stays below the high-water level, reactive once the observed load is already extreme.
// A missing (NaN) W2 or W3 drops out of the min, so a missing forecast leaves
// max(W3, W1) and a missing high-water level leaves max(W2, W1): a missing model never lowers
// the load below what was observed. A NaN W1 gives NaN (no observation, no decision).
func EffectiveLoad(w1, w2, w3 float64) float64 {
	if math.IsNaN(w1) {
		return math.NaN()
	}
	m := math.NaN()
	switch {
	case math.IsNaN(w2):
		m = w3
	case math.IsNaN(w3):
		m = w2
	default:
		m = math.Min(w2, w3)
	}
	if math.IsNaN(m) {
		return w1
	}
	return math.Max(m, w1)
}

// ForecastLoad is the load of the <model>-hpa policies: max(W2, W1) (METHOD §6). A NaN W2
// leaves W1.
func ForecastLoad(w1, w2 float64) float64 {
	if math.IsNaN(w1) {
		return math.NaN()
	}
	if math.IsNaN(w2) {
		return w1
	}
	return math.Max(w1, w2)
}

func clamp(n, lo, hi int32) int32 {
	if n < lo {
		return lo
	}
	if n > hi {
		return hi
	}
	return n
}

// ceilInt32 rounds up, saturating at the int32 range so absurd loads cannot wrap around.
func ceilInt32(x float64) int32 {
	c := math.Ceil(x)
	if c >= math.MaxInt32 {
		return math.MaxInt32
	}
	if c <= math.MinInt32 {
		return math.MinInt32
	}
	return int32(c)
}

// PrefixErrors puts prefix before each error of err, one by one when err joins several (the
// validators report one error per bad field), so that every line names its section.
func PrefixErrors(prefix string, err error) error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs := j.Unwrap()
		out := make([]error, len(errs))
		for i, e := range errs {
			out[i] = fmt.Errorf("%s%w", prefix, e)
		}
		return errors.Join(out...)
	}
	return fmt.Errorf("%s%w", prefix, err)
}
