package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/debi-scaler/debi/backtest"
	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/exporter"
	"github.com/debi-scaler/debi/policy"
)

// hpaQuerier answers FindHPA's range queries with one sample per series, by metric family.
type hpaQuerier struct {
	series map[string][]model.Metric // family: each series' labels beyond the family's name
	values map[string][]float64      // family: each series' value
	err    error
}

func (q hpaQuerier) Query(context.Context, string, time.Time, ...v1.Option) (model.Value, v1.Warnings, v1.Infos, error) {
	return nil, nil, nil, errors.New("no instant queries")
}

func (q hpaQuerier) QueryRange(_ context.Context, expr string, r v1.Range, _ ...v1.Option) (model.Value, v1.Warnings, v1.Infos, error) {
	if q.err != nil {
		return nil, nil, nil, q.err
	}
	family, _, _ := strings.Cut(expr, "{")
	var m model.Matrix
	for i, labels := range q.series[family] {
		m = append(m, &model.SampleStream{Metric: labels, Values: []model.SamplePair{{Timestamp: model.TimeFromUnixNano(r.End.UnixNano()), Value: model.SampleValue(q.values[family][i])}}})
	}
	return m, nil, nil, nil
}

// TestWhatIfUserHPA: the hpa row is the workload's HPA where it scales on CPU utilization
// alone, the policy replays one metric and the simulator takes its target; otherwise an HPA
// at scaling.target, and the label says why.
func TestWhatIfUserHPA(t *testing.T) {
	p := &config.Policy{Target: config.Target{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}}
	hpa := func(metrics map[string]float64) hpaQuerier {
		q := hpaQuerier{series: map[string][]model.Metric{
			"kube_horizontalpodautoscaler_info":              {{"namespace": "shop", "horizontalpodautoscaler": "web", "scaletargetref_kind": "Deployment", "scaletargetref_name": "web"}},
			"kube_horizontalpodautoscaler_spec_min_replicas": {{}},
			"kube_horizontalpodautoscaler_spec_max_replicas": {{}},
		}, values: map[string][]float64{
			"kube_horizontalpodautoscaler_info":              {1},
			"kube_horizontalpodautoscaler_spec_min_replicas": {2},
			"kube_horizontalpodautoscaler_spec_max_replicas": {20},
		}}
		const tm = "kube_horizontalpodautoscaler_spec_target_metric"
		for name, v := range metrics {
			q.series[tm] = append(q.series[tm], model.Metric{"metric_name": model.LabelValue(name), "metric_target_type": "utilization"})
			q.values[tm] = append(q.values[tm], v)
		}
		return q
	}
	end := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		q       hpaQuerier
		metrics []string
		want    string
	}{
		{"yours", hpa(map[string]float64{"cpu": 60}), nil,
			"hpa = your HPA shop/web: target 0.60 (60 %), 2–20 replicas, read from kube-state-metrics; its behavior is not in kube-state-metrics"},
		{"none", hpaQuerier{}, nil, "hpa = an HPA at 0.50 (no HPA of yours found for shop/web in kube-state-metrics)"},
		{"cpu and memory", hpa(map[string]float64{"cpu": 60, "memory": 80}), nil,
			"hpa = an HPA at 0.50 (your HPA shop/web scales on cpu (utilization), memory (utilization), not CPU utilization alone: not replayed)"},
		{"no metric exported", hpa(nil), nil,
			"hpa = an HPA at 0.50 (your HPA shop/web has no metric target in kube-state-metrics (it exports none for a ContainerResource metric): not replayed)"},
		{"several metrics in the policy", hpa(map[string]float64{"cpu": 60}), []string{"cpu", "rps"},
			"hpa = an HPA at 0.50 (your HPA shop/web scales on CPU utilization alone, the what-if's rows on the policy's metrics (cpu, rps): not replayed)"},
		{"above 100 %", hpa(map[string]float64{"cpu": 150}), nil,
			"hpa = an HPA at 0.50 (your HPA shop/web (target 150 %, 2–20 replicas) is not one the simulator takes: target must be in (0, 1]"},
		{"Prometheus fails", hpaQuerier{err: errors.New("boom")}, nil,
			"hpa = an HPA at 0.50 (kube-state-metrics could not be read for an HPA of shop/web: kube_horizontalpodautoscaler_info{"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := backtest.DefaultOptions()
			o.HPA = userHPA(context.Background(), tc.q, p, o, tc.metrics, end.Add(-7*24*time.Hour), end, 5*time.Minute)
			if got := o.HPALabel(); !strings.HasPrefix(got, tc.want) {
				t.Errorf("label\n%s\nwant\n%s…", got, tc.want)
			}
		})
	}
}

