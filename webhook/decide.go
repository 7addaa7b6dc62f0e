package webhook

// One decision of a policy: serialised per policy, read–decide–write with a fresh read after a
// conflict, the pause, the write of each mode, repeated triggers coalesced, the Event.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"

	"github.com/debi-scaler/debi/config"
)

// decision is what a trigger decided, before the mode acts on it. hold, when set, says why
// nothing may be decided: the size is kept and nothing written.
type decision struct {
	source   string
	w        float64
	target   float64
	replicas int32
	reason   string
	metric   string // the deciding metric of a policy with several metrics
	note     string
	hold     string
}

// maxDecideAttempts bounds the read–decide–write rounds of one decision: a conflict means
// someone changed the target between the read and the write, so the webhook reads the new size
// and decides again rather than writing a count computed from the old one.
const maxDecideAttempts = 5

// decide serialises one policy's decision: read the scale subresource (the authoritative current
// size), let the trigger decide, then write according to the mode and record an Event. A
// conflict on the write starts over from the read.
func (c *Controller) decide(ctx context.Context, ps *policyState, trigger string, f func(ScaleInfo) (decision, error)) (Outcome, error) {
	start := time.Now()
	name := ps.pol.Name
	defer func() { c.m.decisionDuration.WithLabelValues(name).Observe(time.Since(start).Seconds()) }()
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.lastRead = nil
	out, err := c.decideRetrying(ctx, ps, trigger, f)
	c.notify(ps, trigger, out, err)
	return out, err
}

// decideRetrying is decide's read–decide–write loop, under the policy's lock.
func (c *Controller) decideRetrying(ctx context.Context, ps *policyState, trigger string, f func(ScaleInfo) (decision, error)) (Outcome, error) {
	name := ps.pol.Name
	conflicts := 0
	backoff := retry.DefaultRetry
	for attempt := 1; ; attempt++ {
		out, err := c.decideOnce(ctx, ps, trigger, f)
		if errors.Is(err, errConflict) {
			conflicts++
			c.m.conflicts.WithLabelValues(name).Inc()
		}
		out.Conflicts += conflicts
		if !errors.Is(err, errConflict) || attempt == maxDecideAttempts {
			if errors.Is(err, errConflict) {
				c.m.decisions.WithLabelValues(name, out.Source, "error").Inc()
				c.m.patches.WithLabelValues(name, ps.mode, "error").Inc()
				err = &Error{http.StatusServiceUnavailable, fmt.Errorf("write for %s: %d conflicts in a row: %w", ps.pol.Target, conflicts, err)}
			}
			return out, err
		}
		c.log.Info("conflict while writing; reading and deciding again", "policy", name, "attempt", attempt)
		select {
		case <-ctx.Done():
			return out, kubeError("write for "+ps.pol.Target.String(), ctx.Err())
		case <-time.After(backoff.Step()):
		}
	}
}

// errConflict marks a write that met an optimistic-concurrency conflict.
var errConflict = errors.New("conflict")

// ReasonPausedReplicas is the reason of a decision that is the count a policy is paused at.
const ReasonPausedReplicas = "paused-replicas"

// pausedWhy says why writes to the target are paused, or "". The annotation on the target comes
// first: it stops every write, a pin's too.
func pausedWhy(ps *policyState, cur ScaleInfo) string {
	switch {
	case annotatedPaused(cur):
		return "paused by the annotation " + AnnotationPaused + " on the target"
	case ps.pin != nil:
		return fmt.Sprintf("paused at %d replicas by the configuration (webhook.policies[].paused_replicas)", *ps.pin)
	case ps.paused:
		return "paused by the configuration (webhook.policies[].paused)"
	case cur.Replicas == 0 && ps.pol.Scaling.MinReplicas != 0: // the HPA's convention: stopped on purpose
		return "paused: the target is at 0 replicas (scaled to zero on purpose)"
	}
	return ""
}

// annotatedPaused reports whether the target carries debi.io/paused: "true".
func annotatedPaused(cur ScaleInfo) bool {
	return strings.EqualFold(strings.TrimSpace(cur.Annotations[AnnotationPaused]), "true")
}

