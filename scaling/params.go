package scaling

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Param declares one parameter of Params once: its key in the configuration file
// (scaling.<Key>), whether an ElasticScaler's algorithmConfig may set it (the key without
// underscores, any case: scale_down_stabilization is scaleDownStabilization), its flag in
// `debi backtest`, its unit, a one-line doc and its bounds. The default is DefaultParams'. The
// configuration's validation (Params.Validate), the ElasticScaler keys, the backtest's flags and
// docs/configuration.md's bounds, keys and flags all come from Params'Table.
type Param struct {
	Key string
	// ES: an ElasticScaler algorithmConfig key.
	ES bool
	// Flag is the backtest flag (without --), "" when the backtest has none.
	Flag string
	Unit string
	Doc  string
	// One accessor is set, by the field's type.
	Float func(*Params) *float64
	Dur   func(*Params) *time.Duration
	Int   func(*Params) *int32
	Str   func(*Params) *string
	// Enum lists a string parameter's values.
	Enum []string
	// OK is the parameter's bound on its own value (nil: none), Want how an error says it
	// ("must be in (0, 1]"). A zero the bound allows is a setting; one it refuses is an error.
	OK   func(float64) bool
	Want string
	// Cross checks the parameter against those before it, given which of them were valid
	// (nil: none); it is skipped when the parameter's own bound already failed.
	Cross func(p Params, valid map[string]bool) error
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func in01c(v float64) bool  { return finite(v) && v > 0 && v <= 1 } // (0, 1]
func in01o(v float64) bool  { return finite(v) && v >= 0 && v < 1 } // [0, 1)
func nonNeg(v float64) bool { return finite(v) && v >= 0 }
func pos(v float64) bool    { return finite(v) && v > 0 }
func atLeast1(v float64) bool {
	return finite(v) && v >= 1
}

// Table is every parameter of Params, in the order of its fields (and the order of Validate's
// errors).
func (Params) Table() []Param { return paramTable }

var paramTable = []Param{
	{Key: "min_replicas", Flag: "min-replicas", Unit: "replicas", Doc: "N_min: the fewest replicas any algorithm recommends.",
		Int: func(p *Params) *int32 { return &p.MinReplicas }, OK: atLeast1, Want: "must be at least 1"},
	{Key: "max_replicas", Flag: "max-replicas", Unit: "replicas", Doc: "N_max: the most replicas any algorithm recommends; at least min_replicas.",
		Int: func(p *Params) *int32 { return &p.MaxReplicas },
		Cross: func(p Params, valid map[string]bool) error {
			if valid["min_replicas"] && p.MaxReplicas < p.MinReplicas {
				return fmt.Errorf("max_replicas (%d) must not be below min_replicas (%d)", p.MaxReplicas, p.MinReplicas)
			}
			return nil
		}},
	{Key: "target", ES: true, Flag: "hpa.target", Unit: "utilization", Doc: "The fixed target utilization of hpa and apa.",
		Float: func(p *Params) *float64 { return &p.Target }, OK: in01c, Want: "must be in (0, 1]"},
	{Key: "tolerance", ES: true, Flag: "tolerance", Unit: "fraction", Doc: "Δ, the dead band of hpa and debi: no change while |W/target − 1| ≤ Δ.",
		Float: func(p *Params) *float64 { return &p.Tolerance }, OK: in01o, Want: "must be in [0, 1)"},
	{Key: "lower", ES: true, Flag: "debi.lower", Unit: "utilization", Doc: "U_lower: debi's dynamic target at N_min; U(n) = upper − (upper − lower)·min_replicas/n.",
		Float: func(p *Params) *float64 { return &p.Lower }, OK: pos, Want: "must be above 0"},
	{Key: "upper", ES: true, Flag: "debi.upper", Unit: "utilization", Doc: "U_upper: the limit of debi's dynamic target as n grows; above lower and at most 1.",
		Float: func(p *Params) *float64 { return &p.Upper },
		Cross: func(p Params, valid map[string]bool) error {
			if valid["lower"] && (!finite(p.Upper) || p.Upper <= p.Lower || p.Upper > 1) {
				return fmt.Errorf("upper must be above lower (%v) and at most 1, got %v", p.Lower, p.Upper)
			}
			return nil
		}},
	{Key: "rounding", Flag: "debi.rounding", Doc: "How Algorithm 2 turns its continuous optimum into a count: nearest (the paper) or ceil (never plan a pod above its target).",
		Str: func(p *Params) *string { return (*string)(&p.Rounding) }, Enum: []string{string(RoundNearest), string(RoundCeil)}},
	{Key: "window", ES: true, Flag: "debi.window", Unit: "duration", Doc: "debi's observation window: the recommendation is the larger of the one for W and the one for the mean observed load over this window (0 disables the window term).",
		Dur: func(p *Params) *time.Duration { return &p.Window }, OK: nonNeg, Want: "must not be negative"},
	{Key: "scale_down_stabilization", ES: true, Flag: "hpa.scale-down-stabilization", Unit: "duration", Doc: "HPA scale-down stabilisation window: the largest recommendation within it is the floor.",
		Dur: func(p *Params) *time.Duration { return &p.ScaleDownStabilization }, OK: nonNeg, Want: "must not be negative"},
	{Key: "scale_up_stabilization", ES: true, Flag: "hpa.scale-up-stabilization", Unit: "duration", Doc: "HPA scale-up stabilisation window: the smallest recommendation within it is the ceiling.",
		Dur: func(p *Params) *time.Duration { return &p.ScaleUpStabilization }, OK: nonNeg, Want: "must not be negative"},
	{Key: "scale_up_pods", Flag: "hpa.scale-up-pods", Unit: "pods", Doc: "HPA scale-up policy: pods added per scale_up_period (the larger of this and scale_up_percent applies).",
		Int: func(p *Params) *int32 { return &p.ScaleUpPods }, OK: nonNeg, Want: "must not be negative"},
	{Key: "scale_up_percent", ES: true, Flag: "hpa.scale-up-percent", Unit: "percent", Doc: "HPA scale-up policy: percent added per scale_up_period; with scale_up_pods not both 0.",
		Float: func(p *Params) *float64 { return &p.ScaleUpPercent }, OK: nonNeg, Want: "must not be negative",
		Cross: func(p Params, _ map[string]bool) error {
			if p.ScaleUpPods == 0 && p.ScaleUpPercent == 0 {
				return fmt.Errorf("scale_up_pods and scale_up_percent are both 0: the workload could never scale up")
			}
			return nil
		}},
	{Key: "scale_up_period", Flag: "hpa.scale-up-period", Unit: "duration", Doc: "HPA scale-up policies' period.",
		Dur: func(p *Params) *time.Duration { return &p.ScaleUpPeriod }, OK: pos, Want: "must be positive"},
	{Key: "scale_down_percent", ES: true, Flag: "hpa.scale-down-percent", Unit: "percent", Doc: "HPA scale-down policy: percent removed per scale_down_period.",
		Float: func(p *Params) *float64 { return &p.ScaleDownPercent }, OK: func(v float64) bool { return finite(v) && v >= 0 && v <= 100 }, Want: "must be in [0, 100]"},
	{Key: "scale_down_period", Flag: "hpa.scale-down-period", Unit: "duration", Doc: "HPA scale-down policy's period.",
		Dur: func(p *Params) *time.Duration { return &p.ScaleDownPeriod }, OK: pos, Want: "must be positive"},
	{Key: "hpa_behavior", Flag: "hpa.behavior", Doc: "The HPA modelled: default (behavior set to the API defaults, shaped by the scale_* parameters) or none (no behavior, as kubectl autoscale creates: scale_down_stabilization and at most max(2·current, 4) per sync).",
		Str: func(p *Params) *string { return (*string)(&p.HPABehavior) }, Enum: []string{string(BehaviorDefault), string(BehaviorNone)}},
	{Key: "up_tolerance", ES: true, Flag: "apa.up-tolerance", Unit: "fraction", Doc: "APA: no scale-up below target·(1 + up_tolerance).",
		Float: func(p *Params) *float64 { return &p.UpTolerance }, OK: nonNeg, Want: "must not be negative"},
	{Key: "down_tolerance", ES: true, Flag: "apa.down-tolerance", Unit: "fraction", Doc: "APA: no scale-down above target·(1 − down_tolerance).",
		Float: func(p *Params) *float64 { return &p.DownTolerance }, OK: in01o, Want: "must be in [0, 1)"},
	{Key: "max_scale_up_rate", ES: true, Flag: "apa.max-scale-up-rate", Unit: "factor", Doc: "APA: at most × this per decision up.",
		Float: func(p *Params) *float64 { return &p.MaxScaleUpRate }, OK: atLeast1, Want: "must be at least 1"},
	{Key: "max_scale_down_rate", ES: true, Flag: "apa.max-scale-down-rate", Unit: "factor", Doc: "APA: at most ÷ this per decision down.",
		Float: func(p *Params) *float64 { return &p.MaxScaleDownRate }, OK: atLeast1, Want: "must be at least 1"},
	{Key: "budget.u_sla", Unit: "utilization", Doc: "u_sla: a pod is sized to run at most at this utilization; a tick above u_sla·ready·request is overloaded.",
		Float: func(p *Params) *float64 { return &p.Budget.SLAUtilization }, OK: in01c, Want: "must be in (0, 1]"},
	{Key: "budget.hold", Flag: "budget.hold", Unit: "duration", Doc: "Least time between the last change of size and a scale-down: the hysteresis that keeps scaling actions at or below the HPA's.",
		Dur: func(p *Params) *time.Duration { return &p.Budget.Hold }, OK: nonNeg, Want: "must not be negative"},
	{Key: "budget.min_saving", Flag: "budget.min-saving", Unit: "fraction", Doc: "Least share of the current size a scale-down must save, on top of at least one pod (0: one pod is enough).",
		Float: func(p *Params) *float64 { return &p.Budget.MinSaving }, OK: in01o, Want: "must be in [0, 1)"},
	{Key: "budget.rule", Flag: "budget.rule", Doc: "How budget sizes: quantile (every tick covered at one calibrated level, never below the load now) or priced (the fewest pod-ticks plus a price on each overloaded tick over the lead ahead, the price adapted so that overload tracks the budget).",
		Str: func(p *Params) *string { return (*string)(&p.Budget.Rule) }, Enum: []string{string(RuleQuantile), string(RulePriced)}},
}

// Param returns the parameter of that configuration key (scaling.<key>, or budget.<key>).
func ParamByKey(key string) (Param, bool) {
	for _, p := range paramTable {
		if p.Key == key {
			return p, true
		}
	}
	return Param{}, false
}

// ESKey is the parameter's ElasticScaler algorithmConfig key, lower case ("" when it has none).
func (d Param) ESKey() string {
	if !d.ES {
		return ""
	}
	return strings.ReplaceAll(d.Key, "_", "")
}

// value is the parameter's value in p as a float (NaN for a string).
func (d Param) value(p *Params) float64 {
	switch {
	case d.Float != nil:
		return *d.Float(p)
	case d.Dur != nil:
		return float64(*d.Dur(p))
	case d.Int != nil:
		return float64(*d.Int(p))
	}
	return math.NaN()
}

// String renders the parameter's value in p.
func (d Param) String(p *Params) string {
	switch {
	case d.Float != nil:
		return fmt.Sprint(*d.Float(p))
	case d.Dur != nil:
		return fmt.Sprint(*d.Dur(p))
	case d.Int != nil:
		return fmt.Sprint(*d.Int(p))
	case d.Str != nil:
		return fmt.Sprintf("%q", *d.Str(p))
	}
	return ""
}

// check is the parameter's own error in p, or nil.
func (d Param) check(p *Params) error {
	if d.Str != nil && len(d.Enum) > 0 {
		v := *d.Str(p)
		for _, e := range d.Enum {
			if v == e {
				return nil
			}
		}
		quoted := make([]string, len(d.Enum))
		for i, e := range d.Enum {
			quoted[i] = fmt.Sprintf("%q", e)
		}
		return fmt.Errorf("%s must be %s, got %q", d.Key, strings.Join(quoted, " or "), v)
	}
	if d.OK != nil && !d.OK(d.value(p)) {
		return fmt.Errorf("%s %s, got %s", d.Key, d.Want, strings.Trim(d.String(p), `"`))
	}
	return nil
}

// tableErrors is every error of the table's parameters selected by keep, in order.
func tableErrors(p Params, keep func(Param) bool) []error {
	var errs []error
	valid := map[string]bool{}
	for _, d := range paramTable {
		if !keep(d) {
			continue
		}
		err := d.check(&p)
		if err == nil && d.Cross != nil {
			err = d.Cross(p, valid)
		}
		valid[d.Key] = err == nil
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}
