package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	kingpin "github.com/alecthomas/kingpin/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	esv1 "github.com/debi-scaler/debi/apis/elasticscaler/v1alpha1"
	"github.com/debi-scaler/debi/backtest"
	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/elasticscaler"
	"github.com/debi-scaler/debi/forecast"
	"github.com/debi-scaler/debi/internal/schema"
	"github.com/debi-scaler/debi/scaling"
)

// setting is one row of a parameter table, seen from the policy that holds its struct.
type setting struct {
	path       string // in a policy: scaling.budget.u_sla, budget.overload_budget, evt.tau, lead_time
	key        string // in its table
	es         bool   // an algorithmConfig key
	spec, flag string
	kind       string // float, duration, int or string
	enum       []string
	ok         func(float64) bool
	want       string
	get        func(*config.Policy) any            // float64, or string
	backtest   func(*backtest.Options) (any, bool) // the flag's value in the backtest's options
}

// settings are the rows of table, whose struct is at(p) in a policy and bt(o) in the backtest's
// options (nil: the backtest binds the flag to a field of its own).
func settings[S any](section string, table []schema.Param[S], at func(*config.Policy) *S, bt func(*backtest.Options) *S) []setting {
	var out []setting
	for _, d := range table {
		s := setting{path: section + d.Key, key: d.Key, es: d.ES, spec: d.Spec, flag: d.Flag, enum: d.Enum, ok: d.OK, want: d.Want}
		switch {
		case d.Str != nil:
			s.kind = "string"
		case d.Dur != nil:
			s.kind = "duration"
		case d.Float != nil:
			s.kind = "float"
		default:
			s.kind = "int"
		}
		value := func(v *S) any {
			if d.Str != nil {
				return *d.Str(v)
			}
			return d.Value(v)
		}
		s.get = func(p *config.Policy) any { return value(at(p)) }
		if bt != nil {
			s.backtest = func(o *backtest.Options) (any, bool) { return value(bt(o)), true }
		}
		out = append(out, s)
	}
	return out
}

// allSettings are the rows of every table: scaling.Params', the calibrator's, the POT fit's, the
// models' and the policy's own.
func allSettings() []setting {
	var all []setting
	all = append(all, settings("scaling.", (scaling.Params{}).Table(), func(p *config.Policy) *scaling.Params { return &p.Scaling },
		func(o *backtest.Options) *scaling.Params { return &o.Params })...)
	all = append(all, settings("budget.", (forecast.CalibratorConfig{}).Table(), func(p *config.Policy) *forecast.CalibratorConfig { return &p.Budget },
		func(o *backtest.Options) *forecast.CalibratorConfig { return &o.Calibration })...)
	all = append(all, settings("evt.", (forecast.POTConfig{}).Table(), func(p *config.Policy) *forecast.POTConfig { return &p.EVT },
		func(o *backtest.Options) *forecast.POTConfig { return &o.POT })...)
	all = append(all, settings("forecast.", (forecast.Config{}).Table(), func(p *config.Policy) *forecast.Config { return &p.Forecast },
		func(o *backtest.Options) *forecast.Config { return &o.Model })...)
	policy := settings("", (config.Policy{}).Table(), func(p *config.Policy) *config.Policy { return p }, nil)
	for i := range policy {
		switch policy[i].key {
		case "fallback_model":
			policy[i].backtest = func(o *backtest.Options) (any, bool) { return o.Fallback, true }
		case "history":
			policy[i].backtest = func(o *backtest.Options) (any, bool) { return float64(o.History), true }
		case "season":
			policy[i].backtest = func(o *backtest.Options) (any, bool) { return float64(o.Season), true }
		}
	}
	return append(all, policy...)
}

// notParams are the fields of spec.debi that no table declares: the webhook's handling of the
// object's policy (webhook.policies[]'s mode and pause), not settings of the decision.
var notParams = []string{"mode", "paused", "pausedReplicas"}

// freeStrings are valid non-default values of the string settings without an enum.
var freeStrings = map[string]string{"model": "naive", "fallback_model": "arima"}

