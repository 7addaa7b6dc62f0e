package webhook

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/prometheus/alertmanager/template"
)

// upstreamMessage mirrors Alertmanager's notify/webhook.Message (which would pull in every
// notifier's dependencies) around the upstream template.Data it embeds.
type upstreamMessage struct {
	*template.Data
	Version         string `json:"version"`
	GroupKey        string `json:"groupKey"`
	TruncatedAlerts uint64 `json:"truncatedAlerts"`
}

// TestDecodeUpstreamPayload pins the hand-written decoder to Alertmanager's own types: a
// payload marshalled from template.Data must decode field for field.
func TestDecodeUpstreamPayload(t *testing.T) {
	starts := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	data := &template.Data{
		Receiver:          "debi",
		Status:            "firing",
		GroupLabels:       template.KV{"policy": "web"},
		CommonLabels:      template.KV{"alertname": "DebiScaleRecommended", "policy": "web"},
		CommonAnnotations: template.KV{"load": "0.83"},
		ExternalURL:       "http://alertmanager:9093",
		Alerts: template.Alerts{{
			Status:       "firing",
			Labels:       template.KV{"alertname": "DebiScaleRecommended", "policy": "web", "namespace": "shop"},
			Annotations:  template.KV{"load": "0.83", "current_replicas": "4", "recommended_replicas": "6"},
			StartsAt:     starts,
			GeneratorURL: "http://prometheus:9090/graph",
			Fingerprint:  "a1b2c3d4e5f60718",
		}},
	}
	b, err := json.Marshal(upstreamMessage{Data: data, Version: "4", GroupKey: `{}:{policy="web"}`})
	if err != nil {
		t.Fatal(err)
	}
	m, err := DecodeAlertmanager(b)
	if err != nil {
		t.Fatalf("upstream payload rejected: %v\n%s", err, b)
	}
	if m.Version != "4" || m.Status != "firing" || m.Receiver != "debi" || m.GroupKey != `{}:{policy="web"}` ||
		m.GroupLabels["policy"] != "web" || m.ExternalURL != data.ExternalURL || len(m.Alerts) != 1 {
		t.Fatalf("message fields lost: %+v", m)
	}
	a := m.Alerts[0]
	if a.Labels["namespace"] != "shop" || a.Annotations["recommended_replicas"] != "6" || !a.StartsAt.Equal(starts) ||
		a.Fingerprint != "a1b2c3d4e5f60718" || a.Status != "firing" {
		t.Fatalf("alert fields lost: %+v", a)
	}
}
