package elasticscaler

import (
	"errors"
	"fmt"
	"math"

	"k8s.io/apimachinery/pkg/runtime/schema"

	esv1 "github.com/debi-scaler/debi/apis/elasticscaler/v1alpha1"
	tidalv1 "github.com/debi-scaler/debi/apis/tidal/v1alpha1"
	"github.com/debi-scaler/debi/config"
)

// StateTrigger objects.
//
// A StateTrigger ElasticScaler names a Tidal (spec.targetRef); the Tidal's spec.targetRef is the
// workload and its status.desiredReplicas (written by `debi tidal-controller` from its cron
// rules) the size. The object becomes a policy <namespace>.<name> on the Tidal's target that
// only the webhook runs: the webhook's Tidal watch binds the Tidal to it by the Tidal's
// elasticscaler.io labels and applies the Tidal's count through the safe actuator (mode, bounds,
// pause, conflict retries). No metric drives it: the exporter never runs it (the source hands
// it out only when asked, SourceOptions.StateTriggers, which the webhook sets), so no
// debi_recommended_replicas series, no DebiScaleRecommended alert, and an alert sent by hand
// finds no inputs and holds.

// TidalLookup returns the Tidal namespace/name (from the watch's cache); false when there is none.
type TidalLookup func(namespace, name string) (*tidalv1.Tidal, bool)

// The labels that bind a Tidal to its ElasticScaler (the guide's); the namespace label defaults
// to the Tidal's own namespace.
const (
	TidalLabelScalerName      = "elasticscaler.io/name"
	TidalLabelScalerNamespace = "elasticscaler.io/namespace"
)

// StateTriggerAlgorithm is the algorithm of a StateTrigger policy. It is never run (no metric
// drives the policy); the file's checks need one, and hpa needs no model.
const StateTriggerAlgorithm = "hpa"

// TranslateStateTrigger translates a StateTrigger ElasticScaler with its Tidal (found by lookup
// at spec.targetRef, whose namespace defaults to the object's) to the policy <namespace>.<name>:
//
//   - target: the Tidal's spec.targetRef (namespace default the Tidal's; it must be the Tidal's,
//     as the webhook lets a Tidal drive only a target of its own namespace);
//   - scaling.min_replicas: spec.minReplicas, default 1 (0 rejected: a Tidal's count is applied within the bounds);
//     scaling.max_replicas: spec.maxReplicas, default 2147483647 — without bounds the Tidal's
//     count is applied as it is;
//   - the webhook mode: spec.debi.mode, default act;
//   - algorithm: StateTriggerAlgorithm with the file's default queries, never run
//     (ObjectPolicy.StateTrigger).
//
// The Tidal must carry the labels elasticscaler.io/name=<name> (and elasticscaler.io/namespace
// =<namespace>, or be in the object's namespace without it): the webhook's watch sees only
// labelled Tidals and binds them by these labels. A missing Tidal, a target that is not a
// Tidal, a Tidal bound to another object or without a target are errors of the object
// (*ObjectError, several joined). The Tidal's rules are the Tidal controller's to check.
func TranslateStateTrigger(es *esv1.ElasticScaler, lookup TidalLookup) (config.ObjectPolicy, []string, error) {
	t := &esTranslation{op: config.ObjectPolicy{
		Source: "elasticscaler " + es.Namespace + "/" + es.Name, Namespace: es.Namespace, Name: es.Name,
		Created: es.CreationTimestamp.Time, StateTrigger: true, Paths: map[string]string{},
	}}
	td, err := t.stateTidal(es, lookup)
	if err != nil {
		return t.op, nil, err
	}
	target := t.tidalTarget(es, td)
	p := &t.op.Policy
	p.Name = PolicyName(es.Namespace, es.Name)
	p.Target = target
	p.Algorithm = StateTriggerAlgorithm
	t.op.Paths["name"] = "metadata.name"
	// The target is the Tidal's: an error there is at the object's reference to the Tidal.
	for _, k := range []string{"target", "target.api_version", "target.kind", "target.namespace", "target.name",
		"queries.replicas", "queries.ready_replicas"} {
		t.op.Paths[k] = "spec.targetRef"
	}
	p.Scaling.MaxReplicas = math.MaxInt32 // without bounds the Tidal's count is applied as it is
	t.translateBounds(es.Spec.MinReplicas, es.Spec.MaxReplicas)
	if p.Scaling.MinReplicas == 0 {
		t.bad("spec.minReplicas", "0 is not supported on a StateTrigger ElasticScaler: its Tidal's count is applied within [minReplicas, maxReplicas]; set at least 1")
	}
	t.stateDebi(es.Spec.Debi)
	return t.result()
}

