package exporter

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/debi-scaler/debi/config"
)

// reloadStats counts what a reload did to the policy set.
type reloadStats struct{ kept, rebuilt, added, removed int }

// apply swaps in a reloaded configuration (cfg, and policies, this shard's selection of it)
// between two steps: it waits for a running step. A policy whose configuration is unchanged
// (reflect.DeepEqual, and the same exporter.mae_window) keeps its runner, model and published
// state; a changed or new one starts afresh and loads its history at the next step; a removed
// one stops, and its series vanish with the snapshot published here. q, when not nil, replaces
// the querier (a new Prometheus URL or HTTP client configuration); query_timeout and
// concurrency apply from the next step. The step grid cannot change while the loop runs, so a
// new global.interval or exporter.query_offset is refused: nothing is applied.
func (e *Exporter) apply(cfg *config.Config, policies []config.Policy, q Querier) (reloadStats, error) {
	var st reloadStats
	if cfg.Global.Interval != e.interval {
		return st, fmt.Errorf("global.interval: changed from %v to %v; the step grid cannot change while the exporter runs: restart it to apply", e.interval, cfg.Global.Interval)
	}
	if cfg.Exporter.QueryOffset != e.offset {
		return st, fmt.Errorf("exporter.query_offset: changed from %v to %v; the step schedule cannot change while the exporter runs: restart it to apply", e.offset, cfg.Exporter.QueryOffset)
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return st, errors.New("the exporter is shutting down")
	}
	old := make(map[string]*policyState, len(e.policies))
	for _, ps := range e.policies {
		old[ps.cfg.Name] = ps
	}
	sameMAE := cfg.Exporter.MAEWindow == e.cfg.Exporter.MAEWindow
	next := make([]*policyState, len(policies))
	var built []*policyState
	for i := range policies {
		p := &policies[i]
		prev, found := old[p.Name]
		if found && sameMAE && reflect.DeepEqual(*prev.cfg, *p) {
			next[i] = prev // its configuration is repointed below, once the reload cannot fail
			st.kept++
			continue
		}
		ps, err := e.newPolicyState(cfg, p)
		if err != nil {
			e.mu.Unlock()
			for _, ps := range built {
				ps.runner.Close()
			}
			return reloadStats{}, err
		}
		built = append(built, ps)
		next[i] = ps
		if found {
			st.rebuilt++
		} else {
			st.added++
		}
	}
	if err := e.resolveEndpoints(next); err != nil {
		e.mu.Unlock()
		for _, ps := range built {
			ps.runner.Close()
		}
		return reloadStats{}, err
	}
	for i, ps := range next {
		if old[ps.cfg.Name] == ps { // kept
			ps.cfg, ps.path = &policies[i], configPath(cfg, ps.cfg.Name)
			delete(old, ps.cfg.Name)
		}
	}
	// What is left in old is stopped: the removed policies and the previous states of the
	// rebuilt ones.
	st.removed = len(old) - st.rebuilt
	e.cfg, e.policies = cfg, next
	e.timeout, e.workers, e.lookback = cfg.Global.QueryTimeout, max(cfg.Exporter.Concurrency, 1), cfg.Global.LookbackDelta
	e.batching = cfg.Exporter.Batching()
	if q != nil {
		e.base = countingQuerier{routingQuerier{q}, e}
	}
	e.replan()
	e.metrics.policies.Set(float64(len(next)))
	e.publish()
	e.publishStatus()
	e.mu.Unlock()
	// Outside the lock: the next step may start meanwhile, on the new set only.
	for _, ps := range old {
		ps.runner.Close()
	}
	return st, nil
}

// configPath is the field path of the named policy in the configuration file.
func configPath(cfg *config.Config, name string) string {
	for i := range cfg.Policies {
		if cfg.Policies[i].Name == name {
			return fmt.Sprintf("policies[%d]", i)
		}
	}
	return fmt.Sprintf("policy %q", name)
}
