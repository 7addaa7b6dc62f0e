package v1alpha1

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

func tidal() *Tidal {
	return &Tidal{Spec: TidalSpec{
		TargetRef: TargetRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
		Triggers: Triggers{Times: &TimeTriggers{Rules: []TimeRule{
			{Name: "day", Cron: "CRON_TZ=Asia/Shanghai 0 0 8 * * *", Replicas: 5},
			{Name: "night", Cron: "0 0 20 * * *", Replicas: 0},
		}}},
	}}
}

func TestValidate(t *testing.T) {
	if errs := tidal().Validate(); len(errs) != 0 {
		t.Fatalf("valid Tidal rejected: %v", errs)
	}
	for _, c := range []struct {
		name   string
		mutate func(*Tidal)
		path   string
		typ    field.ErrorType
	}{
		{"no apiVersion", func(td *Tidal) { td.Spec.TargetRef.APIVersion = "" }, "spec.targetRef.apiVersion", field.ErrorTypeRequired},
		{"bad apiVersion", func(td *Tidal) { td.Spec.TargetRef.APIVersion = "a/b/c" }, "spec.targetRef.apiVersion", field.ErrorTypeInvalid},
		{"no kind", func(td *Tidal) { td.Spec.TargetRef.Kind = "" }, "spec.targetRef.kind", field.ErrorTypeRequired},
		{"no name", func(td *Tidal) { td.Spec.TargetRef.Name = "" }, "spec.targetRef.name", field.ErrorTypeRequired},
		{"no times", func(td *Tidal) { td.Spec.Triggers.Times = nil }, "spec.triggers.times.rules", field.ErrorTypeRequired},
		{"no rules", func(td *Tidal) { td.Spec.Triggers.Times.Rules = nil }, "spec.triggers.times.rules", field.ErrorTypeRequired},
		{"rule without name", func(td *Tidal) { td.Spec.Triggers.Times.Rules[1].Name = "" }, "spec.triggers.times.rules[1].name", field.ErrorTypeRequired},
		{"duplicate name", func(td *Tidal) { td.Spec.Triggers.Times.Rules[1].Name = "day" }, "spec.triggers.times.rules[1].name", field.ErrorTypeDuplicate},
		{"no cron", func(td *Tidal) { td.Spec.Triggers.Times.Rules[0].Cron = " " }, "spec.triggers.times.rules[0].cron", field.ErrorTypeRequired},
		{"negative replicas", func(td *Tidal) { td.Spec.Triggers.Times.Rules[0].Replicas = -1 }, "spec.triggers.times.rules[0].replicas", field.ErrorTypeInvalid},
	} {
		td := tidal()
		c.mutate(td)
		errs := td.Validate()
		if len(errs) != 1 || errs[0].Field != c.path || errs[0].Type != c.typ {
			t.Errorf("%s: want one %s error at %s, got %v", c.name, c.typ, c.path, errs)
		}
	}
}

func TestDeepCopy(t *testing.T) {
	a := tidal()
	n := int32(3)
	a.Status.DesiredReplicas = &n
	b := a.DeepCopy()
	if !reflect.DeepEqual(a, b) {
		t.Fatal("copy differs")
	}
	b.Spec.Triggers.Times.Rules[0].Replicas = 9
	*b.Status.DesiredReplicas = 9
	if a.Spec.Triggers.Times.Rules[0].Replicas != 5 || *a.Status.DesiredReplicas != 3 {
		t.Fatal("the copy shares memory with the original")
	}
}