const schemaFile = `
policies:
  - name: example
    target: {namespace: default, name: web}
`

// loadWith loads schemaFile with the setting at path (dotted) set to v.
func loadWith(path string, v any) (*config.Policy, error) {
	pol := map[string]any{"name": "example", "target": map[string]any{"namespace": "default", "name": "web"}}
	m := pol
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		sub, ok := m[p].(map[string]any)
		if !ok {
			sub = map[string]any{}
			m[p] = sub
		}
		m = sub
	}
	m[parts[len(parts)-1]] = v
	if path == "fallback_model" {
		// A fallback serves a model that waits for its history; the default, auto, does not.
		pol["model"] = "holtwinters"
	}
	b, err := yaml.Marshal(map[string]any{"policies": []any{pol}})
	if err != nil {
		return nil, err
	}
	c, err := config.Load(b)
	if err != nil {
		return nil, err
	}
	return &c.Policies[0], nil
}

// render is v (float64 or string) as the file writes a setting of kind.
func render(kind string, v any) any {
	switch kind {
	case "duration":
		return time.Duration(v.(float64)).String()
	case "int":
		return int64(v.(float64))
	}
	return v
}

// text is v as a flag or an object's decimal string writes it.
func text(kind string, v any) string {
	if str, ok := v.(string); ok {
		return str // a string, or a malformed number or duration
	}
	switch kind {
	case "float":
		return strconv.FormatFloat(v.(float64), 'g', -1, 64)
	case "string":
		return v.(string)
	}
	return fmt.Sprint(render(kind, v))
}

// candidates are values to try as a valid non-default setting, def being the default.
func (s setting) candidates(def any) []any {
	if s.kind == "string" {
		var out []any
		for _, e := range s.enum {
			if e != def {
				out = append(out, e)
			}
		}
		if v, ok := freeStrings[s.key]; ok {
			out = append(out, v)
		}
		return out
	}
	d := def.(float64)
	var vs []float64
	switch s.kind {
	case "float":
		vs = []float64{d * 1.5, d / 2, d + 0.01, d - 0.01, 0.01}
	case "duration":
		vs = []float64{2 * d, d / 2, d + float64(time.Second), float64(time.Minute)}
	default:
		vs = []float64{d + 1, 2 * d, d - 1, 2}
	}
	var out []any
	for _, v := range vs {
		if v != d && (s.ok == nil || s.ok(v)) {
			out = append(out, v)
		}
	}
	return out
}

// bad is a value its row's own check refuses (nil: the row has no bound).
func (s setting) bad() any {
	if all := s.bads(); len(all) > 0 {
		return all[0]
	}
	return nil
}

// bads are values its row's own check refuses, below and above its bound: -1, the ends of the
// common bounds and a huge value (integers only for an integer or a duration; never 0, which is
// the default of several settings).
func (s setting) bads() []any {
	switch {
	case s.kind == "string" && len(s.enum) > 0:
		return []any{"no-such-value"}
	case s.key == "fallback_model":
		return []any{"no-such-model"}
	case s.ok == nil:
		return nil
	}
	var out []any
	for _, v := range []float64{-1, 0.5, 1, 100.5, 1e12} {
		if (s.kind == "float" || v == math.Trunc(v)) && !s.ok(v) {
			out = append(out, v)
		}
	}
	return out
}

