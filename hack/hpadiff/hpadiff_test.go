package hpadiff

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apidefaults "k8s.io/kubernetes/pkg/apis/autoscaling/v2"

	"github.com/debi-scaler/debi/scaling"
)

var behaviors = []scaling.HPABehavior{scaling.BehaviorDefault, scaling.BehaviorNone}

// TestDifferential runs every scenario through the real controller under both behaviours, then
// drives scaling.HPA at the same sync times with the same current and ready counts and load,
// and requires the same replica count after every sync.
func TestDifferential(t *testing.T) {
	total := 0
	for _, sc := range scenarios() {
		for _, b := range behaviors {
			t.Run(sc.name+"/"+string(b), func(t *testing.T) {
				recs := runController(t, sc, b)
				if t.Failed() {
					return
				}
				checkHarness(t, sc, b, recs)
				if compare(t, sc, b, recs) {
					total += len(recs)
					t.Logf("%s/%s: %d syncs equal, %d rescales, sizes %d..%d", sc.name, b, len(recs), rescales(recs), minSize(recs), maxSize(recs))
					if os.Getenv("HPADIFF_TRACE") != "" {
						t.Logf("current(ready)→after per sync: %s", sizes(recs))
					}
				}
			})
		}
	}
	t.Logf("%d syncs compared in all", total)
}

// checkHarness makes sure the run is the one the scenario describes.
func checkHarness(t *testing.T, sc scenario, b scaling.HPABehavior, recs []syncRecord) {
	t.Helper()
	for k, r := range recs {
		want := sc.initial
		if k > 0 {
			want = recs[k-1].after
		}
		if n, ok := sc.resize[k]; ok {
			want = n
		}
		if r.current != want {
			t.Fatalf("sync %d: the controller read %d replicas, want %d", k, r.current, want)
		}
	}
	if w := sc.want[b]; w != nil {
		for k, n := range w {
			if recs[k].after != n {
				t.Fatalf("controller: %s, want the first syncs to reach %v", sizes(recs), w)
			}
		}
	}
}

// compare drives debi's model through the recorded syncs and reports every disagreement.
func compare(t *testing.T, sc scenario, b scaling.HPABehavior, recs []syncRecord) bool {
	t.Helper()
	h := scaling.NewHPA(sc.params(b))
	bad := 0
	for k, r := range recs {
		in := scaling.Input{Time: r.at, Current: r.current, Ready: r.ready, W: math.NaN(), WindowW: math.NaN()}
		if r.usage != outage && r.current > 0 {
			in.W = float64(r.usage) / (float64(r.current) * float64(sc.request))
		}
		d := h.Recommend(in)
		if d.Replicas == r.after {
			continue
		}
		bad++
		t.Errorf("sync %d (t=%v): current %d, ready %d, usage %s (W %.6g): controller %d, scaling.HPA %d (%s)",
			k, r.at.Sub(recs[0].at), r.current, r.ready, usageString(r.usage), in.W, r.after, d.Replicas, d.Reason)
		if bad == 1 {
			lo := max(0, k-8)
			t.Logf("syncs %d..%d before it: %s", lo, k, sizes(recs[lo:k+1]))
		}
		if bad >= 10 {
			t.Fatal("too many mismatches")
		}
	}
	return bad == 0
}

func rescales(recs []syncRecord) int {
	n := 0
	for _, r := range recs {
		if r.after != r.current {
			n++
		}
	}
	return n
}

func minSize(recs []syncRecord) int32 {
	m := recs[0].after
	for _, r := range recs {
		m = min(m, r.current, r.after)
	}
	return m
}

func maxSize(recs []syncRecord) int32 {
	m := recs[0].after
	for _, r := range recs {
		m = max(m, r.current, r.after)
	}
	return m
}

func usageString(u int64) string {
	if u == outage {
		return "outage"
	}
	return fmt.Sprintf("%dm", u)
}

// sizes is the run as current→after per sync, run-length encoded.
func sizes(recs []syncRecord) string {
	var b strings.Builder
	for i := 0; i < len(recs); {
		j := i
		for j+1 < len(recs) && recs[j+1].current == recs[i].current && recs[j+1].after == recs[i].after && recs[j+1].ready == recs[i].ready {
			j++
		}
		if b.Len() > 0 {
			b.WriteString(" ")
		}
		r := recs[i]
		if r.ready != r.current {
			fmt.Fprintf(&b, "%d(%dr)", r.current, r.ready)
		} else {
			fmt.Fprintf(&b, "%d", r.current)
		}
		if r.after != r.current {
			fmt.Fprintf(&b, "→%d", r.after)
		}
		if j > i {
			fmt.Fprintf(&b, "×%d", j-i+1)
		}
		i = j + 1
	}
	return b.String()
}

