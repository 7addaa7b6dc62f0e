package webhook

// A Tidal is a trigger, never a level-setter.
//
// The webhook acts on a Tidal's status only when the status describes the Tidal's current spec
// (status.observedGeneration = metadata.generation, condition Ready True, the condition's own
// observedGeneration, when set, the same), and only on a change: the desired count or the
// binding (policy, target) differs from what the webhook last applied, or a rule fired again
// (status.lastScheduleTime moved: the morning rule that sets 10 every day acts every day, even
// when yesterday's was 10 too). What it last applied lives on the Tidal itself, in the
// annotation debi.io/applied, written after the count is applied:
//
//	debi.io/applied: "<metadata.generation>/<desiredReplicas>/<policy>/<target namespace>/<kind>/<name>@<lastScheduleTime>"
//
// (without "@…" when the status has no lastScheduleTime; a record without it, as written before
// the firing time was recorded, matches any firing time.)
// An annotation is metadata: writing it does not bump a custom resource's generation, so the
// Tidal controller's observedGeneration stays current. It survives a webhook restart, is shared
// by every replica (the Lease holder's watch and any replica's POST /v1/tidal read the same
// object) and goes with the Tidal (a Tidal created again is a new change). The generation is
// recorded, not compared: a spec edit that leaves desiredReplicas alone changes nothing.
//
// So a resync, a webhook restart or a Lease handover, which replay unchanged objects, apply
// nothing, and the load policy's decisions made since the Tidal's change stand. The order is
// apply, then record: a webhook stopped between the two applies the same count again once (at
// least once, never lost). A decision held (the target paused), made in shadow mode, or that set
// another size than the Tidal's (a policy paused at a count, paused_replicas) records nothing:
// the change has not been applied and is still pending.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/elasticscaler"
	"github.com/debi-scaler/debi/scaling"
)

// AnnotationTidalApplied, on a Tidal, records the count the webhook last applied from it, to
// which policy and target, and the firing it came from:
// "<generation>/<desiredReplicas>/<policy>/<namespace>/<kind>/<name>[@<lastScheduleTime>]".
const AnnotationTidalApplied = "debi.io/applied"

// conditionReady is the condition the Tidal controller maintains (tidal/controller.ConditionReady).
const conditionReady = "Ready"

// tidalCondition is the Ready condition of a Tidal-like object.
type tidalCondition struct {
	Status, Reason, Message string
	ObservedGeneration      int64
}

// readyCondition is u's status condition Ready, or nil.
func readyCondition(u *unstructured.Unstructured) *tidalCondition {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != conditionReady {
			continue
		}
		str := func(k string) string { s, _ := m[k].(string); return s }
		out := &tidalCondition{Status: str("status"), Reason: str("reason"), Message: str("message")}
		switch g := m["observedGeneration"].(type) {
		case int64:
			out.ObservedGeneration = g
		case float64:
			out.ObservedGeneration = int64(g)
		}
		return out
	}
	return nil
}

// stale says why the event's status may not be acted on, or "" when it describes the object's
// current spec and is Ready.
func (e *TidalEvent) stale() string {
	id := e.Namespace + "/" + e.Name
	switch {
	case e.observedGeneration == nil:
		return fmt.Sprintf("tidal %s has no status.observedGeneration: its controller has not evaluated it yet", id)
	case *e.observedGeneration != e.generation:
		return fmt.Sprintf("tidal %s: status.observedGeneration %d is not metadata.generation %d: the status predates the spec", id, *e.observedGeneration, e.generation)
	case e.ready == nil:
		return fmt.Sprintf("tidal %s has no %s condition", id, conditionReady)
	case e.ready.ObservedGeneration != 0 && e.ready.ObservedGeneration != e.generation:
		return fmt.Sprintf("tidal %s: its %s condition describes generation %d, not metadata.generation %d", id, conditionReady, e.ready.ObservedGeneration, e.generation)
	case e.ready.Status != string(metav1.ConditionTrue):
		return fmt.Sprintf("tidal %s: %s=%s (%s: %s)", id, conditionReady, e.ready.Status, e.ready.Reason, e.ready.Message)
	}
	return ""
}

