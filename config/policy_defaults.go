package config

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/debi-scaler/debi/forecast"
	"github.com/debi-scaler/debi/policy"
	"github.com/debi-scaler/debi/scaling"
)

// policyDefaults fills and checks one policy, appending each independent error to errs. It
// reports whether the name and the target are valid, for the checks across policies.
func (c *Config) policyDefaults(p *Policy, path string, given givenKeys, errs *errList) (nameOK, targetOK bool) {
	nameOK, targetOK = policyIdentity(p, path, errs)
	policyAlgorithm(p, path, errs)
	c.policyParams(p, path, given, errs)
	c.policyTiming(p, path, errs)
	if p.FallbackModel != "" {
		c.checkFallback(p, path, errs)
	}
	c.policyQueries(p, path, targetOK, errs)
	return nameOK, targetOK
}

// policyIdentity fills and checks the policy's name and target, reporting whether each is
// valid.
func policyIdentity(p *Policy, path string, errs *errList) (nameOK, targetOK bool) {
	nameOK, targetOK = true, true
	if strings.TrimSpace(p.Name) == "" {
		errs.addf(path+".name", "required")
		nameOK = false
	}
	if p.Target.APIVersion == "" {
		p.Target.APIVersion = "apps/v1"
	}
	if p.Target.Kind == "" {
		p.Target.Kind = "Deployment"
	}
	if p.Target.Namespace == "" {
		errs.addf(path+".target.namespace", "required")
		targetOK = false
	}
	if p.Target.Name == "" {
		errs.addf(path+".target.name", "required")
		targetOK = false
	}
	if !p.Target.normalize(path+".target", errs) {
		targetOK = false
	}
	if nameOK && (!policyNameRe.MatchString(p.Name) || len(p.Name) > 253) {
		errs.addf(path+".name", "%q must be letters, digits, '.', '_' or '-', starting with a letter or digit, at most 253 characters (it is a label value and part of queries)", p.Name)
		nameOK = false
	}
	return nameOK, targetOK
}

// policyAlgorithm fills and checks the policy's algorithm and model, the algorithm in its
// canonical name.
func policyAlgorithm(p *Policy, path string, errs *errList) {
	if p.Algorithm == "" {
		p.Algorithm = DefaultAlgorithm
	}
	if strings.EqualFold(strings.TrimSpace(p.Algorithm), "budget") && strings.TrimSpace(p.Model) != "" {
		// As debi takes its model from model:, so does budget (policy.Parse names budget's
		// model only in the algorithm's name).
		p.Algorithm = strings.TrimSpace(p.Model) + "-budget"
	}
	if spec, err := policy.Parse(p.Algorithm, p.Model); err != nil {
		errs.add(&FieldError{Path: path + ".algorithm", Err: err})
	} else if p.Model != "" && spec.Model != "" && !strings.EqualFold(p.Model, spec.Model) {
		errs.addf(path+".model", "%q contradicts algorithm %q, which names model %q", p.Model, p.Algorithm, spec.Model)
	} else {
		p.Algorithm = spec.Name
		if spec.Model != "" {
			p.Model = spec.Model
		}
	}
}

// policyParams fills and checks the policy's parameters: scaling, budget, the metrics policy
// and EVT.
//
// Defaults: every field the policy leaves out takes the paper's or Kubernetes' default, so a
// policy names only what it changes; a field it sets keeps its value, zero included, and is
// validated as it is.
func (c *Config) policyParams(p *Policy, path string, given givenKeys, errs *errList) {
	given = given.merge(p.given)
	fillUnset(&p.Scaling, scaling.DefaultParams(), given.Scaling)
	budgetKeys, _ := given.Scaling["budget"].(map[string]any)
	fillUnset(&p.Scaling.Budget, scaling.DefaultBudgetParams(), budgetKeys)
	// One error per bad field (scaling.budget.* among them: BudgetParams name their fields
	// budget.u_sla …, so the path is scaling.budget.u_sla).
	errs.addSubfields(path+".scaling", p.Scaling.Validate())
	fillUnset(&p.Budget, forecast.DefaultCalibratorConfig(), given.Budget)
	_, neighboursSet := given.Budget["quantile_neighbours"]
	p.Budget = p.Budget.WithMethodDefaults(neighboursSet)
	errs.addSubfields(path+".budget", p.Budget.Validate())
	// An invalid metrics policy falls back to its defaults with a warning (the Elastic Scaler's
	// rule: a bad setting never stops the scaler).
	if p.Metrics.Window == 0 { // unset, not invalid
		p.Metrics.Window = scaling.DefaultMetricsPolicy().Window
	}
	var warns []string
	p.Metrics.MetricsPolicy, warns = p.Metrics.MetricsPolicy.Normalize()
	for _, w := range warns {
		c.warnings = append(c.warnings, fmt.Sprintf("%s.metrics.%s", path, w))
	}
	// EVT: a setting left at zero takes its default (none of them has a zero that means
	// something).
	def := forecast.DefaultPOTConfig()
	for _, d := range p.EVT.Table() {
		switch {
		case d.Str != nil && *d.Str(&p.EVT) == "":
			*d.Str(&p.EVT) = *d.Str(&def)
		case d.Str == nil && d.Value(&p.EVT) == 0:
			d.SetValue(&p.EVT, d.Value(&def))
		}
	}
	errs.addSubfields(path+".evt", p.EVT.Validate())
}