// TestDefaultBehaviorIsDebisDefaults: the behavior the API server fills in is what
// scaling.DefaultParams models (4 pods or 100 % per 15 s up, the larger; 100 % per 15 s down;
// no scale-up stabilisation; the scale-down window left to the controller's flag).
func TestDefaultBehaviorIsDebisDefaults(t *testing.T) {
	p := scaling.DefaultParams()
	up, down := apidefaults.GenerateHPAScaleUpRules(nil), apidefaults.GenerateHPAScaleDownRules(nil)
	wantUp := []autoscalingv2.HPAScalingPolicy{
		{Type: autoscalingv2.PodsScalingPolicy, Value: p.ScaleUpPods, PeriodSeconds: int32(p.ScaleUpPeriod / time.Second)},
		{Type: autoscalingv2.PercentScalingPolicy, Value: int32(p.ScaleUpPercent), PeriodSeconds: int32(p.ScaleUpPeriod / time.Second)},
	}
	wantDown := []autoscalingv2.HPAScalingPolicy{
		{Type: autoscalingv2.PercentScalingPolicy, Value: int32(p.ScaleDownPercent), PeriodSeconds: int32(p.ScaleDownPeriod / time.Second)},
	}
	switch {
	case fmt.Sprint(up.Policies) != fmt.Sprint(wantUp) || *up.SelectPolicy != autoscalingv2.MaxChangePolicySelect:
		t.Errorf("scale-up rules %v (%s), debi models %v (Max)", up.Policies, *up.SelectPolicy, wantUp)
	case time.Duration(*up.StabilizationWindowSeconds)*time.Second != p.ScaleUpStabilization:
		t.Errorf("scale-up stabilisation %ds, debi %v", *up.StabilizationWindowSeconds, p.ScaleUpStabilization)
	case fmt.Sprint(down.Policies) != fmt.Sprint(wantDown) || *down.SelectPolicy != autoscalingv2.MaxChangePolicySelect:
		t.Errorf("scale-down rules %v (%s), debi models %v (Max)", down.Policies, *down.SelectPolicy, wantDown)
	case down.StabilizationWindowSeconds != nil:
		t.Errorf("scale-down stabilisation %d, want nil (the controller's flag)", *down.StabilizationWindowSeconds)
	case up.Tolerance != nil || down.Tolerance != nil:
		t.Error("the API defaults now set a tolerance: debi models the controller's flag only")
	case p.ScaleDownStabilization != 5*time.Minute || p.Tolerance != 0.1:
		t.Errorf("debi's defaults %v/%v are not the controller's flags' 5m/0.1", p.ScaleDownStabilization, p.Tolerance)
	}
}

// ---- scenarios ----

func repeat(u int64, n int) []int64 {
	s := make([]int64, n)
	for i := range s {
		s[i] = u
	}
	return s
}

func concat(parts ...[]int64) []int64 {
	var s []int64
	for _, p := range parts {
		s = append(s, p...)
	}
	return s
}

// linear goes from a to b in n syncs.
func linear(a, b int64, n int) []int64 {
	s := make([]int64, n)
	for i := range s {
		s[i] = a + (b-a)*int64(i)/int64(max(n-1, 1))
	}
	return s
}

// cycle repeats pattern to n syncs.
func cycle(n int, pattern ...int64) []int64 {
	s := make([]int64, n)
	for i := range s {
		s[i] = pattern[i%len(pattern)]
	}
	return s
}