// appliedValue is the debi.io/applied annotation for want applied from a Tidal at generation to
// ps, from the firing at fired (status.lastScheduleTime; "" when the status has none).
func appliedValue(generation int64, want int32, ps *policyState, fired string) string {
	v := fmt.Sprintf("%d/%d/%s/%s", generation, want, ps.pol.Name, ps.pol.Target)
	if fired != "" {
		v += "@" + fired
	}
	return v
}

// alreadyApplied reports whether the annotation value v records want applied to ps (its policy
// and target) from the firing at fired. The generation is not compared; a record without a
// firing time matches any.
func alreadyApplied(v string, want int32, ps *policyState, fired string) bool {
	parts := strings.SplitN(v, "/", 3)
	if len(parts) != 3 {
		return false
	}
	if _, err := strconv.ParseInt(parts[0], 10, 64); err != nil {
		return false
	}
	binding, at, timed := strings.Cut(parts[2], "@")
	if timed && at != fired {
		return false
	}
	return parts[1] == strconv.FormatInt(int64(want), 10) && binding == ps.pol.Name+"/"+ps.pol.Target.String()
}

// tidalCheck binds e to its policy and says whether to act on it (act true, with the policy and
// the desired count). Otherwise out says why not — held: the status does not describe the spec
// or is not Ready; or the change was applied already — or err is the binding's or the count's
// error.
func (c *Controller) tidalCheck(e *TidalEvent) (ps *policyState, want int32, out Outcome, act bool, err error) {
	out = Outcome{Trigger: "tidal", Source: "tidal"}
	if ps, err = c.tidalPolicy(e); err != nil {
		return nil, 0, out, false, err
	}
	out.Policy, out.Mode = ps.pol.Name, ps.mode
	if why := e.stale(); why != "" {
		out.Reason, out.Held = "held", why
		c.m.decisions.WithLabelValues(ps.pol.Name, "tidal", "held").Inc()
		c.log.Info("tidal not acted on: its status does not describe its spec or is not Ready", "policy", ps.pol.Name,
			"tidal", e.Namespace+"/"+e.Name, "held", why)
		return ps, 0, out, false, nil
	}
	if want, err = e.Desired(); err != nil {
		return ps, 0, out, false, err
	}
	if alreadyApplied(e.applied, want, ps, e.fired) {
		out.Reason = "applied"
		out.Held = fmt.Sprintf("tidal %s/%s: desiredReplicas %d already applied to policy %s (%s %q); a Tidal acts on a change only",
			e.Namespace, e.Name, want, ps.pol.Name, AnnotationTidalApplied, e.applied)
		c.log.Debug("tidal unchanged since applied", "policy", ps.pol.Name, "tidal", e.Namespace+"/"+e.Name, "applied", e.applied)
		return ps, want, out, false, nil
	}
	return ps, want, out, true, nil
}

// rereadTidal reads e's object again from the resource it came from.
func (c *Controller) rereadTidal(ctx context.Context, e *TidalEvent) (*TidalEvent, error) {
	u, err := c.act.GetTidal(ctx, e.resource, e.Namespace, e.Name)
	if err != nil {
		return nil, kubeError(fmt.Sprintf("read tidal %s/%s (%s)", e.Namespace, e.Name, e.resource), err)
	}
	f := TidalFromUnstructured(u)
	f.resource = e.resource
	return f, nil
}