// TestReplayLeadTime: the what-if replays pods with the measured start-up and decision path
// when enough start-ups were recorded, says so, and warns when the policy's lead_time is below
// them; otherwise it keeps lead_time and says why.
func TestReplayLeadTime(t *testing.T) {
	p := &config.Policy{Name: "m", LeadTime: 2 * time.Minute}
	base := backtest.Options{StartupDelay: 2 * time.Minute}
	for _, tc := range []struct {
		name              string
		m                 exporter.LeadTimeMeasure
		err               error
		startup, decision time.Duration
		say               []string
	}{
		{"measured, lead_time short", exporter.LeadTimeMeasure{StartupMedian: 4 * time.Minute, Startup90: 5 * time.Minute, Startups: 12, PathMedian: 45 * time.Second, PathOK: true},
			nil, 4 * time.Minute, 45 * time.Second, []string{"median start-up 4m", "0.9: 5m", "12 start-ups", "each at least 3m34s plus an exponential extra", "decision path 45s", "lead_time 2m, less than", "5m45s", "expect overload"}},
		{"measured, no path, lead_time enough", exporter.LeadTimeMeasure{StartupMedian: 30 * time.Second, Startup90: time.Minute, Startups: 6},
			nil, 30 * time.Second, 0, []string{"median start-up 30s", "at once (no decision path measured)", "sizes for lead_time 2m"}},
		{"measured from the raw series", exporter.LeadTimeMeasure{StartupMedian: 2 * time.Minute, Startup90: 2 * time.Minute, Startups: 9, Raw: true},
			nil, 2 * time.Minute, 0, []string{"median start-up 2m", "over 9 start-ups, read from kube_pod_created and kube_pod_status_ready_time", "each exactly that"}},
		{"measured, some unreadable", exporter.LeadTimeMeasure{StartupMedian: 2 * time.Minute, Startup90: 2 * time.Minute, Startups: 9, Unreadable: 2},
			nil, 2 * time.Minute, 0, []string{"over 9 start-ups; 2 more recorded as no number of seconds (NaN or infinite), left out"}},
		{"too few", exporter.LeadTimeMeasure{StartupMedian: time.Minute, Startups: 3}, nil, 2 * time.Minute, 0, []string{"3 pod start-ups", "5 needed", "lead_time 2m"}},
		{"too few, some unreadable", exporter.LeadTimeMeasure{Startups: 0, Unreadable: 4}, nil, 2 * time.Minute, 0, []string{"0 pod start-ups", "5 needed; 4 more recorded as no number of seconds"}},
		{"error", exporter.LeadTimeMeasure{}, errors.New("bad_data"), 2 * time.Minute, 0, []string{"not measured (bad_data)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base
			note := replayLeadTime(tc.m, tc.err, p, 15*time.Second, &o)
			startup, spread := tc.startup, time.Duration(0)
			if tc.err == nil && tc.m.Startups >= exporter.MinStartups {
				startup, spread = backtest.StartupFit(tc.m.StartupMedian, tc.m.Startup90)
			}
			if o.StartupDelay != startup || o.StartupSpread != spread || o.DecisionDelay != tc.decision {
				t.Errorf("replayed with start-up %v + spread %v and decision delay %v, want %v + %v and %v", o.StartupDelay, o.StartupSpread, o.DecisionDelay, startup, spread, tc.decision)
			}
			for _, s := range tc.say {
				if !strings.Contains(note, s) {
					t.Errorf("note %q does not say %q", note, s)
				}
			}
		})
	}
}