func scenarios() []scenario {
	s := []scenario{
		{
			// Very high load on one pod: the rate limits. 100 cores on a 500m request.
			name: "ramp-from-one", request: 500, target: 0.5, min: 1, max: 50, initial: 1,
			usage: concat(repeat(100000, 12), repeat(2000, 30)),
			want: map[scaling.HPABehavior][]int32{
				scaling.BehaviorDefault: {5, 10, 20, 40, 50},
				scaling.BehaviorNone:    {4, 8, 16, 32, 50},
			},
		},
		{
			// Steady at target, a burst, then low load: the 300 s stabilisation, then down.
			name: "drop-after-high-load", request: 1000, target: 0.5, min: 1, max: 40, initial: 10,
			usage: concat(repeat(5000, 8), repeat(12000, 8), repeat(1500, 40), repeat(0, 10)),
		},
		{
			// Whole percents at the tolerance edges, 1000m pods at 50 %. On 10 pods 5500m is 55 %
			// (ratio 1.1, inside), 5549m still 55 %, 4500m and 4501m 45 % (inside); 5600m is
			// 56 % → ceil(1.12·10) = 12. On 12 pods 6600m/5400m are the edges and 5390m is 44 %
			// → ceil(0.88·12) = 11 once the window has passed; on 11 pods 4950m is exactly
			// 45 % (inside), 4940m 44 % → 10; on 10 pods 5600m again → 12, then 6720m on 12 is
			// 56 % → 14.
			name: "tolerance-edge", request: 1000, target: 0.5, min: 1, max: 30, initial: 10,
			usage: concat(cycle(30, 5500, 4500, 5549, 4501, 5000), repeat(5600, 1),
				cycle(25, 6600, 5400, 6650, 5401), repeat(5390, 25), repeat(4950, 25), repeat(4940, 25),
				cycle(10, 5549, 5451, 4550), repeat(5600, 1), repeat(6720, 3), repeat(7000, 10)),
		},
		{
			// An 80 % target, rising and falling.
			name: "target-80", request: 500, target: 0.8, min: 2, max: 30, initial: 3,
			usage: concat(linear(1200, 9000, 30), repeat(9000, 10), linear(9000, 500, 40), repeat(500, 25)),
		},
		{
			// The metrics API fails for 6 minutes (longer than the window), then low load: no
			// recommendation was recorded meanwhile, so the HPA scales down at once. A short
			// outage inside the window after it.
			name: "metrics-outage", request: 1000, target: 0.5, min: 1, max: 30, initial: 8,
			usage: concat(repeat(4000, 6), repeat(outage, 24), repeat(800, 10), repeat(16000, 4),
				repeat(outage, 4), repeat(1000, 30)),
		},
		{
			// Scale-up and scale-down past max and min, and sizes set out of bounds by hand.
			name: "bounds", request: 1000, target: 0.5, min: 2, max: 6, initial: 8,
			usage:  concat(repeat(4000, 10), repeat(20000, 10), repeat(100, 30), repeat(3000, 10)),
			resize: map[int]int32{30: 1, 45: 9},
		},
		{
			// Someone else changes the size mid-run, including to zero (scaling disabled)
			// and back: never a scale event for the controller.
			name: "external-resize", request: 500, target: 0.5, min: 1, max: 40, initial: 3,
			usage:  concat(repeat(750, 10), repeat(6000, 20), repeat(1000, 40), repeat(9000, 20)),
			resize: map[int]int32{10: 9, 12: 2, 40: 12, 50: 0, 55: 3, 72: 30},
		},
		{
			// Low load from the first sync: the size found then is a recommendation, so the
			// HPA holds it for the window after start.
			name: "start-low", request: 1000, target: 0.5, min: 1, max: 20, initial: 12,
			usage: concat(repeat(1200, 30), repeat(9000, 5), repeat(1200, 30)),
		},
		{
			// Whole percents exactly at a boundary, where W·Current/Ready·100 in floats lands a
			// hair below the integer: 4560m over 8 pods is 57 % (→ ceil(1.14·8) = 10, not 9
			// as 56 % would give); 2050m over 5 pods is 41 % (→ ceil(0.82·5) = 5, where 40 %
			// would scale down to 4 once the window has passed).
			name: "float-edge", request: 1000, target: 0.5, min: 1, max: 20, initial: 8,
			usage: concat(repeat(4560, 5), repeat(2050, 30)), resize: map[int]int32{5: 5},
		},
		{
			// Pods above the spec are deleted one half-tick late: after each scale-down the
			// controller sees more ready pods than replicas, and averages over all of them
			// (at sync 6: 3000m over 12 ready pods is 50 %, over the 8 replicas it would be 75 %).
			name: "slow-termination", request: 500, target: 0.5, min: 1, max: 30, initial: 6,
			slowDelete: true,
			usage: concat(repeat(3000, 10), repeat(500, 30), repeat(4000, 10), repeat(1000, 30),
				cycle(30, 6000, 6000, 2000, 2000, 2000)),
			resize: map[int]int32{6: 8, 50: 20, 52: 9, 83: 4},
		},
		{
			// Spelled-out policies with periods longer than the sync, so scale events count
			// at later syncs: up 2 pods or 50 % per 30 s, down 30 % per 90 s, windows 30 s up
			// and 60 s down; sizes set out of bounds are rescaled and counted as events.
			name: "custom-policies", request: 1000, target: 0.5, min: 2, max: 25, initial: 3,
			tweak: func(p *scaling.Params) {
				p.ScaleUpPods, p.ScaleUpPercent, p.ScaleUpPeriod = 2, 50, 30*time.Second
				p.ScaleDownPercent, p.ScaleDownPeriod = 30, 90*time.Second
				p.ScaleUpStabilization, p.ScaleDownStabilization = 30*time.Second, time.Minute
			},
			usage: concat(repeat(1500, 4), repeat(20000, 16), repeat(2000, 20), cycle(40, 9000, 3000, 12000, 1000, 6000),
				repeat(15000, 10), repeat(500, 20)),
			resize: map[int]int32{45: 30, 70: 1, 72: 28},
		},
		{
			// Fast swings against long periods of different lengths (up 4 pods or 100 % per
			// 30 s, down 50 % per 120 s, a 15 s scale-down window): scale-up events are
			// recycled after 30 s (storeScaleEvent) although the scale-down limit looks back 120 s.
			name: "custom-policies-swing", request: 1000, target: 0.5, min: 1, max: 40, initial: 4,
			tweak: func(p *scaling.Params) {
				p.ScaleUpPeriod = 30 * time.Second
				p.ScaleDownPercent, p.ScaleDownPeriod = 50, 2*time.Minute
				p.ScaleDownStabilization = 15 * time.Second
			},
			usage: concat(cycle(60, 8000, 16000, 30000, 2000, 1000, 1000, 6000, 500), cycle(60, 20000, 20000, 500, 500, 12000, 700)),
		},
	}
	for _, d := range []time.Duration{30 * time.Second, 60 * time.Second, 120 * time.Second} {
		// New pods stay Pending (unready) for d: scale-ups with unready pods counted idle.
		s = append(s, scenario{
			name: fmt.Sprintf("startup-%v", d), request: 1000, target: 0.5, min: 1, max: 40, initial: 2,
			startup: d,
			usage: concat(repeat(1000, 4), repeat(6000, 12), repeat(14000, 16), repeat(3000, 30),
				linear(3000, 20000, 20), repeat(500, 30),
				// Bursts that collapse while the new pods are still Pending.
				repeat(1000, 2), repeat(5000, 1), repeat(1600, 10), repeat(9000, 1), repeat(4000, 12)),
		})
	}
	for seed := range uint64(4) {
		s = append(s, randomWalk(seed+1, 300+100*int(seed)))
	}
	return s
}

