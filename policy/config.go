package policy

import (
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/debi-scaler/debi/forecast"
	"github.com/debi-scaler/debi/scaling"
)

// LoadMode says which load a policy feeds to its rule (METHOD §6).
type LoadMode string

// Load modes.
const (
	LoadObserved  LoadMode = "observed"  // W1
	LoadForecast  LoadMode = "forecast"  // max(W2, W1)
	LoadEffective LoadMode = "effective" // max(min(W2, W3), W1)
	// LoadBudget feeds budget the calibrated upper quantile of the demand over the lead time
	// (METHOD §9), the observed load as its floor, and the quantile over the lead time plus
	// the hold to its scale-down gate.
	LoadBudget LoadMode = "budget"
)

// DefaultDebiModel is the forecaster of the plain "debi" policy when none is configured.
const DefaultDebiModel = "holtwinters"

// DefaultBudgetModel is the forecaster of the plain "budget" policy: forecast.Auto, whichever of
// Holt-Winters, ARIMA and the last value has forecast the recent history best.
const DefaultBudgetModel = "auto"

// Spec is a parsed policy name.
type Spec struct {
	Name      string   `json:"name"`
	Algorithm string   `json:"algorithm"`
	Model     string   `json:"model,omitempty"`
	Load      LoadMode `json:"load"`
	// Raw feeds the observed demand to the rule as it comes, without the metrics policy's
	// stabilisation: Kubernetes' HPA acts on the metrics-server value itself.
	Raw bool `json:"raw,omitempty"`
}

// Parse reads a policy name: "hpa", "apa", "debi" (Algorithm 2 on the effective load with
// DefaultDebiModel, or the model given by debiModel), "<model>-debi", "<model>-hpa" (HPA rule on
// max(W2, W1)) and "evt-<model>-hpa" (HPA rule on the effective load). Names are
// case-insensitive; models must be registered in package forecast.
func Parse(name, debiModel string) (Spec, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	if debiModel == "" {
		debiModel = DefaultDebiModel
	}
	model := func(m string) error {
		if !forecast.Known(m) {
			return fmt.Errorf("policy %q: unknown model %q (known: %s)", name, m, strings.Join(forecast.Names(), ", "))
		}
		return nil
	}
	switch {
	case n == "hpa":
		return Spec{Name: n, Algorithm: n, Load: LoadObserved, Raw: true}, nil
	case n == "apa":
		return Spec{Name: n, Algorithm: n, Load: LoadObserved}, nil
	case n == "debi":
		return Spec{Name: n, Algorithm: "debi", Model: strings.ToLower(debiModel), Load: LoadEffective}, model(debiModel)
	case n == "budget":
		return Spec{Name: n, Algorithm: "budget", Model: DefaultBudgetModel, Load: LoadBudget}, nil
	case strings.HasSuffix(n, "-budget") && len(n) > len("-budget"):
		m := strings.TrimSuffix(n, "-budget")
		return Spec{Name: n, Algorithm: "budget", Model: m, Load: LoadBudget}, model(m)
	case strings.HasPrefix(n, "evt-") && strings.HasSuffix(n, "-hpa") && len(n) > len("evt--hpa"):
		m := strings.TrimSuffix(strings.TrimPrefix(n, "evt-"), "-hpa")
		return Spec{Name: n, Algorithm: "hpa", Model: m, Load: LoadEffective}, model(m)
	case strings.HasSuffix(n, "-hpa") && len(n) > len("-hpa"):
		m := strings.TrimSuffix(n, "-hpa")
		return Spec{Name: n, Algorithm: "hpa", Model: m, Load: LoadForecast}, model(m)
	case strings.HasSuffix(n, "-debi") && len(n) > len("-debi"):
		m := strings.TrimSuffix(n, "-debi")
		return Spec{Name: n, Algorithm: "debi", Model: m, Load: LoadEffective}, model(m)
	}
	return Spec{}, fmt.Errorf("unknown policy %q: want hpa, apa, debi, budget, <model>-debi, <model>-hpa, evt-<model>-hpa or <model>-budget with a model in %s",
		name, strings.Join(forecast.Names(), ", "))
}