// TestSchema walks every row of every parameter table (scaling.Params, forecast.CalibratorConfig,
// forecast.POTConfig, forecast.Config, config.Policy) and checks, for each: its key in the
// configuration file takes a valid non-default value to the policy's struct, and a value out of
// its bounds (or enum) fails naming policies[0].<its path>; the ElasticScaler's field it names
// (spec.debi, or algorithmConfig) exists in the CRD with a type that fits, takes the value to
// the same field, and reports the bad value at the object's path; its backtest flag exists and
// sets the backtest's field; docs/configuration.md has its row with its bound, ElasticScaler
// field and flag. Every field of the CRD's spec.debi is some row's, or one of notParams.
func TestSchema(t *testing.T) {
	base, err := loadWith("name", "example")
	if err != nil {
		t.Fatal(err)
	}
	crd := crdDebi(t)
	doc := docSections(t)
	claimed := map[string]bool{}
	for _, s := range allSettings() {
		t.Run(s.path, func(t *testing.T) {
			good := s.checkFile(t, s.get(base))
			if s.spec != "" {
				claimed[s.spec] = true
				s.checkCRD(t, crd)
				if good != nil {
					s.checkObject(t, "spec.debi."+s.spec, good)
				}
			}
			if s.es && good != nil {
				s.checkObject(t, "algorithmConfig", good)
			}
			if s.flag != "" && good != nil {
				s.checkFlag(t, good)
			}
			s.checkDoc(t, doc)
		})
	}
	for _, leaf := range crdLeaves(crd, "") {
		if !claimed[leaf] && !slices.Contains(notParams, leaf) {
			t.Errorf("spec.debi.%s is declared by no table (and is not in notParams)", leaf)
		}
	}
}

// checkFile loads a non-default valid value and a bad one; it returns the valid value (nil when
// none was found).
func (s setting) checkFile(t *testing.T, def any) any {
	var good any
	for _, v := range s.candidates(def) {
		if p, err := loadWith(s.path, render(s.kind, v)); err == nil && s.get(p) == v {
			good = v
			break
		}
	}
	if good == nil {
		t.Errorf("no valid value other than the default %v reaches the policy's field", def)
	}
	for _, bad := range s.bads() {
		_, err := loadWith(s.path, render(s.kind, bad))
		if err == nil || !strings.Contains(err.Error(), "policies[0]."+s.path+":") {
			t.Errorf("%s = %v: %v, want an error at policies[0].%s", s.key, bad, err, s.path)
		}
	}
	if s.bad() == nil && (s.ok != nil || len(s.enum) > 0) {
		t.Errorf("a bound or an enum, and no value it refuses")
	}
	return good
}

// crdDebi is the schema of spec.debi in the ElasticScaler CRD.
func crdDebi(t *testing.T) map[string]any {
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "crds", "elasticscaler.io_elasticscalers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	if len(crd.Spec.Versions) != 1 {
		t.Fatalf("%d versions; the test reads the one", len(crd.Spec.Versions))
	}
	debi := crdProp(crd.Spec.Versions[0].Schema.OpenAPIV3Schema, "spec.debi")
	if debi == nil {
		t.Fatal("no spec.debi in the CRD")
	}
	return debi
}

// crdProp is the schema of the property at dotted path under s (nil when none).
func crdProp(s map[string]any, path string) map[string]any {
	for _, part := range strings.Split(path, ".") {
		props, _ := s["properties"].(map[string]any)
		s, _ = props[part].(map[string]any)
		if s == nil {
			return nil
		}
	}
	return s
}

// crdLeaves are the paths of the fields of s that hold no properties of their own.
func crdLeaves(s map[string]any, prefix string) []string {
	props, _ := s["properties"].(map[string]any)
	var out []string
	for name, sub := range props {
		sm, _ := sub.(map[string]any)
		if _, nested := sm["properties"]; nested {
			out = append(out, crdLeaves(sm, prefix+name+".")...)
			continue
		}
		out = append(out, prefix+name)
	}
	return out
}

// checkCRD: the CRD has the row's field, an integer for an integer, a string for a duration
// (metav1.Duration), a decimal string for a number (the API's convention; changing it to a
// number would break the stored objects, see docs/elastic-scaler.md), a string with the row's
// enum (when the CRD lists one) for a string.
func (s setting) checkCRD(t *testing.T, crd map[string]any) {
	f := crdProp(crd, s.spec)
	if f == nil {
		t.Errorf("the CRD has no spec.debi.%s", s.spec)
		return
	}
	want := map[string]string{"int": "integer", "float": "string", "duration": "string", "string": "string"}[s.kind]
	if f["type"] != want {
		t.Errorf("spec.debi.%s is of type %v, want %s", s.spec, f["type"], want)
	}
	if e, ok := f["enum"].([]any); ok {
		var got []string
		for _, v := range e {
			got = append(got, fmt.Sprint(v))
		}
		if !slices.Equal(got, s.enum) {
			t.Errorf("spec.debi.%s: the CRD's enum %v, the table's %v", s.spec, got, s.enum)
		}
	}
}