// TestReplayMeasuredLead: a forecasting policy that left lead_time unset is replayed sizing for
// the lead time the exporter would measure from the same start-ups (the 0.9 start-up plus the
// 0.9 decision path, 4 intervals until 3 scale-ups are measured, rounded up to the interval),
// not the default 2 minutes it sizes for only until 5 start-ups are measured; a policy that set
// lead_time keeps it.
func TestReplayMeasuredLead(t *testing.T) {
	const interval = 15 * time.Second
	for _, tc := range []struct {
		name     string
		p        config.Policy
		m        exporter.LeadTimeMeasure
		lead     time.Duration // the runner's, after the replay is set
		say, not []string
	}{
		{"unset, paths measured", config.Policy{LeadTime: 2 * time.Minute, LeadTimeMeasured: true, Model: "auto", HistoryStep: time.Minute},
			exporter.LeadTimeMeasure{StartupMedian: 4 * time.Minute, Startup90: 5 * time.Minute, Startups: 12, PathMedian: 45 * time.Second, Path90: 70 * time.Second, Paths: 5, PathOK: true},
			6*time.Minute + 15*time.Second, []string{"lead_time unset", "6m15s", "0.9 start-up 5m", "decision path 1m10s, its 0.9 quantile"}, []string{"expect overload"}},
		{"unset, too few paths", config.Policy{LeadTime: 2 * time.Minute, LeadTimeMeasured: true, Model: "auto", HistoryStep: time.Minute},
			exporter.LeadTimeMeasure{StartupMedian: 4 * time.Minute, Startup90: 5*time.Minute + 10*time.Second, Startups: 12, PathMedian: 45 * time.Second, Path90: 70 * time.Second, Paths: 2, PathOK: true},
			6*time.Minute + 15*time.Second, []string{"lead_time unset", "6m15s", "decision path 1m, 4 intervals of 15s until 3 scale-ups"}, []string{"expect overload"}},
		{"unset, too few start-ups", config.Policy{LeadTime: 2 * time.Minute, LeadTimeMeasured: true, Model: "auto", HistoryStep: time.Minute},
			exporter.LeadTimeMeasure{StartupMedian: 4 * time.Minute, Startup90: 5 * time.Minute, Startups: 3},
			2 * time.Minute, []string{"lead_time 2m (lead_time unset: the exporter sizes for it until 5 start-ups are measured)"}, nil},
		{"set", config.Policy{LeadTime: 2 * time.Minute, Model: "auto", HistoryStep: time.Minute},
			exporter.LeadTimeMeasure{StartupMedian: 4 * time.Minute, Startup90: 5 * time.Minute, Startups: 12},
			2 * time.Minute, []string{"sizes for lead_time 2m, less than", "expect overload"}, []string{"unset"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := policy.Config{LeadTime: tc.p.LeadTime, LeadSteps: policy.Horizon(tc.p.LeadTime, tc.p.HistoryStep)}
			o := backtest.Options{Runner: &rc}
			note := replayLeadTime(tc.m, nil, &tc.p, interval, &o)
			if rc.LeadTime != tc.lead || rc.LeadSteps != policy.Horizon(tc.lead, time.Minute) {
				t.Errorf("runner sizes for %v over %d steps, want %v over %d", rc.LeadTime, rc.LeadSteps, tc.lead, policy.Horizon(tc.lead, time.Minute))
			}
			for _, s := range tc.say {
				if !strings.Contains(note, s) {
					t.Errorf("note %q does not say %q", note, s)
				}
			}
			for _, s := range tc.not {
				if strings.Contains(note, s) {
					t.Errorf("note %q says %q", note, s)
				}
			}
		})
	}
}
