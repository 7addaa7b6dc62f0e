package v1alpha1

import (
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate checks a Tidal alone: targetRef's apiVersion, kind and name are required, and every
// rule has a unique name, a cron expression and replicas >= 0. The cron expression itself is
// parsed by the Tidal controller (not written yet), which will report a bad one in status.
func (t *Tidal) Validate() field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	rp := spec.Child("targetRef")
	r := t.Spec.TargetRef
	if r.APIVersion == "" {
		errs = append(errs, field.Required(rp.Child("apiVersion"), ""))
	} else if _, err := schema.ParseGroupVersion(r.APIVersion); err != nil {
		errs = append(errs, field.Invalid(rp.Child("apiVersion"), r.APIVersion, err.Error()))
	}
	if r.Kind == "" {
		errs = append(errs, field.Required(rp.Child("kind"), ""))
	}
	if r.Name == "" {
		errs = append(errs, field.Required(rp.Child("name"), ""))
	}
	tp := spec.Child("triggers", "times")
	if t.Spec.Triggers.Times == nil || len(t.Spec.Triggers.Times.Rules) == 0 {
		return append(errs, field.Required(tp.Child("rules"), "at least one rule is required"))
	}
	names := sets.New[string]()
	for i, rule := range t.Spec.Triggers.Times.Rules {
		p := tp.Child("rules").Index(i)
		switch {
		case rule.Name == "":
			errs = append(errs, field.Required(p.Child("name"), ""))
		case names.Has(rule.Name):
			errs = append(errs, field.Duplicate(p.Child("name"), rule.Name))
		}
		names.Insert(rule.Name)
		if strings.TrimSpace(rule.Cron) == "" {
			errs = append(errs, field.Required(p.Child("cron"), ""))
		}
		if rule.Replicas < 0 {
			errs = append(errs, field.Invalid(p.Child("replicas"), rule.Replicas, "must be greater than or equal to 0"))
		}
	}
	return errs
}