// randomWalk is a seeded random scenario: a multiplicative random walk of the load with
// occasional jumps, outages and resizes by hand.
func randomWalk(seed uint64, n int) scenario {
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	sc := scenario{
		name:    fmt.Sprintf("random-%d", seed),
		request: []int64{500, 1000}[r.IntN(2)],
		target:  []float64{0.5, 0.6, 0.8}[r.IntN(3)],
		min:     int32(1 + r.IntN(3)),
		startup: time.Duration(r.IntN(5)) * 30 * time.Second,
		resize:  map[int]int32{},
	}
	sc.max = sc.min + int32(8+r.IntN(30))
	sc.slowDelete = sc.startup == 0 && seed%2 == 0
	sc.initial = sc.min + int32(r.IntN(4))
	u := float64(sc.initial) * float64(sc.request) * sc.target
	hi := float64(sc.max) * float64(sc.request) * 1.5
	for i := 0; i < n; i++ {
		switch x := r.Float64(); {
		case x < 0.01 && i > 0: // an outage of 1 to 30 syncs
			for range 1 + r.IntN(30) {
				sc.usage = append(sc.usage, outage)
				i++
			}
		case x < 0.03:
			u *= 3
		case x < 0.05:
			u /= 3
		case x < 0.06 && i > 0:
			sc.resize[len(sc.usage)] = int32(1 + r.IntN(int(sc.max)+5))
		}
		u = math.Min(math.Max(u*math.Exp(r.NormFloat64()*0.12), 0), hi)
		sc.usage = append(sc.usage, int64(u))
	}
	return sc
}
