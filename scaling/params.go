package scaling

import (
	"fmt"
	"time"

	"github.com/debi-scaler/debi/internal/schema"
)

// Param declares one parameter of Params once (schema.Param): its key in the configuration file
// (scaling.<Key>), whether an ElasticScaler's algorithmConfig may set it (the key without
// underscores, any case: scale_down_stabilization is scaleDownStabilization) or a typed field of
// spec.debi does, its flag in `debi backtest`, its unit, a one-line doc and its bounds. The
// default is DefaultParams'. The configuration's validation (Params.Validate), the ElasticScaler
// keys, the backtest's flags and docs/configuration.md's bounds, keys and flags all come from
// Params'Table.
type Param = schema.Param[Params]

func finite(v float64) bool { return schema.Finite(v) }

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
	{Key: "min_replicas", Flag: "min-replicas", Unit: "replicas", Doc: "N_min: the fewest replicas any algorithm recommends; 0 scales to zero after scale_to_zero_after idle, and needs a wake metric that is not read from the pods.",
		Int32: func(p *Params) *int32 { return &p.MinReplicas }, OK: nonNeg, Want: "must not be negative"},
	{Key: "max_replicas", Flag: "max-replicas", Unit: "replicas", Doc: "N_max: the most replicas any algorithm recommends; at least min_replicas.",
		Int32: func(p *Params) *int32 { return &p.MaxReplicas },
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
		Int32: func(p *Params) *int32 { return &p.ScaleUpPods }, OK: nonNeg, Want: "must not be negative"},
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
	{Key: "budget.u_sla", Spec: "budget.slaUtilization", Unit: "utilization", Doc: "u_sla: a pod is sized to run at most at this utilization; a tick above u_sla·ready·request is overloaded.",
		Float: func(p *Params) *float64 { return &p.Budget.SLAUtilization }, OK: in01c, Want: "must be in (0, 1]"},
	{Key: "budget.hold", Spec: "budget.hold", Flag: "budget.hold", Unit: "duration", Doc: "Under the priced rule (the default), the longest hold the price may choose: it holds its size for 0, 1, 2 or 4 lead times, each alone or also through the ticks after a history point before the nowcast has read it, whichever would have cost least in pods + λ·(overloaded ticks); 0 never holds, not even through those ticks. Under the quantile rule, the least time between the last change of size and a scale-down: the hysteresis that keeps scaling actions at or below the HPA's.",
		Dur: func(p *Params) *time.Duration { return &p.Budget.Hold }, OK: nonNeg, Want: "must not be negative"},
	{Key: "budget.min_saving", Flag: "budget.min-saving", Unit: "fraction", Doc: "Least share of the current size a scale-down must save, on top of at least one pod (0: one pod is enough).",
		Float: func(p *Params) *float64 { return &p.Budget.MinSaving }, OK: in01o, Want: "must be in [0, 1)"},
	{Key: "budget.rule", Spec: "budget.rule", Flag: "budget.rule", Doc: "How budget sizes: quantile (every tick covered at one calibrated level, never below the load now) or priced (the fewest pod-ticks plus a price on each overloaded tick over the lead ahead, the price adapted so that overload tracks the budget).",
		Str: func(p *Params) *string { return (*string)(&p.Budget.Rule) }, Enum: []string{string(RuleQuantile), string(RulePriced)}},
	{Key: "budget.idle", Spec: "budget.idle", Flag: "budget.idle", Doc: "Under the priced rule, what a quiet tick (served at min_replicas whatever overload costs) does to the price: earn lowers it, as any tick served does (the budget is a share of all the time, and what a quiet night or weekend earns is spent on the next rise, in one long episode); hold leaves it where the last load set it (a quiet spell earns nothing, so a workload that idles spends less than its budget over all the time).",
		Str: func(p *Params) *string { return (*string)(&p.Budget.Idle) }, Enum: []string{string(IdleEarn), string(IdleHold)}},
	{Key: "scale_to_zero_after", Flag: "scale-to-zero-after", Unit: "duration", Doc: "With min_replicas 0: how long every wake metric must stay at or below its activation, observed and forecast, before the workload goes to zero (KEDA's cooldownPeriod).",
		Dur: func(p *Params) *time.Duration { return &p.ScaleToZeroAfter }, OK: nonNeg, Want: "must not be negative"},
}

// ParamByKey returns the parameter of that configuration key (scaling.<key>, or budget.<key>).
func ParamByKey(key string) (Param, bool) { return schema.ByKey(paramTable, key) }

// tableErrors is every error of the table's parameters selected by keep, in order.
func tableErrors(p Params, keep func(Param) bool) []error {
	return schema.Errors(paramTable, p, keep)
}
