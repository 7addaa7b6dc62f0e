package webhook

import (
	"context"
	"maps"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/debi-scaler/debi/internal/testenv"
	"go.yaml.in/yaml/v3"
)

// TestAlertUnderEnforcedNamespaceLabel posts the scale alert that debi's rules fire under the
// Prometheus Operator's enforcedNamespaceLabel — its labels read from the promtool test that
// deploy.TestEnforcedNamespaceLabel runs on the rewritten rules, namespace="debi-system" and
// the workload's namespace in exported_namespace — and checks that the webhook scales the
// policy's target (4 -> 6, as in TestAlertDecisionFromPrometheus). With the workload's
// namespace lost (honorLabels true under the enforcement) or naming another namespace, the
// alert is refused.
func TestAlertUnderEnforcedNamespaceLabel(t *testing.T) {
	b, err := os.ReadFile("../deploy/testdata/enforced_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []struct {
					ExpLabels map[string]string `yaml:"exp_labels"`
				} `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	var fired map[string]string
	for _, tc := range file.Tests {
		for _, a := range tc.AlertRuleTest {
			if a.Alertname == "DebiScaleRecommended" && len(a.ExpAlerts) == 1 {
				fired = maps.Clone(a.ExpAlerts[0].ExpLabels)
				fired["alertname"] = a.Alertname
			}
		}
	}
	if fired == nil || fired["namespace"] != "debi-system" || fired["exported_namespace"] != "shop" || fired["policy"] != "web" {
		t.Fatalf("DebiScaleRecommended in enforced_test.yaml = %v, want policy web, namespace debi-system, exported_namespace shop", fired)
	}

	act := newFakeActuator(map[string]int32{"web": 4})
	c := newTestController(t, testConfig(t, testConfigYAML), act, staticQuery(map[string]float64{qWebLoad: 0.9, qWebReplicas: 4}), nil)
	outs, err := c.Alerts(context.Background(), mustDecode(t, testenv.AMPayload("firing", map[string]any{"labels": fired})))
	if err != nil {
		t.Fatalf("alert under enforcement refused: %v", err)
	}
	if len(outs) != 1 || outs[0].Before != 4 || outs[0].After != 6 || !outs[0].Written {
		t.Fatalf("outcomes = %+v, want web 4 -> 6 written", outs)
	}
	if got := act.Writes(); len(got) != 1 || got[0] != "web=6" {
		t.Errorf("writes = %v, want [web=6]", got)
	}

	for _, tc := range []struct {
		name string
		edit func(map[string]string)
		want string
	}{
		{"workload namespace lost", func(l map[string]string) { delete(l, "exported_namespace") }, `label namespace="debi-system" does not match`},
		{"another workload namespace", func(l map[string]string) { l["exported_namespace"] = "kube-system" }, `label exported_namespace="kube-system" does not match`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := maps.Clone(fired)
			tc.edit(l)
			act := newFakeActuator(map[string]int32{"web": 4})
			c := newTestController(t, testConfig(t, testConfigYAML), act, staticQuery(map[string]float64{qWebLoad: 0.9, qWebReplicas: 4}), nil)
			_, err := c.Alerts(context.Background(), mustDecode(t, testenv.AMPayload("firing", map[string]any{"labels": l})))
			if errorCode(err) != http.StatusUnprocessableEntity || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v (code %d), want 422 with %q", err, errorCode(err), tc.want)
			}
			if len(act.Writes()) != 0 {
				t.Fatalf("wrote %v", act.Writes())
			}
		})
	}
}