// checkObject sets the row's value on an ElasticScaler, at spec.debi.<spec> or as an
// algorithmConfig key, and checks it reaches the policy's field; and that the bad value is
// refused at that path of the object.
func (s setting) checkObject(t *testing.T, where string, good any) {
	p, err := s.translate(t, where, good)
	if err != nil {
		t.Errorf("%s = %v: %v", where, good, err)
	} else if got := s.get(p); got != good {
		t.Errorf("%s = %v reaches %s as %v", where, good, s.path, got)
	}
	bad := s.bad()
	if bad == nil || s.key == "model" {
		return
	}
	path := where
	if where == "algorithmConfig" {
		path = "spec.trigger.metricsTrigger.algorithmConfig"
	}
	if _, err := s.translate(t, where, bad); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("%s = %v: %v, want an error at %s", where, bad, err, path)
	}
	if s.kind == "float" || s.kind == "duration" && where == "algorithmConfig" {
		// A number (a duration of algorithmConfig) is a string in the object: one that does not
		// parse is refused. (spec.debi's durations are metav1.Duration: the typed client's
		// decoding refuses them.)
		if _, err := s.translate(t, where, "not-a-number"); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s = \"not-a-number\": %v, want an error at %s", where, err, path)
		}
	}
}

// translate is the policy of an ElasticScaler (guide-custom-algorithm.yaml, BUDGET) with the
// row's value v at where, merged into schemaFile's configuration.
func (s setting) translate(t *testing.T, where string, v any) (*config.Policy, error) {
	b, err := os.ReadFile(filepath.Join("..", "..", "apis", "testdata", "guide-custom-algorithm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var es esv1.ElasticScaler
	if err := yaml.UnmarshalStrict(b, &es); err != nil {
		t.Fatal(err)
	}
	es.CreationTimestamp = metav1.NewTime(time.Unix(1000, 0))
	mt := es.Spec.Trigger.MetricsTrigger
	mt.ScalingAlgorithm = "BUDGET"
	mt.AlgorithmConfig = map[string]string{}
	if where == "algorithmConfig" {
		mt.AlgorithmConfig[s.esName()] = text(s.kind, v)
	} else {
		val := any(text(s.kind, v))
		if s.kind == "int" {
			val = render(s.kind, v)
		}
		spec := map[string]any{}
		m, parts := spec, strings.Split(s.spec, ".")
		for _, p := range parts[:len(parts)-1] {
			m[p] = map[string]any{}
			m = m[p].(map[string]any)
		}
		m[parts[len(parts)-1]] = val
		j, _ := json.Marshal(spec)
		es.Spec.Debi = &esv1.DebiSpec{}
		if err := json.Unmarshal(j, es.Spec.Debi); err != nil {
			return nil, err
		}
	}
	if s.key == "fallback_model" {
		// A fallback serves a model that waits for its history; the default, auto, does not.
		if es.Spec.Debi == nil {
			es.Spec.Debi = &esv1.DebiSpec{}
		}
		es.Spec.Debi.Model = "holtwinters"
	}
	op, _, err := elasticscaler.TranslateElasticScaler(&es)
	if err != nil {
		return nil, err
	}
	c, err := config.Load([]byte(schemaFile))
	if err != nil {
		t.Fatal(err)
	}
	c, errs := c.WithPolicies([]config.ObjectPolicy{op})
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	p, ok := c.PolicyByName(op.Policy.Name)
	if !ok {
		t.Fatalf("no policy %s", op.Policy.Name)
	}
	return p, nil
}

// esName is the row's algorithmConfig key as the guide writes it: camel case.
func (s setting) esName() string {
	parts := strings.Split(s.key, "_")
	for i := 1; i < len(parts); i++ {
		parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
	}
	return strings.Join(parts, "")
}

// checkFlag: the backtest has the row's flag, and --flag=<value> sets the backtest's field.
func (s setting) checkFlag(t *testing.T, good any) {
	app := kingpin.New("debi", "")
	cmd := app.Command("backtest", "")
	o := backtest.DefaultOptions()
	_, _, _, _, finish := backtestFlags(cmd, &o)
	if cmd.GetFlag(s.flag) == nil {
		t.Errorf("debi backtest has no --%s", s.flag)
		return
	}
	if _, err := app.Parse([]string{"backtest", "--" + s.flag + "=" + text(s.kind, good)}); err != nil {
		t.Errorf("--%s=%v: %v", s.flag, text(s.kind, good), err)
		return
	}
	finish()
	if s.backtest == nil {
		t.Errorf("--%s: the test does not know the backtest's field", s.flag)
	} else if got, _ := s.backtest(&o); got != good {
		t.Errorf("--%s=%v sets %v", s.flag, text(s.kind, good), got)
	}
}

// docSections are docs/configuration.md's sections by their path.
func docSections(t *testing.T) map[string]string {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, s := range strings.Split(string(b), "\n## ")[1:] {
		title, body, _ := strings.Cut(s, "\n")
		out[strings.Trim(title, "`")] = body
	}
	return out
}

// checkDoc: docs/configuration.md has the row's line in its section, naming its bound, its
// ElasticScaler field and its backtest flag.
func (s setting) checkDoc(t *testing.T, doc map[string]string) {
	section, key := "policies[]", s.path
	if i := strings.LastIndex(s.path, "."); i >= 0 {
		section, key = "policies[]."+s.path[:i], s.path[i+1:]
	}
	var line string
	for _, l := range strings.Split(doc[section], "\n") {
		if strings.HasPrefix(l, "| `"+key+"` |") {
			line = l
		}
	}
	if line == "" {
		t.Errorf("docs/configuration.md: no row %s in section %s", key, section)
		return
	}
	var want []string
	if s.want != "" {
		want = append(want, s.want)
	}
	if s.spec != "" {
		want = append(want, "`spec.debi."+s.spec+"`")
	}
	if s.es {
		want = append(want, "`algorithmConfig."+s.esName()+"`")
	}
	if s.flag != "" {
		want = append(want, "`--"+s.flag+"`")
	}
	for _, w := range want {
		if !strings.Contains(line, w) {
			t.Errorf("docs/configuration.md's row %s lacks %s: %s", s.path, w, line)
		}
	}
}

// TestSchemaComplete: every field the file can set in the calibrator's, the POT fit's and the
// models' structs is a row of its table, and every row a field (scaling.TestParamTable holds
// scaling.Params' table so); so TestSchema walks all of them.
func TestSchemaComplete(t *testing.T) {
	for _, tc := range []struct {
		typ  reflect.Type
		keys []string
	}{
		{reflect.TypeOf(forecast.CalibratorConfig{}), tableKeys((forecast.CalibratorConfig{}).Table())},
		{reflect.TypeOf(forecast.POTConfig{}), tableKeys((forecast.POTConfig{}).Table())},
		{reflect.TypeOf(forecast.Config{}), tableKeys((forecast.Config{}).Table())},
	} {
		var fields []string
		for i := range tc.typ.NumField() {
			if k, _, _ := strings.Cut(tc.typ.Field(i).Tag.Get("yaml"), ","); k != "" && k != "-" {
				fields = append(fields, k)
			}
		}
		slices.Sort(fields)
		slices.Sort(tc.keys)
		if !slices.Equal(fields, tc.keys) {
			t.Errorf("%s: fields %v, table %v", tc.typ, fields, tc.keys)
		}
	}
}

func tableKeys[S any](table []schema.Param[S]) []string {
	var out []string
	for _, d := range table {
		out = append(out, d.Key)
	}
	return out
}
