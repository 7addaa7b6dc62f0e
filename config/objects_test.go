package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// fileWithPolicy is a configuration file with one policy of its own, whose budget hold: 0s and
// scaling.window: 0s are explicit zeros (kept only when validated from the file's keys).
const fileWithPolicy = `
global:
  prometheus_url: http://prometheus:9090
  interval: 15s
  elastic_scalers: {enabled: true, namespaces: [ai-inference]}
webhook:
  mode: shadow
  allow_unauthenticated: true
  policies:
  - {name: web, mode: act}
policies:
- name: web
  target: {namespace: shop, name: web}
  algorithm: budget
  scaling: {window: 0s, budget: {hold: 0s}}
`

func loadFile(t *testing.T) *Config {
	t.Helper()
	c, err := Load([]byte(fileWithPolicy))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestElasticScalersGlobal(t *testing.T) {
	c := loadFile(t)
	if g := c.Global.ElasticScalers; !g.Enabled || !reflect.DeepEqual(g.Namespaces, []string{"ai-inference"}) {
		t.Fatalf("global.elastic_scalers = %+v", g)
	}
	off, err := Load([]byte(strings.Replace(fileWithPolicy, "  elastic_scalers: {enabled: true, namespaces: [ai-inference]}\n", "", 1)))
	if err != nil || off.Global.ElasticScalers.Enabled {
		t.Fatalf("default: %+v %v", off.Global.ElasticScalers, err)
	}
	_, err = Load([]byte(strings.Replace(fileWithPolicy, "[ai-inference]", "[ai-inference, Bad_NS]", 1)))
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Path != "global.elastic_scalers.namespaces[1]" {
		t.Fatalf("bad namespace: %v", err)
	}
}

// TestGuideHPA: Resource cpu Utilization 70 → the recording rules' demand, target 0.7, hpa, in
// shadow mode (the Kubernetes HPA package elasticscaler creates does the scaling).
// TestElasticScalersReloadError: a reload may not change the ElasticScaler watch: turning it on,
// or another set of namespaces while it is on, is refused naming the field; the same set in
// another order, turning it off, or the namespaces of a watch that does not run, are not.
func TestElasticScalersReloadError(t *testing.T) {
	on := func(ns ...string) ElasticScalersConfig { return ElasticScalersConfig{Enabled: true, Namespaces: ns} }
	for _, tc := range []struct {
		name       string
		start, now ElasticScalersConfig
		field      string
	}{
		{"unchanged", on("a", "b"), on("a", "b"), ""},
		{"reordered", on("a", "b"), on("b", "a", "b"), ""},
		{"off, namespaces edited", ElasticScalersConfig{Namespaces: []string{"a"}}, ElasticScalersConfig{Namespaces: []string{"b"}}, ""},
		{"turned on", ElasticScalersConfig{}, on(), "global.elastic_scalers.enabled"},
		{"turned off", on("a"), ElasticScalersConfig{Namespaces: []string{"b"}}, ""},
		{"narrowed", on("a", "b"), on("a"), "global.elastic_scalers.namespaces"},
		{"from every namespace to one", on(), on("a"), "global.elastic_scalers.namespaces"},
		{"widened", on("a"), on("a", "c"), "global.elastic_scalers.namespaces"},
	} {
		err := tc.start.ReloadError(tc.now)
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%s: %v, want no error", tc.name, err)
		case tc.field != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.field+":") || !strings.Contains(err.Error(), "restart")):
			t.Errorf("%s: %v, want an error naming %s and asking for a restart", tc.name, err, tc.field)
		}
	}
}
