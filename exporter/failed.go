package exporter

import (
	"context"
	"errors"
	"sync"
	"time"
)

// policyStatus is one policy's line in the status snapshot.
type policyStatus struct {
	labels []string // policy, namespace, workload_type, workload
	failed bool
}

// publishStatus swaps in the status snapshot of the current policy set.
func (e *Exporter) publishStatus() {
	st := make([]policyStatus, len(e.policies))
	for i, ps := range e.policies {
		st[i] = policyStatus{labels: ps.labels, failed: ps.failed != nil}
	}
	e.status.Store(&st)
}

// CheckQueries runs every query of every policy once at t. A query that returns several series
// where one is expected, or that Prometheus rejects as bad data, is a configuration error: its
// policy is marked failed (logged, debi_policy_failed 1) and holds while the others run, and
// the errors are returned, each naming its field path. An unreachable Prometheus or an empty
// result is only logged, since data may come later.
func (e *Exporter) CheckQueries(ctx context.Context, t time.Time) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	var errs []error
	var mu sync.Mutex
	e.prefetch(ctx, t)
	defer func() { e.pre = nil }()
	e.forEach(ctx, func(ctx context.Context, ps *policyState) {
		cfgErr, unanswered := e.checkPolicy(ctx, ps, t)
		for _, err := range unanswered {
			e.log.Warn("start-up query check failed; the policy will be stale until it succeeds", "policy", ps.cfg.Name, "err", err)
		}
		if cfgErr != nil {
			e.setFailed(ps, cfgErr)
			mu.Lock()
			errs = append(errs, cfgErr)
			mu.Unlock()
		}
	})
	e.publishStatus()
	return errors.Join(errs...)
}

// checkPolicy runs the policy's instant queries once at t. cfgErr joins the configuration errors
// (isConfigError), each naming its field path; unanswered lists the queries that failed
// otherwise (Prometheus unreachable, a timeout), after which nothing can be said of them. An
// empty result is an answer: data may come later.
func (e *Exporter) checkPolicy(ctx context.Context, ps *policyState, t time.Time) (cfgErr error, unanswered []error) {
	var errs []error
	for k, expr := range ps.queries() {
		if expr == "" {
			continue
		}
		_, err := e.instant(ctx, ps, k, expr, t)
		switch {
		case err == nil, errors.Is(err, ErrEmpty):
		case isConfigError(err):
			errs = append(errs, ps.queryError(k, err))
		default:
			unanswered = append(unanswered, ps.queryError(k, err))
		}
	}
	return errors.Join(errs...), unanswered
}

// setFailed records the configuration problem found at a step or check (nil: none), logs the
// transitions, and makes a failed policy hold: stale, its recommendation the current size.
func (e *Exporter) setFailed(ps *policyState, err error) {
	switch {
	case err != nil && (ps.failed == nil || ps.failed.Error() != err.Error()):
		e.log.Error("policy failed: fix its query; it holds (stale, no scale-down) and is checked again at every step, the others run",
			"policy", ps.cfg.Name, "err", err)
	case err == nil && ps.failed != nil:
		e.log.Info("policy queries fixed; the policy runs again", "policy", ps.cfg.Name)
	}
	ps.failed = err
	if err != nil {
		ps.stale = true
		if ps.known {
			ps.recommended = ps.current
		}
	}
}