// decideOnce is one read–decide–write round: the scale subresource read, the trigger's decision
// (or the count the policy is paused at), then the write of the mode. A conflict on the write is
// returned wrapping errConflict, for decideRetrying to start over.
func (c *Controller) decideOnce(ctx context.Context, ps *policyState, trigger string, f func(ScaleInfo) (decision, error)) (Outcome, error) {
	name := ps.pol.Name
	out := Outcome{Policy: name, Mode: ps.mode, Trigger: trigger, Source: "none"}
	fail := func(source string, err error) (Outcome, error) {
		c.m.decisions.WithLabelValues(name, source, "error").Inc()
		c.log.Warn("decision failed", "policy", name, "trigger", trigger, "err", err)
		return out, err
	}
	cur, err := c.act.GetScale(ctx, ps.pol.Target)
	if err != nil {
		return fail("none", kubeError("read scale of "+ps.pol.Target.String(), err))
	}
	out.Before, out.After = cur.Replicas, cur.Replicas
	d, err := c.triggerDecision(ps, cur, f, &out)
	if err != nil {
		return fail(d.source, err)
	}
	out.Source, out.Reason, out.Target, out.Metric = d.source, d.reason, d.target, d.metric
	if !math.IsNaN(d.w) && !math.IsInf(d.w, 0) {
		w := d.w
		out.W = &w
		c.m.lastLoad.WithLabelValues(name).Set(w)
	}
	logArgs := decisionLog(ps, trigger, d, cur)
	if d.hold != "" {
		out.Held, out.Reason = d.hold, "held"
		c.m.decisions.WithLabelValues(name, d.source, "held").Inc()
		c.log.Warn("holding the size", append(logArgs, "held", d.hold)...)
		return out, nil
	}
	out.After = d.replicas
	c.m.lastReplicas.WithLabelValues(name, ps.mode).Set(float64(d.replicas))
	if out.PausedReplicas == nil {
		c.m.lastTarget.WithLabelValues(name).Set(d.target)
	}
	c.m.lastTimestamp.WithLabelValues(name).Set(float64(c.now().UnixNano()) / 1e9)
	res, err := c.write(ctx, ps, d.replicas, cur, logArgs)
	switch {
	case errors.Is(err, errConflict):
		return out, err
	case err != nil:
		return fail(d.source, err)
	}
	out.Conflicts += res.Conflicts
	out.Object = res.Object
	written := res.Before != res.After
	out.Written = written
	result := "no_change"
	if d.replicas != cur.Replicas || written {
		result = "change"
	}
	c.m.decisions.WithLabelValues(name, d.source, result).Inc()
	if written {
		c.log.Info("scaled", append(logArgs, "object", res.Object, "written_before", res.Before, "written_after", res.After)...)
		c.event(ps, cur, d, res)
	}
	return out, nil
}

// triggerDecision is the decision of the round at cur: the count the policy is paused at (set
// in out.PausedReplicas), else the trigger's (f), held when writes to the target are paused.
func (c *Controller) triggerDecision(ps *policyState, cur ScaleInfo, f func(ScaleInfo) (decision, error), out *Outcome) (decision, error) {
	paused := pausedWhy(ps, cur)
	c.m.paused.WithLabelValues(ps.pol.Name).Set(map[bool]float64{true: 1}[paused != ""])
	if pin := ps.pin; pin != nil && !annotatedPaused(cur) {
		// Paused at a count (KEDA's paused-replicas): that count is the decision, whatever the
		// trigger says; no input is read and no load decision is made.
		n := *pin
		out.PausedReplicas = &n
		return decision{source: "none", w: math.NaN(), replicas: *pin, reason: ReasonPausedReplicas}, nil
	}
	d, err := f(cur)
	if err != nil {
		return d, err
	}
	if d.hold == "" && paused != "" && d.replicas != cur.Replicas {
		d.hold = paused
	}
	return d, nil
}

// decisionLog are the key-value pairs that log a decision.
func decisionLog(ps *policyState, trigger string, d decision, cur ScaleInfo) []any {
	logArgs := []any{"policy", ps.pol.Name, "mode", ps.mode, "trigger", trigger, "source", d.source, "w", d.w,
		"target_utilization", d.target, "before", cur.Replicas, "after", d.replicas, "reason", d.reason}
	if d.metric != "" {
		logArgs = append(logArgs, "metric", d.metric)
	}
	if d.note != "" {
		logArgs = append(logArgs, "note", d.note)
	}
	return logArgs
}

