package backtest

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/debi-scaler/debi/scaling"
	"github.com/debi-scaler/debi/trace"
)

// yourHPA is shop/web's own HPA as a what-if reads it: CPU at 60 %, 2–20 replicas.
func yourHPA() *HPARow {
	return &HPARow{Workload: "shop/web", Yours: true, Name: "shop/web", Target: 0.6, MinReplicas: 2, MaxReplicas: 20, Source: "kube-state-metrics"}
}

// TestWhatIfHPALabel: the hpa row's label says whose HPA it replays, with what, and what is
// assumed; the recommendation's "your HPA target" is the workload's HPA's target when found.
func TestWhatIfHPALabel(t *testing.T) {
	changed := yourHPA()
	changed.Changes = []string{"target 50 % → 60 %"}
	sameBounds := yourHPA()
	sameBounds.MinReplicas, sameBounds.MaxReplicas = 1, 50 // DefaultParams' bounds
	for _, tc := range []struct {
		name     string
		hpa      *HPARow
		behavior scaling.HPABehavior
		want     string
	}{
		{"not a what-if", nil, scaling.BehaviorDefault, ""},
		{"none found", NoHPA("shop/web", "no HPA of yours found for shop/web in kube-state-metrics"), scaling.BehaviorDefault,
			"hpa = an HPA at 0.50 (no HPA of yours found for shop/web in kube-state-metrics)"},
		{"yours", yourHPA(), scaling.BehaviorDefault,
			"hpa = your HPA shop/web: target 0.60 (60 %), 2–20 replicas, read from kube-state-metrics; its behavior is not in kube-state-metrics: " +
				"the API defaults assumed (scaling.hpa_behavior); the sweep and the other policies keep the policy's 1–50 replicas"},
		{"changed, kubectl autoscale's, the policy's bounds", func() *HPARow { h := *sameBounds; h.Changes = changed.Changes; return &h }(), scaling.BehaviorNone,
			"hpa = your HPA shop/web: target 0.60 (60 %), 1–50 replicas, read from kube-state-metrics; within the range target 50 % → 60 %: the last values replayed; " +
				"its behavior is not in kube-state-metrics: none assumed, as kubectl autoscale creates (scaling.hpa_behavior)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := recommendOptions(0.5)
			o.Params.HPABehavior = tc.behavior
			o.HPA = tc.hpa
			if got := o.HPALabel(); got != tc.want {
				t.Errorf("label\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
	// The sentence raises or lowers the workload's HPA's target, not scaling.target: 0.80 is
	// below scaling.target's 0.9 but above the HPA's 0.6. No HPA found: "Set", from nothing.
	tr := recommendTrace(73.8, 0.0052, 1)
	for _, tc := range []struct {
		hpa  *HPARow
		want string
		cur  float64
	}{
		{nil, "Lower your HPA target to 0.80", 0.9},
		{yourHPA(), "Raise your HPA target to 0.80", 0.6},
		{NoHPA("shop/web", "no HPA of yours found for shop/web"), "Set your HPA target to 0.80", 0},
	} {
		o := recommendOptions(0.9)
		o.HPA = tc.hpa
		r := Recommend(tr, o)
		if !strings.HasPrefix(r.Sentence, tc.want) || r.CurrentTarget != tc.cur || r.HPA != o.HPALabel() {
			t.Errorf("with %+v: %q (current %v, hpa %q); want %q, current %v", tc.hpa, r.Sentence, r.CurrentTarget, r.HPA, tc.want, tc.cur)
		}
		if tc.hpa == nil {
			continue
		}
		rep := &Report{Options: o, Traces: []TraceResult{tr}, Recommendation: r}
		for _, format := range []string{"summary", "markdown", "json"} {
			var b bytes.Buffer
			if err := rep.Write(&b, format); err != nil {
				t.Fatal(err)
			}
			if want := strings.SplitN(o.HPALabel(), ";", 2)[0]; !strings.Contains(strings.Join(strings.Fields(b.String()), " "), want) {
				t.Errorf("%s lacks %q:\n%.1500s", format, want, b.String())
			}
		}
	}
	// A target above 100 % is not one the simulator takes.
	h := yourHPA()
	h.Target = 1.5
	if err := h.Check(DefaultOptions().Params); err == nil {
		t.Error("an HPA at 150 % passed the check")
	}
}

// TestWhatIfHPARowReplaysYours: with the workload's HPA, the hpa row runs at its target and
// bounds (it equals an hpa run with those as the parameters) while the sweep and the other
// policies keep the policy's.
func TestWhatIfHPARowReplaysYours(t *testing.T) {
	tr := embedded(t)[0]
	traces := []trace.Trace{{Name: tr.Name, StepMinutes: tr.StepMinutes, Values: tr.Values[:400]}}
	o := quickOptions()
	o.Policies = []string{"hpa", "apa"}
	o.SweepTargets = []float64{0.5, 0.6}
	o.Warmup = 100
	// A fixed demand scale: RunTraces derives it from max_replicas otherwise.
	scale, err := o.ScaleFor(traces[0].Values)
	if err != nil {
		t.Fatal(err)
	}
	o.Scale = scale
	run := func(o Options) *TraceResult {
		rep, err := RunTraces(context.Background(), traces, o)
		if err != nil {
			t.Fatal(err)
		}
		return &rep.Traces[0]
	}
	byPolicy := func(tr *TraceResult) map[string]float64 {
		m := map[string]float64{}
		for _, r := range tr.Runs {
			m[r.Policy] = r.Cost
		}
		return m
	}
	base := run(o)
	h := yourHPA()
	h.MinReplicas, h.MaxReplicas = 3, o.Params.MaxReplicas-5
	o.HPA = h
	yours := run(o)
	direct := o
	direct.HPA = nil
	direct.Params.Target, direct.Params.MinReplicas, direct.Params.MaxReplicas = h.Target, h.MinReplicas, h.MaxReplicas
	want := byPolicy(run(direct))["hpa"]
	got, before := byPolicy(yours), byPolicy(base)
	if got["hpa"] != want || got["hpa"] == before["hpa"] {
		t.Errorf("hpa row cost %v; want %v (the HPA's parameters), not %v (the policy's)", got["hpa"], want, before["hpa"])
	}
	if got["apa"] != before["apa"] || got[OraclePolicy] != before[OraclePolicy] {
		t.Errorf("apa %v, oracle %v; want them unchanged: %v, %v", got["apa"], got[OraclePolicy], before["apa"], before[OraclePolicy])
	}
	for i, p := range yours.Frontier {
		if p.Cost != base.Frontier[i].Cost {
			t.Errorf("sweep at %v: %v, want unchanged %v", p.Target, p.Cost, base.Frontier[i].Cost)
		}
	}
}
