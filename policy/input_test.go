package policy

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/debi-scaler/debi/scaling"
)

// TestPublishedRoundTrip: a step read back (PublishedOf, then FromPublished and
// PublishedBounds, the webhook's path) decides what the runner decided, at every step of a
// workload that follows its decisions, for a stateless and a stateful rule, a forecast and the
// budget's scale-down load.
func TestPublishedRoundTrip(t *testing.T) {
	for _, name := range []string{"hpa", "apa", "debi", "naive-budget", "naive-budget/priced"} {
		t.Run(name, func(t *testing.T) {
			alg, rule, _ := strings.Cut(name, "/")
			r := newRunner(t, alg, func(c *Config) {
				c.Step, c.LeadSteps, c.LeadTime, c.ObservationWindow = time.Minute, 2, 2*time.Minute, time.Minute
				if rule != "" {
					c.Params.Budget.Rule = scaling.BudgetRule(rule)
				}
			})
			defer r.Close()
			_, stateful := r.alg.(scaling.Stateful)
			current, decided := int32(4), 0
			for i := range 400 {
				// A ramp with a burst every 50 ticks, so that the size moves both ways.
				d := 3 + 0.01*float64(i)
				if i%50 < 5 {
					d *= 2
				}
				now := t0.Add(time.Duration(i) * 15 * time.Second)
				res, err := r.Step(context.Background(), Observation{Time: now, Demand: d, Current: current, Ready: current})
				if err != nil {
					t.Fatal(err)
				}
				pub := PublishedOf(res, current, r.cfg.Request)
				in, hold := FromPublished(pub, scaling.Input{Time: now, Current: current, Ready: current})
				if hold != "" {
					t.Fatalf("step %d: held: %s", i, hold)
				}
				b, _, hold := PublishedBounds(pub, r.cfg.Params, stateful, in.Basis)
				if hold != "" {
					t.Fatalf("step %d: held: %s", i, hold)
				}
				if got := scaling.Decide(r.rule, in.Input, b); got != res.Decision {
					t.Fatalf("step %d: read back %+v, the runner decided %+v (published %+v)", i, got, res.Decision, pub)
				}
				if res.Decision.Replicas != current {
					decided++
				}
				current = res.Decision.Replicas
			}
			if decided < 2 {
				t.Errorf("the size changed %d times: the test exercises nothing", decided)
			}
		})
	}
}

// TestFromPublished: the loads are converted from the size the step saw to the current one, a
// metric's missing load leaves it incomplete, and a size or range that is not one holds.
func TestFromPublished(t *testing.T) {
	nan := math.NaN()
	base := scaling.Input{Current: 8, Ready: 6}
	// Published at 4 replicas, decided at 8: the same demand is half the utilization.
	in, hold := FromPublished(Published{Replicas: 4, W: 0.9, WindowW: 0.5, WNow: 0.8, WDown: nan,
		Metrics: []MetricLoads{{W: 1.2, WindowW: nan, WNow: nan, WDown: nan, Complete: true}, {W: 0, WindowW: nan, WNow: nan, WDown: nan}}}, base)
	if hold != "" || in.Basis != 4 || in.Input.W != 0.45 || in.Input.WindowW != 0.25 || in.Input.WNow != 0.4 || !math.IsNaN(in.Input.WDown) ||
		in.Input.Current != 8 || in.Input.Ready != 6 {
		t.Fatalf("input %+v basis %v hold %q", in.Input, in.Basis, hold)
	}
	if len(in.Metrics) != 2 || in.Metrics[0].W != 0.6 || !in.Complete[0] || in.Complete[1] || in.Metrics[1].W != 0 {
		t.Fatalf("metrics %+v complete %v", in.Metrics, in.Complete)
	}
	// Not read: the current size.
	if in, _ := FromPublished(Published{Replicas: nan, W: 0.5}, base); in.Basis != 8 || in.Input.W != 0.5 {
		t.Fatalf("without load_replicas: %+v basis %v", in.Input, in.Basis)
	}
	for _, bad := range []float64{2.5, -1} {
		if _, hold := FromPublished(Published{Replicas: bad}, base); !strings.Contains(hold, "not a replica count") {
			t.Errorf("load_replicas %v: hold %q", bad, hold)
		}
	}
	// Published at zero (a policy that scales to zero): the loads are at one pod.
	zero := base
	zero.Current, zero.Ready = 0, 0
	if in, hold := FromPublished(Published{Replicas: 0, W: 0.7, Idle: 0}, zero); hold != "" || in.Basis != 1 || in.Input.W != 0.7 || in.Input.Idle != 0 {
		t.Errorf("load_replicas 0: %+v basis %v hold %q", in.Input, in.Basis, hold)
	}
	if in, _ := FromPublished(Published{Replicas: 3, W: 0.7, Idle: 42}, base); in.Input.Idle != 42 {
		t.Errorf("idle %v, want the published 42", in.Input.Idle)
	}
	params := scaling.DefaultParams()
	params.MinReplicas, params.MaxReplicas = 2, 20
	if b, note, hold := PublishedBounds(Published{Floor: 5, Ceiling: 9}, params, false, 4); b != (scaling.Bounds{Lo: 2, Hi: 20, At: 4}) || note != "" || hold != "" {
		t.Errorf("stateless: %+v %q %q", b, note, hold)
	}
	if b, note, _ := PublishedBounds(Published{Floor: 5, Ceiling: 9}, params, true, 4); b != (scaling.Bounds{Lo: 5, Hi: 9, At: 4}) || note != "state allows [5, 9] at 4 replicas" {
		t.Errorf("stateful: %+v %q", b, note)
	}
	if _, _, hold := PublishedBounds(Published{Floor: 5.5, Ceiling: 9}, params, true, 4); !strings.Contains(hold, "not a range of replica counts") {
		t.Errorf("fractional floor: hold %q", hold)
	}
	if _, _, hold := PublishedBounds(Published{Floor: 9, Ceiling: 5}, params, true, 4); !strings.HasPrefix(hold, "published ") {
		t.Errorf("floor above ceiling: hold %q", hold)
	}
	// A policy that scales to zero: the bounds say so, and from zero allow one pod (hpa's state
	// publishes [0, 0] at zero).
	params.MinReplicas = 0
	if b, _, _ := PublishedBounds(Published{Floor: 0, Ceiling: 0}, params, true, 0); b != (scaling.Bounds{Lo: 0, Hi: 1, At: 0, ToZero: true, ZeroAfter: params.ScaleToZeroAfter}) {
		t.Errorf("to zero, at zero: %+v", b)
	}
}
