package backtest

import (
	"fmt"
	"strings"

	"github.com/debi-scaler/debi/scaling"
)

// HPARow says what a what-if's hpa row replays (Options.HPA): the workload's own HPA when the
// what-if found one it can replay, whose target and replica bounds replace the policy's for
// that row alone (the sweep and every other policy keep Options.Params), or else an HPA at the
// policy's scaling.target and why.
type HPARow struct {
	// Workload is the policy's target, namespace/name.
	Workload string `json:"workload"`
	// Yours says the row replays the workload's HPA: Name (namespace/name of the object), its
	// CPU utilization target as a fraction and its bounds, read from Source, with Changes the
	// spec's changes within the range (the last values are replayed).
	Yours       bool     `json:"yours"`
	Name        string   `json:"name,omitempty"`
	Target      float64  `json:"target,omitempty"`
	MinReplicas int32    `json:"min_replicas,omitempty"`
	MaxReplicas int32    `json:"max_replicas,omitempty"`
	Source      string   `json:"source,omitempty"`
	Changes     []string `json:"changes,omitempty"`
	// Missing says why no HPA of the workload's is replayed ("no HPA of yours found for
	// shop/web").
	Missing string `json:"missing,omitempty"`
}

// NoHPA is the row of a what-if that found no HPA of the workload's to replay, for why.
func NoHPA(workload, why string) *HPARow {
	return &HPARow{Workload: workload, Missing: why}
}

// params are the scaling parameters the hpa row runs with: p, with the workload's HPA's target
// and bounds when it is replayed (its behaviour is p's: kube-state-metrics does not export it).
func (h *HPARow) params(p scaling.Params) scaling.Params {
	if h != nil && h.Yours {
		p.Target, p.MinReplicas, p.MaxReplicas = h.Target, h.MinReplicas, h.MaxReplicas
	}
	return p
}

// Check says whether the workload's HPA can be replayed with p's other parameters: its target
// and bounds within what the simulator takes (a utilization target above 100 % is not).
func (h *HPARow) Check(p scaling.Params) error {
	if h == nil || !h.Yours {
		return nil
	}
	return h.params(p).Validate()
}

// hpaParams are the scaling parameters of the hpa row (Options.Params outside a what-if that
// found the workload's HPA).
func (o Options) hpaParams() scaling.Params { return o.HPA.params(o.Params) }

// HPALabel says what the hpa row is, for every format ("" outside a what-if): "hpa = your HPA
// shop/web: target 0.60 (60 %), 2–20 replicas, read from kube-state-metrics; …", or "hpa = an
// HPA at 0.50 (no HPA of yours found for shop/web)".
func (o Options) HPALabel() string {
	h := o.HPA
	switch {
	case h == nil:
		return ""
	case !h.Yours:
		return fmt.Sprintf("hpa = an HPA at %.2f (%s)", o.Params.Target, h.Missing)
	}
	s := fmt.Sprintf("hpa = your HPA %s: target %.2f (%g %%), %d–%d replicas, read from %s", h.Name, h.Target, 100*h.Target, h.MinReplicas, h.MaxReplicas, h.Source)
	if len(h.Changes) > 0 {
		s += "; within the range " + strings.Join(h.Changes, ", ") + ": the last values replayed"
	}
	behaviour := "the API defaults assumed"
	if o.Params.HPABehavior == scaling.BehaviorNone {
		behaviour = "none assumed, as kubectl autoscale creates"
	}
	s += fmt.Sprintf("; its behavior is not in %s: %s (scaling.hpa_behavior)", h.Source, behaviour)
	if h.MinReplicas != o.Params.MinReplicas || h.MaxReplicas != o.Params.MaxReplicas {
		s += fmt.Sprintf("; the sweep and the other policies keep the policy's %d–%d replicas", o.Params.MinReplicas, o.Params.MaxReplicas)
	}
	return s
}
