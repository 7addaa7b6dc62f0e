package scaling

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestParamTable: every field of Params (and of its Budget) is declared once in the table, under
// its YAML key, with an accessor that reaches that very field; and the table's bounds are what
// Validate enforces, an explicit zero a setting exactly where the bound allows it.
func TestParamTable(t *testing.T) {
	keys := map[string]reflect.StructField{}
	var walk func(rt reflect.Type, prefix string)
	walk = func(rt reflect.Type, prefix string) {
		for i := range rt.NumField() {
			f := rt.Field(i)
			key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeOf(time.Duration(0)) {
				walk(f.Type, prefix+key+".")
				continue
			}
			keys[prefix+key] = f
		}
	}
	walk(reflect.TypeOf(Params{}), "")
	seen := map[string]bool{}
	for _, d := range (Params{}).Table() {
		if seen[d.Key] {
			t.Errorf("%s declared twice", d.Key)
		}
		seen[d.Key] = true
		f, ok := keys[d.Key]
		if !ok {
			t.Errorf("%s: no such field of Params", d.Key)
			continue
		}
		// The accessor reaches the field: set it through the accessor, read it by reflection.
		var p Params
		switch {
		case d.Float != nil:
			*d.Float(&p) = 0.123
		case d.Dur != nil:
			*d.Dur(&p) = 123
		case d.Int32 != nil:
			*d.Int32(&p) = 123
		case d.Str != nil:
			*d.Str(&p) = "x"
		default:
			t.Errorf("%s: no accessor", d.Key)
			continue
		}
		v := reflect.ValueOf(p)
		for _, part := range strings.Split(d.Key, ".") {
			for i := range v.NumField() {
				if k, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ","); k == part {
					v = v.Field(i)
					break
				}
			}
		}
		if v.IsZero() {
			t.Errorf("%s: the accessor sets another field than %s", d.Key, f.Name)
		}
		if d.Flag == "" && !strings.HasPrefix(d.Key, "budget.u_sla") {
			t.Errorf("%s: no backtest flag", d.Key)
		}
	}
	for k := range keys {
		if !seen[k] {
			t.Errorf("field %s (scaling.%s) is not declared in Params' table", keys[k].Name, k)
		}
	}
	// Zero: allowed by the bound means valid, refused by it means an error naming the key.
	for _, d := range (Params{}).Table() {
		if d.OK == nil {
			continue
		}
		p := DefaultParams()
		switch {
		case d.Float != nil:
			*d.Float(&p) = 0
		case d.Dur != nil:
			*d.Dur(&p) = 0
		case d.Int32 != nil:
			*d.Int32(&p) = 0
		}
		err := p.Validate()
		if d.Key == "scale_up_pods" || d.Key == "scale_up_percent" {
			continue // valid alone; both 0 is the cross-check's error
		}
		mentions := err != nil && strings.Contains(err.Error(), d.Key+" ")
		if d.OK(0) == mentions {
			t.Errorf("%s = 0: bound allows it %v, Validate: %v", d.Key, d.OK(0), err)
		}
	}
}