// policyTiming fills and checks the policy's history and its step, the retraining, the lead
// time, the season and the observation window.
func (c *Config) policyTiming(p *Policy, path string, errs *errList) {
	if p.History == 0 {
		p.History = 760
	}
	if p.History < 2 || p.History > 11000 {
		// Prometheus answers a range query with at most 11,000 points per series.
		errs.addf(path+".history", "must be in [2, 11000] steps, got %d", p.History)
	}
	if p.Retrain == 0 {
		p.Retrain = 120
	}
	if p.Retrain < 0 {
		errs.addf(path+".retrain", "must not be negative, got %d", p.Retrain)
	}
	iv := c.Global.Interval
	if p.HistoryStep == 0 {
		// 5m, rounded up to whole intervals.
		p.HistoryStep = (DefaultHistoryStep + iv - 1) / iv * iv
	}
	switch {
	case c.intervalBad: // reported at global.interval: only what is wrong whatever it is
		if p.HistoryStep < 0 {
			errs.addf(path+".history_step", "must be a positive multiple of global.interval, got %v", p.HistoryStep)
		}
	case p.HistoryStep < iv || p.HistoryStep%iv != 0:
		errs.addf(path+".history_step", "must be a positive multiple of global.interval (%v), got %v", iv, p.HistoryStep)
	}
	if p.LeadTime == 0 {
		p.LeadTime, p.LeadTimeMeasured = DefaultLeadTime, true
	}
	if p.LeadTime < 0 {
		errs.addf(path+".lead_time", "must not be negative, got %v", p.LeadTime)
	}
	if p.Season == 0 {
		p.Season = DefaultSeason
	}
	if p.ObservationWindow == 0 {
		p.ObservationWindow = time.Minute
	}
	if p.ObservationWindow < 0 {
		errs.addf(path+".observation_window", "must not be negative, got %v", p.ObservationWindow)
	}
	if p.Season < 0 {
		errs.addf(path+".season", "must not be negative, got %v", p.Season)
	}
	if p.Forecast.Season < 0 {
		errs.addf(path+".forecast.season", "must not be negative, got %d", p.Forecast.Season)
	}
}

// checkFallback validates fallback_model: a known model, on a policy with a model, that needs
// fewer history steps than the policy's model (else it would never forecast first).
func (c *Config) checkFallback(p *Policy, path string, errs *errList) {
	fpath := path + ".fallback_model"
	spec, err := policy.Parse(p.Algorithm, p.Model)
	if err != nil {
		return // reported at algorithm
	}
	if spec.Model == "" {
		errs.addf(fpath, "algorithm %q has no model to fall back from", p.Algorithm)
		return
	}
	if !forecast.Known(p.FallbackModel) {
		errs.addf(fpath, "unknown model %q (known: %s)", p.FallbackModel, strings.Join(forecast.Names(), ", "))
		return
	}
	if p.HistoryStep <= 0 || p.Season < 0 || p.Forecast.Season < 0 {
		return // reported at their own fields
	}
	mc := p.Forecast
	if mc.Season == 0 {
		mc.Season = policy.SeasonSteps(p.Season, p.HistoryStep)
	}
	primary, err := forecast.New(spec.Model, mc)
	if err != nil {
		return // reported at forecast
	}
	fb, err := forecast.New(p.FallbackModel, mc)
	if err != nil {
		errs.add(&FieldError{Path: fpath, Err: err})
		return
	}
	if _, err := forecast.NewFallback(primary, fb); err != nil {
		errs.add(&FieldError{Path: fpath, Err: err})
	}
}

// policyNameRe is what a policy name may be: a label value that needs no escaping anywhere.
var policyNameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// fillUnset copies from def every field of *p that the file leaves out: a field whose YAML key
// is not among the keys set and whose value is zero. It goes by the keys, not by zero values
// alone, so that tolerance: 0, hold: 0s or calibration_gain: 0 stay settings and an explicit
// invalid zero (min_replicas: 0, u_sla: 0) is reported rather than hidden. It walks the fields
// by reflection, so a field added to the struct takes its default without a change here.
func fillUnset[T any](p *T, def T, set map[string]any) {
	v, d := reflect.ValueOf(p).Elem(), reflect.ValueOf(def)
	for i := range v.NumField() {
		f := v.Type().Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || key == "" || key == "-" {
			continue
		}
		if _, given := set[key]; !given && v.Field(i).IsZero() {
			v.Field(i).Set(d.Field(i))
		}
	}
}