// markTidalApplied records on the Tidal that want was applied to ps, after a decision that
// applied it in mode act or hpa-floor: the decision's size is count, the Tidal's count within the
// policy's bounds (written, or the target already at it). Any other decision records nothing,
// and the change stays pending: a shadow one, a held one (the target paused), and one that
// decided another size — the count of a policy paused at one (paused_replicas), which replaces
// every trigger's decision. Recorded, the Tidal's count would never be applied after the pause.
func (c *Controller) markTidalApplied(ctx context.Context, ps *policyState, e *TidalEvent, want, count int32, out Outcome) error {
	if ps.mode == config.ModeShadow || out.Held != "" {
		return nil
	}
	if out.After != count {
		c.log.Info("tidal not applied: the decision set another size; the change stays pending", "policy", ps.pol.Name,
			"tidal", e.Namespace+"/"+e.Name, "desired", want, "after", out.After, "reason", out.Reason)
		return nil
	}
	v := appliedValue(e.generation, want, ps, e.fired)
	if err := c.act.MarkTidal(ctx, e.resource, e.Namespace, e.Name, v); err != nil {
		c.log.Error("applied the Tidal's count but cannot record it on the Tidal; it will be applied again (can the webhook patch "+e.resource.String()+"?)",
			"policy", ps.pol.Name, "tidal", e.Namespace+"/"+e.Name, "annotation", AnnotationTidalApplied, "err", err)
		return kubeError(fmt.Sprintf("record %s on tidal %s/%s", AnnotationTidalApplied, e.Namespace, e.Name), err)
	}
	return nil
}

// MarkTidal implements Actuator: a merge patch of the object's metadata.annotations.
func (k *KubeActuator) MarkTidal(ctx context.Context, r config.WatchResource, namespace, name, value string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{AnnotationTidalApplied: value}}})
	if err != nil {
		return err
	}
	gvr := schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource}
	_, err = k.dyn.Resource(gvr).Namespace(namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "debi-webhook"})
	return err
}

// Tidal implements Scaler: the Tidal's desired count, within the policy's min and max. An event
// is a trigger: unless it comes from the watch (an object the API server sent), the webhook reads
// the named Tidal from the API server and decides on what the object says — its labels, its
// targetRef and its status — never on what the event's body claims.
//
// A Tidal is a trigger, never a level-setter: it is acted on only when its status describes its
// spec (status.observedGeneration is metadata.generation, condition Ready True) and only on a
// change — its desired count or its binding (policy, target) differs from what the annotation
// debi.io/applied on the Tidal says was last applied. Once applied the webhook writes that
// annotation, so a resync, a restart or another replica taking the Lease applies nothing new,
// and the load policy's decisions afterwards stand (see tidal.go).
func (c *Controller) Tidal(ctx context.Context, e *TidalEvent) (Outcome, error) {
	if !e.fromCluster {
		u, r, err := c.readTidal(ctx, e.Namespace, e.Name)
		if err != nil {
			return Outcome{Trigger: "tidal", Source: "tidal"}, err
		}
		e = TidalFromUnstructured(u)
		e.resource = r
	}
	ps, _, out, act, err := c.tidalCheck(e)
	if !act || err != nil {
		return out, err
	}
	return c.coalesce(ctx, ps, "tidal/"+e.Namespace+"/"+e.Name, func(ctx context.Context) (Outcome, error) {
		// Read the Tidal again: the event may predate the apply of this very change by a
		// decision that ran before this one, here or on another replica (pushed events).
		f, err := c.rereadTidal(ctx, e)
		if err != nil {
			return Outcome{Policy: ps.pol.Name, Mode: ps.mode, Trigger: "tidal", Source: "tidal"}, err
		}
		ps2, want, out, act, err := c.tidalCheck(f)
		if !act || err != nil {
			return out, err
		}
		if ps2 != ps {
			return out, &Error{http.StatusServiceUnavailable, fmt.Errorf("tidal %s/%s: bound to policy %s now, not %s; deciding again",
				e.Namespace, e.Name, ps2.pol.Name, ps.pol.Name)}
		}
		p := ps.pol.Scaling
		d := decision{source: "tidal", w: math.NaN(), replicas: want, reason: "tidal",
			note: fmt.Sprintf("tidal %s/%s desiredReplicas=%d", e.Namespace, e.Name, want)}
		switch {
		case want < p.MinReplicas:
			d.replicas, d.reason = p.MinReplicas, scaling.ReasonMinReplicas
		case want > p.MaxReplicas:
			d.replicas, d.reason = p.MaxReplicas, scaling.ReasonMaxReplicas
		}
		out, err = c.decide(ctx, ps, "tidal", func(ScaleInfo) (decision, error) { return d, nil })
		if err != nil {
			return out, err
		}
		return out, c.markTidalApplied(ctx, ps, f, want, d.replicas, out)
	})
}