// write writes n replicas as the policy's mode says: nothing in shadow mode or when act finds
// the size already n, the scale subresource in act (refused when an HPA scales the target), the
// HPA's minReplicas in hpa-floor. A conflict is returned wrapping errConflict.
func (c *Controller) write(ctx context.Context, ps *policyState, n int32, cur ScaleInfo, logArgs []any) (WriteResult, error) {
	name := ps.pol.Name
	switch ps.mode {
	case config.ModeShadow:
		c.log.Info("shadow decision", logArgs...)
		return WriteResult{}, nil
	case config.ModeAct, config.ModeHPAFloor:
	default:
		return WriteResult{}, nil
	}
	if ps.mode == config.ModeAct && n == cur.Replicas {
		c.m.patches.WithLabelValues(name, ps.mode, "unchanged").Inc()
		return WriteResult{}, nil
	}
	if ps.mode == config.ModeAct {
		// An HPA on the same target would undo every write, and be undone: refuse.
		hpa, err := c.act.ScalingHPA(ctx, ps.pol.Target)
		if err != nil {
			return WriteResult{}, kubeError("list HorizontalPodAutoscalers in "+ps.pol.Target.Namespace, err)
		}
		if hpa != "" {
			return WriteResult{}, &Error{http.StatusConflict, fmt.Errorf(
				"mode act refused: HorizontalPodAutoscaler %s/%s already scales %s; set webhook.policies[].mode: hpa-floor for policy %s to raise its minReplicas instead",
				ps.pol.Target.Namespace, hpa, ps.pol.Target, name)}
		}
	}
	ws := time.Now()
	var res WriteResult
	var err error
	if ps.mode == config.ModeAct {
		res, err = c.act.SetReplicas(ctx, ps.pol.Target, n, cur)
	} else {
		res, err = c.act.SetHPAFloor(ctx, ps.pol.Target, n)
	}
	c.m.patchDuration.WithLabelValues(ps.mode).Observe(time.Since(ws).Seconds())
	if err != nil {
		if apierrors.IsConflict(err) {
			return WriteResult{}, fmt.Errorf("%w: %w", errConflict, err)
		}
		c.m.patches.WithLabelValues(name, ps.mode, "error").Inc()
		return WriteResult{}, kubeError("write "+ps.mode+" for "+ps.pol.Target.String(), err)
	}
	c.m.conflicts.WithLabelValues(name).Add(float64(res.Conflicts)) // hpa-floor's own retries
	result := "unchanged"
	if res.Before != res.After {
		result = "success"
	}
	c.m.patches.WithLabelValues(name, ps.mode, result).Inc()
	return res, nil
}

// flightGroup coalesces the triggers of one policy and kind: a trigger that arrives while a
// decision runs waits for the next one, which starts after it arrived and so reads at least as
// fresh a state; every trigger waiting gets that decision's outcome. Thousands of repeats of
// one alert make a handful of decisions, none lost, none out of order.
type flightGroup struct {
	running bool
	next    *flight
}

type flight struct {
	done chan struct{}
	run  func(context.Context) (Outcome, error)
	out  Outcome
	err  error
}

// coalesce runs run, or joins the next pending decision of the same policy and key. The
// decision runs under the webhook's decision timeout, detached from the caller (a caller that
// gives up does not cancel the decision others wait for).
func (c *Controller) coalesce(ctx context.Context, ps *policyState, key string, run func(context.Context) (Outcome, error)) (Outcome, error) {
	ps.fmu.Lock()
	g := ps.flights[key]
	if g == nil {
		g = &flightGroup{}
		ps.flights[key] = g
	}
	if g.next == nil {
		g.next = &flight{done: make(chan struct{})}
	}
	fl := g.next
	fl.run = run // the latest trigger's view (its annotations, for the fallback)
	if !g.running {
		g.running = true
		go c.fly(ps, key, g)
	}
	ps.fmu.Unlock()
	select {
	case <-fl.done:
		return fl.out, fl.err
	case <-ctx.Done():
		return Outcome{Policy: ps.pol.Name, Mode: ps.mode}, &Error{http.StatusGatewayTimeout,
			fmt.Errorf("policy %s: decision still running after the timeout: %w", ps.pol.Name, ctx.Err())}
	}
}

func (c *Controller) fly(ps *policyState, key string, g *flightGroup) {
	for {
		ps.fmu.Lock()
		fl := g.next
		if fl == nil {
			g.running = false
			delete(ps.flights, key)
			ps.fmu.Unlock()
			return
		}
		g.next = nil
		run := fl.run
		ps.fmu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.Webhook.DecisionTimeout)
		fl.out, fl.err = run(ctx)
		cancel()
		close(fl.done)
	}
}

// event records a Kubernetes Event on the target with the decision's inputs.
func (c *Controller) event(ps *policyState, cur ScaleInfo, d decision, res WriteResult) {
	if c.rec == nil {
		return
	}
	t := ps.pol.Target
	ref := &corev1.ObjectReference{APIVersion: t.APIVersion, Kind: t.Kind, Namespace: t.Namespace, Name: t.Name, UID: cur.UID}
	in := fmt.Sprintf("W=%s (source %s), target utilization=%.3f", fmtLoad(d.w), d.source, d.target)
	if d.note != "" {
		in += ", " + d.note
	}
	if ps.mode == config.ModeHPAFloor {
		c.rec.Eventf(ref, corev1.EventTypeNormal, "DebiRaisedHPAFloor",
			"policy %s (%s): %s minReplicas %d -> %d for %d recommended replicas (current %d, %s); %s",
			ps.pol.Name, ps.algName, res.Object, res.Before, res.After, d.replicas, cur.Replicas, d.reason, in)
		return
	}
	c.rec.Eventf(ref, corev1.EventTypeNormal, "DebiScaled", "policy %s (%s): replicas %d -> %d (%s); %s",
		ps.pol.Name, ps.algName, res.Before, res.After, d.reason, in)
}
