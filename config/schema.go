package config

import (
	"time"

	"github.com/debi-scaler/debi/internal/schema"
)

// PolicyParam is one of a policy's own settings (policies[].<Key>): its model and timing, as
// scaling.Params' table declares the scaling parameters (schema.Param).
type PolicyParam = schema.Param[Policy]

// Table is every model and timing setting of Policy. Their checks (policyTiming, checkFallback)
// stay by hand, because they depend on global.interval and on the model; TestSchema
// (cmd/debi) holds them to the rows' bounds.
func (Policy) Table() []PolicyParam { return policyTable }

func nonNegative(v float64) bool { return schema.Finite(v) && v >= 0 }

var policyTable = []PolicyParam{
	{Key: "model", Spec: "model", Doc: "The forecaster of the debi and budget algorithms.",
		Str: func(p *Policy) *string { return &p.Model }},
	{Key: "fallback_model", Spec: "fallbackModel", Flag: "model.fallback", Doc: "A model that forecasts while model waits for the history it needs.",
		Str: func(p *Policy) *string { return &p.FallbackModel }},
	{Key: "history_step", Spec: "historyStep", Unit: "duration", Doc: "The sample period of the model history.",
		Dur: func(p *Policy) *time.Duration { return &p.HistoryStep },
		OK:  func(v float64) bool { return schema.Finite(v) && v > 0 }, Want: "must be a positive multiple of global.interval"},
	{Key: "lead_time", Spec: "leadTime", Unit: "duration", Doc: "The actuation delay the forecast must cover.",
		Dur: func(p *Policy) *time.Duration { return &p.LeadTime }, OK: nonNegative, Want: "must not be negative"},
	{Key: "history", Flag: "history", Unit: "steps", Doc: "History steps the models and the EVT fit see.",
		Int: func(p *Policy) *int { return &p.History },
		OK:  func(v float64) bool { return schema.Finite(v) && v >= 2 && v <= 11000 }, Want: "must be in [2, 11000]"},
	{Key: "retrain", Unit: "steps", Doc: "History steps between model training runs.",
		Int: func(p *Policy) *int { return &p.Retrain }, OK: nonNegative, Want: "must not be negative"},
	{Key: "season", Flag: "season", Unit: "duration", Doc: "The seasonal period of the seasonal models.",
		Dur: func(p *Policy) *time.Duration { return &p.Season }, OK: nonNegative, Want: "must not be negative"},
	{Key: "observation_window", Unit: "duration", Doc: "The window the demand query averages over.",
		Dur: func(p *Policy) *time.Duration { return &p.ObservationWindow }, OK: nonNegative, Want: "must not be negative"},
}
