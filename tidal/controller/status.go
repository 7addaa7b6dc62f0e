package controller

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tidalv1 "github.com/debi-scaler/debi/apis/tidal/v1alpha1"
	"github.com/debi-scaler/debi/tidal/schedule"
)

// The Ready condition the controller maintains on every Tidal it evaluates.
const (
	ConditionReady = "Ready"
	// ReasonRuleActive: a rule is in force; status.desiredReplicas holds its replicas.
	ReasonRuleActive = "RuleActive"
	// ReasonInvalidRules: schedule.Parse rejected the rules; the message says which and why.
	// status.desiredReplicas, activeRule and lastScheduleTime keep their previous values.
	ReasonInvalidRules = "InvalidRules"
	// ReasonNoRuleFired: the rules are valid but none has fired within schedule.Lookback (only
	// rules restricted to 29 February can do that); the message names the first activation.
	ReasonNoRuleFired = "NoRuleFired"
)

// maxMessage bounds a condition's message (metav1.Condition allows 32768 bytes).
const maxMessage = 4096

// Result is what Evaluate decides for one Tidal at one instant.
type Result struct {
	// Status is the status to write (the previous one with the controller's fields replaced).
	Status tidalv1.TidalStatus
	// Outcome is "ok", "invalid" or "no_rule" (the result label of
	// debi_tidal_rules_evaluations_total).
	Outcome string
	// Rule is the rule in force and Activated its latest activation (Outcome "ok").
	Rule      schedule.Rule
	Activated time.Time
	// Next is the next activation strictly after the evaluation instant, of NextRule; zero when
	// the rules are invalid (nothing to wait for until the spec changes).
	Next     time.Time
	NextRule string
	// Err is the parse error (Outcome "invalid").
	Err error
}

// Rules converts a Tidal's spec.triggers.times.rules for schedule.Parse.
func Rules(t *tidalv1.Tidal) []schedule.Rule {
	if t.Spec.Triggers.Times == nil {
		return nil
	}
	out := make([]schedule.Rule, 0, len(t.Spec.Triggers.Times.Rules))
	for _, r := range t.Spec.Triggers.Times.Rules {
		out = append(out, schedule.Rule{Name: r.Name, Cron: r.Cron, Replicas: r.Replicas})
	}
	return out
}

// Evaluate computes the status of t at now: the rule that fired most recently at or before now
// (schedule.Schedule.At, level-setting) gives desiredReplicas, activeRule and lastScheduleTime;
// observedGeneration is t's generation; the Ready condition says which case holds. Fields the
// controller does not own (status.replicas, other conditions) are kept. It is pure.
func Evaluate(t *tidalv1.Tidal, now time.Time) Result {
	st := *t.Status.DeepCopy()
	st.ObservedGeneration = t.Generation
	cond := metav1.Condition{
		Type: ConditionReady, ObservedGeneration: t.Generation,
		LastTransitionTime: metav1.NewTime(now.UTC().Truncate(time.Second)),
	}
	res := Result{}
	sched, err := schedule.Parse(Rules(t))
	switch {
	case err != nil:
		res.Outcome, res.Err = "invalid", err
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ReasonInvalidRules, truncate(err.Error())
	default:
		next, nextAt := sched.Next(now)
		res.Next, res.NextRule = nextAt, next.Name
		rule, activated, ok := sched.At(now)
		if !ok {
			res.Outcome = "no_rule"
			cond.Status, cond.Reason = metav1.ConditionFalse, ReasonNoRuleFired
			cond.Message = fmt.Sprintf("no rule has fired in the last %d days; the first will be %q at %s",
				int(schedule.Lookback/(24*time.Hour)), next.Name, stamp(nextAt))
			break
		}
		res.Outcome, res.Rule, res.Activated = "ok", rule, activated
		replicas := rule.Replicas
		st.DesiredReplicas = &replicas
		st.ActiveRule = rule.Name
		st.LastScheduleTime = &metav1.Time{Time: activated.UTC()}
		cond.Status, cond.Reason = metav1.ConditionTrue, ReasonRuleActive
		cond.Message = fmt.Sprintf("rule %q (%d replicas) in force since %s; next: %q at %s",
			rule.Name, rule.Replicas, stamp(activated), next.Name, stamp(nextAt))
	}
	meta.SetStatusCondition(&st.Conditions, cond)
	res.Status = st
	return res
}

// Changed reports whether writing want over have would change anything.
func Changed(have, want tidalv1.TidalStatus) bool {
	return !equality.Semantic.DeepEqual(have, want)
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func truncate(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	return s[:maxMessage-3] + "..."
}
