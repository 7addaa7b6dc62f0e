package backtest

import (
	"strings"
	"time"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/policy"
)

// PolicyOptions are o with the settings of a configured policy, for the what-if replay of
// `debi backtest --config.file`: its algorithm (and model) beside o's other policies, its
// scaling parameters (the sweep's HPA and every other policy share them, as on a trace), its
// metrics stabilisation, model, EVT and budget settings, its history and retrain in history
// steps of step, its season, its observation window, and its lead time as the start-up delay
// (the decision delay is in it). request is the CPU request per pod, the demand is in cores
// (Scale 1), and the warm-up is the policy's history, capped at half the samples.
//
// The configured policy itself is replayed with the live runner's configuration
// (config.Policy.RunnerConfig, Options.Runner): the other policies of o use the options.
func PolicyOptions(p *config.Policy, o Options, step time.Duration, request float64, samples int) (Options, string) {
	spec, err := policy.Parse(p.Algorithm, p.Model)
	name := strings.ToLower(p.Algorithm)
	if rc, err := p.RunnerConfig(); err == nil {
		o.Runner = &rc
	}
	if err == nil && spec.Model != "" && strings.EqualFold(name, "debi") {
		o.DebiModel = spec.Model
	}
	if !containsFold(o.Policies, name) {
		o.Policies = append([]string{name}, o.Policies...)
	}
	o.Params = p.Scaling
	o.Metrics = p.Metrics
	o.Model = p.Forecast
	o.POT = p.EVT
	o.Calibration = p.Budget
	o.SLAUtilization = p.Scaling.Budget.SLAUtilization
	o.Request = request
	o.Scale = 1
	o.SamplePeriod = step
	o.History = p.History
	o.Retrain = time.Duration(p.Retrain) * p.HistoryStep
	o.Season = p.Season
	o.MetricWindow = p.ObservationWindow
	o.StartupDelay, o.DecisionDelay = p.LeadTime, 0
	o.Warmup = min(p.History, samples/2)
	return o, name
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}
