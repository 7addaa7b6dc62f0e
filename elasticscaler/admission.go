// Admission: the validating admission webhook of ElasticScaler and Tidal objects. The webhook's
// router serves Admit at AdmissionPath.

package elasticscaler

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	esv1 "github.com/debi-scaler/debi/apis/elasticscaler/v1alpha1"
	tidalv1 "github.com/debi-scaler/debi/apis/tidal/v1alpha1"
	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/tidal/schedule"
)

// AdmissionPath is where the webhook serves the validating admission of ElasticScaler and Tidal
// objects (deploy/'s ValidatingWebhookConfiguration). The API server calls it over TLS; it
// decides from the object alone and has no side effects, so it needs no bearer token.
const AdmissionPath = "/v1/admission/validate"

// admitters validate an object by group and kind: the errors name their field paths, the
// warnings are returned to the client (kubectl prints them).
var admitters = map[string]func(raw []byte) (field.ErrorList, []string, error){
	esv1.GroupName + "/ElasticScaler": func(raw []byte) (field.ErrorList, []string, error) {
		var o esv1.ElasticScaler
		if err := json.Unmarshal(raw, &o); err != nil {
			return nil, nil, err
		}
		_, warnings := esv1.ParseMetricsPolicy(o.Annotations)
		return o.Validate(), warnings, nil
	},
	tidalv1.GroupName + "/Tidal": func(raw []byte) (field.ErrorList, []string, error) {
		var o tidalv1.Tidal
		if err := json.Unmarshal(raw, &o); err != nil {
			return nil, nil, err
		}
		errs := o.Validate()
		if len(errs) == 0 && o.Spec.Triggers.Times != nil {
			// The cron expressions, parsed as the Tidal controller parses them.
			rules := make([]schedule.Rule, len(o.Spec.Triggers.Times.Rules))
			for i, r := range o.Spec.Triggers.Times.Rules {
				rules[i] = schedule.Rule{Name: r.Name, Cron: r.Cron, Replicas: r.Replicas}
			}
			if _, err := schedule.Parse(rules); err != nil {
				base := field.NewPath("spec", "triggers", "times")
				for _, line := range strings.Split(err.Error(), "\n") {
					path, msg, _ := strings.Cut(line, ": ")
					errs = append(errs, field.Invalid(fieldPath(base, path), nil, msg))
				}
			}
		}
		return errs, nil, nil
	},
}

// fieldPath appends a relative path such as rules[1].cron to base.
func fieldPath(base *field.Path, rel string) *field.Path {
	p := base
	for part := range strings.SplitSeq(rel, ".") {
		name, idx, ok := strings.Cut(part, "[")
		p = p.Child(name)
		if ok {
			var i int
			if _, err := fmt.Sscanf(idx, "%d]", &i); err == nil {
				p = p.Index(i)
			}
		}
	}
	return p
}

// Admit answers one AdmissionReview (admission.k8s.io/v1): allowed, or denied with every error
// and its field path, as the API server shows them ("admission webhook … denied the request:
// spec.trigger.metricsTrigger: Required value"). A request that is not an AdmissionReview is a
// 400; a kind the webhook does not validate, or a deletion, is allowed. Each answer is counted
// in admissions by kind and result (allowed, denied, unknown-kind). maxBody bounds the request
// (webhook.max_body_bytes; its default when 0).
func Admit(w http.ResponseWriter, r *http.Request, maxBody int64, admissions *prometheus.CounterVec) {
	if maxBody <= 0 {
		maxBody = config.DefaultWebhookMaxBodyBytes
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		http.Error(w, "reading the AdmissionReview: "+err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
		if err == nil {
			err = fmt.Errorf("request: required")
		}
		http.Error(w, "not an admission.k8s.io/v1 AdmissionReview: "+err.Error(), http.StatusBadRequest)
		return
	}
	req := review.Request
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	kind := req.Kind.Group + "/" + req.Kind.Kind
	result := "allowed"
	if f, ok := admitters[kind]; ok && req.Operation != admissionv1.Delete {
		errs, warnings, err := f(req.Object.Raw)
		resp.Warnings = warnings
		switch {
		case err != nil:
			resp.Allowed, result = false, "denied"
			resp.Result = &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusBadRequest, Reason: metav1.StatusReasonBadRequest,
				Message: fmt.Sprintf("%s %s: the object does not decode: %v", req.Kind.Kind, req.Name, err)}
		case len(errs) > 0:
			resp.Allowed, result = false, "denied"
			resp.Result = &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusUnprocessableEntity, Reason: metav1.StatusReasonInvalid,
				Message: errs.ToAggregate().Error()}
		}
	} else if !ok {
		result = "unknown-kind"
	}
	admissions.WithLabelValues(req.Kind.Kind, result).Inc()
	out := admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Response: resp}
	b, err := json.Marshal(out)
	if err != nil {
		http.Error(w, "encoding the AdmissionReview: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}