// Config is everything a Runner needs.
type Config struct {
	Spec    Spec
	Params  scaling.Params
	Metrics scaling.MetricsPolicy
	// Request is the CPU request of one pod, R, in cores.
	Request float64
	// Step is the sample period of the history: one history point per step. Step may be called
	// more often (every controller tick); a new history point, and a new forecast, is taken
	// when a new step begins, and between them the latest forecast stands.
	Step time.Duration
	// LeadSteps is the forecast horizon h in steps (at least 1): W2 is the largest forecast over
	// t+1 … t+h (METHOD §2). Horizon computes it from the actuation delay.
	LeadSteps int
	// History is how many steps of demand the models and the EVT fit see (760).
	History int
	// Retrain is the number of steps between training runs (0: train once).
	Retrain int
	// Season is the seasonal period of the seasonal models as a duration (default one day),
	// converted to steps of Step unless Model.Season is set.
	Season time.Duration
	// LeadTime is the actuation delay (decision delay + pod start-up) the budget policy sizes
	// for; 0 takes (LeadSteps − 1)·Step.
	LeadTime time.Duration
	// ObservationWindow is the window the observed demand is a mean over (a rate(...[1m]));
	// the budget policy recovers the demand now from the observation by inverting that mean
	// (tickBudget.deconvolve; 0: the observation is the demand now).
	ObservationWindow time.Duration
	Model             forecast.Config
	POT               forecast.POTConfig
	// Calibration is the budget policy's quantile and its online calibration (METHOD §9).
	Calibration forecast.CalibratorConfig
	// AsyncTraining trains a clone of the model in the background and swaps it in when done
	// (live); otherwise training runs inside Step (backtest, deterministic).
	AsyncTraining bool
	// Unapplied says that nothing applies the recommendations (a shadow-mode or paused policy):
	// a stateful algorithm then takes its state from the observed changes of size
	// (scaling.Unapplied).
	Unapplied bool
	// Forecaster, when set, is the model instead of Spec.Model's registry entry (Spec.Model
	// then only names it): the backtest's diagnostic forecasters that know the future are not
	// in the registry, so that no configuration can pick them.
	Forecaster forecast.Forecaster
	// Fallback, when set, names a model that forecasts while Spec.Model waits for the history
	// it needs (forecast.Fallback): Holt-Winters waits two seasons, ARIMA a few dozen points.
	// Measured out of sample (docs/results-budget.md).
	Fallback string
	// Wake says this metric can wake the workload from zero (a policy with min_replicas 0):
	// it is read from outside the pods — a request rate, a queue, an External metric — so it
	// is there at zero pods. It is active while its load, observed or the one the rule sizes
	// for (a forecasting policy's forecast over the lead time), is above Activation, in the
	// metric's unit (KEDA's activationThreshold).
	Wake       bool
	Activation float64
	Logger     *slog.Logger
}

// DefaultConfig returns the paper's settings for the policy spec.
func DefaultConfig(spec Spec) Config {
	return Config{
		Spec:      spec,
		Params:    scaling.DefaultParams(),
		Metrics:   scaling.DefaultMetricsPolicy(),
		Request:   5,
		Step:      time.Minute,
		LeadSteps: 1,
		History:   760,
		Retrain:   120,
		Season:    24 * time.Hour,
		POT:       forecast.DefaultPOTConfig(),

		Calibration: forecast.DefaultCalibratorConfig(),
	}
}

// Horizon is the forecast horizon h in steps that covers an actuation delay (decision delay +
// pod start-up, METHOD §2 [fix]): capacity ordered now serves only after lead, so the forecast
// must reach past it, h = ceil(lead/step) + 1.
func Horizon(lead, step time.Duration) int {
	if step <= 0 || lead <= 0 {
		return 1
	}
	return int((lead+step-1)/step) + 1
}

// SeasonSteps converts a seasonal period to steps of step (at least 1).
func SeasonSteps(season, step time.Duration) int {
	if season <= 0 || step <= 0 {
		return 0
	}
	return max(1, int((season+step/2)/step))
}

// Validate checks the configuration; errors name the field.
func (c Config) Validate() error {
	switch {
	case !(c.Request > 0) || math.IsInf(c.Request, 0):
		return fmt.Errorf("request must be a positive number of cores, got %v", c.Request)
	case c.Step <= 0:
		return fmt.Errorf("step must be positive, got %v", c.Step)
	case c.LeadSteps < 1:
		return fmt.Errorf("lead_steps must be at least 1, got %d", c.LeadSteps)
	case c.History < 2:
		return fmt.Errorf("history must be at least 2 steps, got %d", c.History)
	case c.Retrain < 0:
		return fmt.Errorf("retrain must not be negative, got %d", c.Retrain)
	case c.Season < 0:
		return fmt.Errorf("season must not be negative, got %v", c.Season)
	case c.Wake && (!(c.Activation >= 0) || math.IsInf(c.Activation, 0)):
		return fmt.Errorf("activation must be a number, not negative, got %v", c.Activation)
	}
	if err := c.Params.Validate(); err != nil {
		return err
	}
	if c.Params.Budget.Rule == scaling.RulePriced && c.Spec.Load == LoadBudget && c.Calibration.Scoring != forecast.ScoringTick {
		return fmt.Errorf("budget.rule %q prices every tick: it needs budget.scoring %q, got %q", scaling.RulePriced, forecast.ScoringTick, c.Calibration.Scoring)
	}
	if c.Spec.Load == LoadEffective {
		if err := c.POT.Validate(); err != nil {
			return scaling.PrefixErrors("evt: ", err)
		}
	}
	if c.Spec.Load == LoadBudget {
		if err := c.Calibration.Validate(); err != nil {
			return scaling.PrefixErrors("budget: ", err)
		}
	}
	if c.Fallback != "" {
		if c.Spec.Model == "" {
			return fmt.Errorf("fallback: policy %s has no model to fall back from", c.Spec.Name)
		}
		if !forecast.Known(c.Fallback) {
			return fmt.Errorf("fallback: unknown model %q (known: %s)", c.Fallback, strings.Join(forecast.Names(), ", "))
		}
	}
	if !scaling.Known(c.Spec.Algorithm) {
		return fmt.Errorf("unknown algorithm %q", c.Spec.Algorithm)
	}
	return nil
}