// stateTidal runs the object's admission checks and finds its Tidal (spec.targetRef): the
// error that ends the translation (not a StateTrigger, not a Tidal, not found), or the Tidal.
func (t *esTranslation) stateTidal(es *esv1.ElasticScaler, lookup TidalLookup) (*tidalv1.Tidal, error) {
	for _, fe := range es.Validate() {
		t.bad(fe.Field, "%s", fe.ErrorBody())
	}
	if len(t.errs) > 0 {
		return nil, errors.Join(t.errs...)
	}
	if es.Spec.Trigger.Type != esv1.StateTriggerType {
		return nil, &config.ObjectError{Source: t.op.Source, Path: "spec.trigger.type", Err: fmt.Errorf("%s is not a StateTrigger", es.Spec.Trigger.Type)}
	}
	ref := es.Spec.TargetRef
	gv, _ := schema.ParseGroupVersion(ref.APIVersion) // Validate: a group/version
	if gv != tidalv1.SchemeGroupVersion || ref.Kind != "Tidal" {
		return nil, &config.ObjectError{Source: t.op.Source, Path: "spec.targetRef", Err: fmt.Errorf(
			"a StateTrigger's target must be a Tidal (apiVersion %s, kind Tidal), got %s %s", tidalv1.SchemeGroupVersion, ref.APIVersion, ref.Kind)}
	}
	tns := ref.Namespace
	if tns == "" {
		tns = es.Namespace
	}
	var td *tidalv1.Tidal
	ok := false
	if lookup != nil {
		td, ok = lookup(tns, ref.Name)
	}
	if !ok || td == nil {
		return nil, &config.ObjectError{Source: t.op.Source, Path: "spec.targetRef.name", Err: fmt.Errorf("tidal %s/%s not found", tns, ref.Name)}
	}
	return td, nil
}

// tidalTarget checks that the Tidal td is bound to the object by its labels and has a target in
// its own namespace, and returns that target (namespace default the Tidal's).
func (t *esTranslation) tidalTarget(es *esv1.ElasticScaler, td *tidalv1.Tidal) config.Target {
	tidal := "tidal " + td.Namespace + "/" + td.Name
	lname, lns := td.Labels[TidalLabelScalerName], td.Labels[TidalLabelScalerNamespace]
	if lns == "" {
		lns = td.Namespace
	}
	if lname != es.Name || lns != es.Namespace {
		t.bad("spec.targetRef.name", "%s is not bound to this ElasticScaler: its labels %s=%q, %s=%q must name %s/%s (the webhook binds a Tidal by them)",
			tidal, TidalLabelScalerName, td.Labels[TidalLabelScalerName], TidalLabelScalerNamespace, td.Labels[TidalLabelScalerNamespace], es.Namespace, es.Name)
	}
	tr := td.Spec.TargetRef
	target := config.Target{APIVersion: tr.APIVersion, Kind: tr.Kind, Namespace: tr.Namespace, Name: tr.Name}
	if target.Namespace == "" {
		target.Namespace = td.Namespace
	}
	switch {
	case tr.APIVersion == "" || tr.Kind == "" || tr.Name == "":
		t.bad("spec.targetRef.name", "%s: spec.targetRef needs apiVersion, kind and name, got %s %s %q", tidal, tr.APIVersion, tr.Kind, tr.Name)
	case target.Namespace != td.Namespace:
		t.bad("spec.targetRef.name", "%s: its target %s %s/%s is in another namespace: a Tidal may only drive a target of its own namespace",
			tidal, tr.Kind, target.Namespace, tr.Name)
	}
	return target
}

// stateDebi translates what a StateTrigger takes of spec.debi: the webhook mode (act when unset)
// and the pause; the model settings are warned of.
func (t *esTranslation) stateDebi(d *esv1.DebiSpec) {
	t.op.Mode = config.ModeAct
	if d != nil {
		if d.Mode != "" {
			t.op.Mode = string(d.Mode)
		}
		t.op.Paused, t.op.PausedReplicas = d.Paused, d.PausedReplicas
		if d.Model != "" || d.FallbackModel != "" || d.LeadTime != nil || d.HistoryStep != nil {
			t.warn("spec.debi", "model, fallbackModel, leadTime and historyStep are not used by a StateTrigger (its Tidal gives the replicas)")
		}
	}
	t.op.Paths["mode"] = "spec.debi.mode"
}