// readTidal reads the named Tidal from the API server, trying the configured resources in
// order: 404 when none has it. It returns the resource it was found in.
func (c *Controller) readTidal(ctx context.Context, ns, name string) (*unstructured.Unstructured, config.WatchResource, error) {
	var errs []error
	for _, r := range c.cfg.Webhook.Tidal.Resources {
		u, err := c.act.GetTidal(ctx, r, ns, name)
		if err == nil {
			return u, r, nil
		}
		var e *Error
		if !apierrors.IsNotFound(err) && !(errors.As(err, &e) && e.Code == http.StatusNotFound) {
			return nil, r, kubeError(fmt.Sprintf("read tidal %s/%s (%s)", ns, name, r), err)
		}
		errs = append(errs, err)
	}
	return nil, config.WatchResource{}, &Error{http.StatusNotFound, fmt.Errorf("tidal %s/%s: not found in %d configured resources (webhook.tidal.resources): %w",
		ns, name, len(c.cfg.Webhook.Tidal.Resources), errors.Join(errs...))}
}

// tidalPolicy binds an event to a policy: by the elasticscaler.io labels when present, else by
// targetRef. The Tidal must live in the policy's namespace and point at the policy's target.
func (c *Controller) tidalPolicy(e *TidalEvent) (*policyState, error) {
	var ps *policyState
	if name := e.Labels[LabelScalerName]; name != "" {
		var ok bool
		byObject := false
		if ps, ok = c.policies[name]; !ok {
			// The policy of an ElasticScaler object is <namespace>.<name> (elasticscaler.PolicyName):
			// the labels name the object, in the Tidal's namespace unless they say another.
			ns := e.Labels[LabelScalerNamespace]
			if ns == "" {
				ns = e.Namespace
			}
			if ps, ok = c.policies[elasticscaler.PolicyName(ns, name)]; !ok {
				return nil, unprocessable("tidal %s/%s: unknown policy %q in label %s (nor %q, the policy of an ElasticScaler)",
					e.Namespace, e.Name, name, LabelScalerName, elasticscaler.PolicyName(ns, name))
			}
			byObject = true
		}
		if ns := e.Labels[LabelScalerNamespace]; !byObject && ns != "" && ns != ps.pol.Target.Namespace {
			return nil, unprocessable("tidal %s/%s: label %s=%q does not match policy %s (namespace %q)",
				e.Namespace, e.Name, LabelScalerNamespace, ns, name, ps.pol.Target.Namespace)
		}
	} else if e.TargetRef != nil {
		ns := e.TargetRef.Namespace
		if ns == "" {
			ns = e.Namespace
		}
		for _, p := range c.sortedPolicies() {
			t := p.pol.Target
			if t.Namespace == ns && t.Name == e.TargetRef.Name && strings.EqualFold(t.Kind, e.TargetRef.Kind) {
				ps = p
				break
			}
		}
		if ps == nil {
			return nil, unprocessable("tidal %s/%s: no policy scales %s %s/%s", e.Namespace, e.Name, e.TargetRef.Kind, ns, e.TargetRef.Name)
		}
	} else {
		return nil, unprocessable("tidal %s/%s names no policy: set label %s or targetRef", e.Namespace, e.Name, LabelScalerName)
	}
	t := ps.pol.Target
	if e.Namespace != t.Namespace {
		return nil, unprocessable("tidal %s/%s: a Tidal may only drive a policy of its own namespace; policy %s scales namespace %q",
			e.Namespace, e.Name, ps.pol.Name, t.Namespace)
	}
	if r := e.TargetRef; r != nil {
		ns := r.Namespace
		if ns == "" {
			ns = e.Namespace
		}
		if ns != t.Namespace || r.Name != t.Name || !strings.EqualFold(r.Kind, t.Kind) ||
			(r.APIVersion != "" && r.APIVersion != t.APIVersion) {
			return nil, unprocessable("tidal %s/%s: targetRef %s %s/%s is not the target of policy %s (%s)",
				e.Namespace, e.Name, r.Kind, ns, r.Name, ps.pol.Name, t)
		}
	}
	return ps, nil
}
