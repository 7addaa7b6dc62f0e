// Package schema is the shape of debi's parameter tables: one row per setting of a struct
// (scaling.Params, forecast.CalibratorConfig, forecast.POTConfig, forecast.Config and the
// policy's own settings), naming its key in the configuration file, its ElasticScaler field, its
// backtest flag, its unit, a one-line doc and its bounds. The validation, the ElasticScaler's
// algorithmConfig keys, the backtest's flags and docs/configuration.md read the rows;
// config's TestSchema walks every row of every table and checks each against the file, the CRD,
// the flags and the reference.
package schema

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Param declares one setting of the struct S once. The default is the struct's default
// constructor's (scaling.DefaultParams, forecast.DefaultCalibratorConfig, …).
type Param[S any] struct {
	// Key is the setting's YAML key in its section (scaling.<Key>, budget.<Key>, evt.<Key>, …);
	// a dotted key is a field of a nested struct (budget.u_sla of scaling.Params).
	Key string
	// ES: an ElasticScaler algorithmConfig key (the key without underscores, any case).
	ES bool
	// Spec is the path of the ElasticScaler's typed field under spec.debi that sets it
	// ("budget.overloadBudget"), "" when it has none.
	Spec string
	// Flag is the backtest flag (without --), "" when the backtest has none.
	Flag string
	Unit string
	Doc  string
	// One accessor is set, by the field's type.
	Float func(*S) *float64
	Dur   func(*S) *time.Duration
	Int32 func(*S) *int32
	Int   func(*S) *int
	Int64 func(*S) *int64
	Str   func(*S) *string
	// Enum lists a string setting's values.
	Enum []string
	// OK is the setting's bound on its own value (nil: none), Want how an error says it
	// ("must be in (0, 1]"). A zero the bound allows is a setting; one it refuses is an error.
	OK   func(float64) bool
	Want string
	// Cross checks the setting against those before it in the table, given which of them were
	// valid (nil: none); it is skipped when the setting's own bound already failed. A setting
	// whose error has a shape of its own (not "<key> <want>, got <value>") is checked here alone.
	Cross func(s S, valid map[string]bool) error
}

// Finite reports whether v is neither NaN nor infinite.
func Finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// ESKey is the setting's ElasticScaler algorithmConfig key, lower case ("" when it has none).
func (d Param[S]) ESKey() string {
	if !d.ES {
		return ""
	}
	return strings.ReplaceAll(d.Key, "_", "")
}

// Value is the setting's value in s as a float (NaN for a string).
func (d Param[S]) Value(s *S) float64 {
	switch {
	case d.Float != nil:
		return *d.Float(s)
	case d.Dur != nil:
		return float64(*d.Dur(s))
	case d.Int32 != nil:
		return float64(*d.Int32(s))
	case d.Int != nil:
		return float64(*d.Int(s))
	case d.Int64 != nil:
		return float64(*d.Int64(s))
	}
	return math.NaN()
}

// SetValue sets a numeric setting of s to v (a duration in nanoseconds, an integer truncated);
// it does nothing to a string.
func (d Param[S]) SetValue(s *S, v float64) {
	switch {
	case d.Float != nil:
		*d.Float(s) = v
	case d.Dur != nil:
		*d.Dur(s) = time.Duration(v)
	case d.Int32 != nil:
		*d.Int32(s) = int32(v)
	case d.Int != nil:
		*d.Int(s) = int(v)
	case d.Int64 != nil:
		*d.Int64(s) = int64(v)
	}
}

// String renders the setting's value in s.
func (d Param[S]) String(s *S) string {
	switch {
	case d.Float != nil:
		return fmt.Sprint(*d.Float(s))
	case d.Dur != nil:
		return fmt.Sprint(*d.Dur(s))
	case d.Int32 != nil:
		return fmt.Sprint(*d.Int32(s))
	case d.Int != nil:
		return fmt.Sprint(*d.Int(s))
	case d.Int64 != nil:
		return fmt.Sprint(*d.Int64(s))
	case d.Str != nil:
		return fmt.Sprintf("%q", *d.Str(s))
	}
	return ""
}

// Check is the setting's own error in s (its Enum or its bound), or nil.
func (d Param[S]) Check(s *S) error {
	if d.Str != nil && len(d.Enum) > 0 {
		v := *d.Str(s)
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
	if d.OK != nil && !d.OK(d.Value(s)) {
		return fmt.Errorf("%s %s, got %s", d.Key, d.Want, strings.Trim(d.String(s), `"`))
	}
	return nil
}

// Errors is every error of the table's settings in s that keep selects (nil: all), in the
// table's order: each setting's own check, then its Cross check when that passed.
func Errors[S any](table []Param[S], s S, keep func(Param[S]) bool) []error {
	var errs []error
	valid := map[string]bool{}
	for _, d := range table {
		if keep != nil && !keep(d) {
			continue
		}
		err := d.Check(&s)
		if err == nil && d.Cross != nil {
			err = d.Cross(s, valid)
		}
		valid[d.Key] = err == nil
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// ByKey is the row of that key in table.
func ByKey[S any](table []Param[S], key string) (Param[S], bool) {
	for _, d := range table {
		if d.Key == key {
			return d, true
		}
	}
	return Param[S]{}, false
}
