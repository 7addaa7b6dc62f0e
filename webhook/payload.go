package webhook

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/elasticscaler"
)

// AlertmanagerMessage is Alertmanager's webhook payload, version 4
// (github.com/prometheus/alertmanager/notify/webhook.Message). It is written out by hand so the
// webhook does not pull Alertmanager's notifier dependencies; unknown fields are ignored, so a
// newer Alertmanager that adds fields keeps working.
type AlertmanagerMessage struct {
	Version           string            `json:"version"`
	GroupKey          string            `json:"groupKey"`
	TruncatedAlerts   uint64            `json:"truncatedAlerts"`
	Status            string            `json:"status"`
	Receiver          string            `json:"receiver"`
	GroupLabels       map[string]string `json:"groupLabels"`
	CommonLabels      map[string]string `json:"commonLabels"`
	CommonAnnotations map[string]string `json:"commonAnnotations"`
	ExternalURL       string            `json:"externalURL"`
	Alerts            []Alert           `json:"alerts"`
}

// Alert is one alert of a notification.
type Alert struct {
	Status       string            `json:"status"`
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
	Fingerprint  string            `json:"fingerprint"`
}

// Alert statuses.
const (
	StatusFiring   = "firing"
	StatusResolved = "resolved"
)

// DecodeAlertmanager parses and checks a webhook payload. Every error is an *Error with a 4xx
// code: a payload that is wrong now will be wrong on every retry.
func DecodeAlertmanager(b []byte) (*AlertmanagerMessage, error) {
	var m AlertmanagerMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, badRequest("malformed Alertmanager payload: %v", err)
	}
	if m.Version != "4" {
		return nil, badRequest("unsupported Alertmanager payload version %q: want \"4\"", m.Version)
	}
	if m.Status != StatusFiring && m.Status != StatusResolved {
		return nil, badRequest("status must be %q or %q, got %q", StatusFiring, StatusResolved, m.Status)
	}
	if len(m.Alerts) == 0 {
		return nil, badRequest("notification has no alerts")
	}
	for i, a := range m.Alerts {
		if a.Status != StatusFiring && a.Status != StatusResolved {
			return nil, badRequest("alerts[%d].status must be %q or %q, got %q", i, StatusFiring, StatusResolved, a.Status)
		}
		if len(a.Labels) == 0 {
			return nil, badRequest("alerts[%d] has no labels", i)
		}
	}
	return &m, nil
}

// TidalEvent is a status event of a Tidal-like object: who it is, what it scales and the
// replica count it wants. It is what POST /v1/tidal accepts and what the informer derives from
// a watched object, so both paths run the same checks.
type TidalEvent struct {
	// Namespace and Name of the Tidal object.
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Labels of the Tidal object; elasticscaler.io/name and elasticscaler.io/namespace bind it
	// to a policy (the policy name and its target's namespace).
	Labels map[string]string `json:"labels,omitempty"`
	// TargetRef is spec.targetRef of the Tidal; when set it must be the policy's target.
	TargetRef *TargetRef  `json:"targetRef,omitempty"`
	Status    TidalStatus `json:"status"`

	// fromCluster is set on events derived from an object the API server sent (the watch):
	// a pushed event is only a trigger, and the webhook reads the object before acting.
	fromCluster bool
	// What the object says besides (set with fromCluster): the resource it was read from,
	// metadata.generation, status.observedGeneration, the Ready condition, the
	// debi.io/applied annotation and status.lastScheduleTime, the firing (see tidal.go).
	resource           config.WatchResource
	generation         int64
	observedGeneration *int64
	ready              *tidalCondition
	applied            string
	fired              string
}

// TargetRef names a scaled object.
type TargetRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
}

// TidalStatus carries status.desiredReplicas or, failing that, status.replicas, as the Elastic
// Scaler's StateTrigger reads them. Numbers are decoded as floats so that a fractional, negative
// or absurd value gets a clear message instead of a JSON type error.
type TidalStatus struct {
	DesiredReplicas *float64 `json:"desiredReplicas,omitempty"`
	Replicas        *float64 `json:"replicas,omitempty"`
}

// Labels binding a Tidal to a policy (Elastic Scaler guide, StateTrigger): the
// ElasticScaler's, elasticscaler.TidalLabelScalerName and TidalLabelScalerNamespace.
const (
	LabelScalerName      = elasticscaler.TidalLabelScalerName
	LabelScalerNamespace = elasticscaler.TidalLabelScalerNamespace
)

// Desired returns the replica count the event asks for.
func (e *TidalEvent) Desired() (int32, error) {
	field, v := "status.desiredReplicas", e.Status.DesiredReplicas
	if v == nil {
		field, v = "status.replicas", e.Status.Replicas
	}
	if v == nil {
		return 0, unprocessable("tidal %s/%s has neither status.desiredReplicas nor status.replicas", e.Namespace, e.Name)
	}
	switch x := *v; {
	case math.IsNaN(x) || math.IsInf(x, 0):
		return 0, unprocessable("%s of tidal %s/%s is not a number", field, e.Namespace, e.Name)
	case x < 0:
		return 0, unprocessable("%s of tidal %s/%s must not be negative, got %v", field, e.Namespace, e.Name, x)
	case x != math.Trunc(x):
		return 0, unprocessable("%s of tidal %s/%s must be a whole number, got %v", field, e.Namespace, e.Name, x)
	case x > math.MaxInt32:
		return 0, unprocessable("%s of tidal %s/%s is out of range, got %v", field, e.Namespace, e.Name, x)
	default:
		return int32(x), nil
	}
}

// DecodeTidal parses a pushed Tidal event. It is a trigger: only namespace and name are used
// (both must be valid Kubernetes names); the webhook reads the object itself from the API
// server, so labels, targetRef and status in the body are ignored.
func DecodeTidal(b []byte) (*TidalEvent, error) {
	var e TidalEvent
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, badRequest("malformed Tidal event: %v", err)
	}
	if e.Namespace == "" || e.Name == "" {
		return nil, badRequest("tidal event needs the object's namespace and name")
	}
	if errs := validation.IsDNS1123Label(e.Namespace); len(errs) > 0 {
		return nil, badRequest("tidal event: namespace %q is not a valid namespace: %s", e.Namespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(e.Name); len(errs) > 0 {
		return nil, badRequest("tidal event: name %q is not a valid object name: %s", e.Name, strings.Join(errs, "; "))
	}
	return &TidalEvent{Namespace: e.Namespace, Name: e.Name}, nil
}

// Error is an error with its meaning under Alertmanager's retry contract: Code is the HTTP
// status the webhook answers (4xx: permanent, do not retry; 5xx: retry).
type Error struct {
	Code int
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Retryable reports whether a sender should try again.
func (e *Error) Retryable() bool { return e.Code >= 500 }

func badRequest(format string, a ...any) error {
	return &Error{http.StatusBadRequest, fmt.Errorf(format, a...)}
}

func unprocessable(format string, a ...any) error {
	return &Error{http.StatusUnprocessableEntity, fmt.Errorf(format, a...)}
}
