package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/debi-scaler/debi/backtest"
)

func sc3(m map[string][4]float64) scores {
	out := scores{}
	for c, v := range m {
		out[c] = map[string]map[string]score{
			"A": {"linear": {mean: v[0]}, "step": {mean: v[1]}},
			"B": {"linear": {mean: v[2]}, "step": {mean: v[3]}},
		}
	}
	return out
}

// TestChoose: a candidate must beat the default on the half under both demand models to be
// chosen; winning under one and losing under the other is no win.
func TestChoose(t *testing.T) {
	sc := sc3(map[string][4]float64{
		"default":    {0.98, 0.99, 0.90, 0.94},
		"linearOnly": {0.90, 1.00, 0.85, 0.99}, // the lowest mean on A, but loses under step
		"both":       {0.97, 0.98, 0.91, 0.93}, // beats the default on A, loses on B under linear
		"bOnly":      {0.99, 0.99, 0.88, 0.92},
	})
	names := []string{"default", "linearOnly", "both", "bOnly"}
	if got := choose(sc, names, "A"); got != "both" {
		t.Fatalf("chosen on A: %q, want both", got)
	}
	if beats(sc, "both", "B") {
		t.Fatal("both does not beat the default on B under linear demand")
	}
	if got := choose(sc, names, "B"); got != "bOnly" {
		t.Fatalf("chosen on B: %q, want bOnly", got)
	}
	// More traces out of the overload band is no win, whatever the frontier ratio.
	s := sc["bOnly"]["B"]["step"]
	s.outside = 1
	sc["bOnly"]["B"]["step"] = s
	if got := choose(sc, names, "B"); got != "default" {
		t.Fatalf("chosen on B with bOnly out of band: %q, want default", got)
	}
	// Not run: no choice.
	sc["default"]["A"]["step"] = score{mean: math.NaN()}
	if got := choose(sc, names, "A"); got != "" {
		t.Fatalf("chosen with the default not run: %q", got)
	}
}

func TestScoreOf(t *testing.T) {
	res := map[string]traceResult{
		"p1": {Trace: "p1", Class: "periodic", Runs: []run{{Policy: "budget", FrontierRatio: 0.9, Overload: 0.01}}},
		"p2": {Trace: "p2", Class: "periodic", Runs: []run{{Policy: "budget", FrontierRatio: 1.1, Overload: 0.002}}},
		"b1": {Trace: "b1", Class: "bursty", Unavoidable: 0.1, Runs: []run{{Policy: "budget", FrontierRatio: 0.8, Overload: 0.11}}},
	}
	s := scoreOf(res, []string{"p1", "p2", "b1"}, "budget", 0.01)
	if math.Abs(s.medians["periodic"]-1.0) > 1e-12 || s.medians["bursty"] != 0.8 || math.Abs(s.mean-0.9) > 1e-12 {
		t.Fatalf("medians %v, mean %v", s.medians, s.mean)
	}
	// p2 spends 0.2 % of a 1 % budget; b1's 11 % less the unavoidable 10 % is in the band.
	if s.outside != 1 || s.above != 1 {
		t.Fatalf("outside %d, above %d; want 1 and 1", s.outside, s.above)
	}
	if s := scoreOf(res, []string{"p1", "missing"}, "budget", 0.01); s.ok() {
		t.Fatal("a half with a trace not run scored")
	}
}

func TestSplice(t *testing.T) {
	f := filepath.Join(t.TempDir(), "r.md")
	if err := os.WriteFile(f, []byte("# R\n\nin sample\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, sec := range []string{"first\n", "second\n"} {
		if err := splice(f, sec); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(f)
	got := string(b)
	if !strings.HasPrefix(got, "# R\n\nin sample\n") || strings.Contains(got, "first") || strings.Count(got, beginMarker) != 1 || !strings.Contains(got, "second\n"+endMarker) {
		t.Fatalf("spliced file:\n%s", got)
	}
}

// TestChooseTarget: the target chosen without hindsight is the largest whose median avoidable
// overload over the half is within the budget; the unavoidable share does not count, and no
// target is chosen when none qualifies.
func TestChooseTarget(t *testing.T) {
	tr := func(unavoidable float64, over ...float64) traceResult {
		r := traceResult{Unavoidable: unavoidable}
		for i, o := range over {
			r.Frontier = append(r.Frontier, point{Target: 0.5 + 0.1*float64(i), Cost: 10 - float64(i), Overload: o})
		}
		return r
	}
	ts := map[string]traceResult{
		"a": tr(0, 0.001, 0.005, 0.02),
		"b": tr(0, 0.002, 0.008, 0.03),
		"c": tr(0.05, 0.051, 0.055, 0.09), // 0.1 %, 0.5 %, 4 % avoidable
	}
	got, ok := chooseTarget(ts, []string{"a", "b", "c"}, 0.01)
	if !ok || math.Abs(got-0.6) > 1e-9 {
		t.Fatalf("chose %v (%v), want 0.6: medians 0.2 %%, 0.5 %%, 3 %%", got, ok)
	}
	if _, ok := chooseTarget(ts, []string{"a", "b", "c"}, 0.0001); ok {
		t.Fatal("chose a target although every median is above a budget of 0.01 %")
	}
}

// TestReadUndefinedAsNaN: a ratio the backtest wrote as null (undefined) or did not write reads
// as NaN, not 0; floor_closed is backtest.FloorClosed of the frontier ratio and the bound at
// the run's own overload, whatever the field of an older report says.
func TestReadUndefinedAsNaN(t *testing.T) {
	var rep report
	err := json.Unmarshal([]byte(`{"traces": [
		{"trace": "a", "class": "bursty", "frontier_floor": 0.8, "oracle_frontier_ratio": null,
		 "runs": [{"policy": "budget", "frontier_ratio": 0.9, "frontier_bound": 0.7, "floor_closed": 0.5, "gap_closed": null},
		          {"policy": "old", "frontier_ratio": 1.1}]},
		{"trace": "b", "class": "smooth", "frontier_floor": null, "runs": [{"policy": "budget", "frontier_ratio": 0.9, "floor_closed": null}]}]}`), &rep)
	if err != nil {
		t.Fatal(err)
	}
	a, b := rep.Traces[0], rep.Traces[1]
	budget, _ := a.run("budget")
	old, _ := a.run("old")
	if budget.FloorClosed != 0.5 || !math.IsNaN(budget.GapClosed) || !math.IsNaN(a.OracleFR) || !math.IsNaN(old.FloorClosed) || !math.IsNaN(old.Bound) {
		t.Fatalf("read %+v, %+v, oracle %v: want floor_closed 0.5 and NaN for every null or absent ratio", budget, old, a.OracleFR)
	}
	// (1 − 0.9)/(1 − 0.7), not the band's 0.5 the field of an older report holds.
	if got := a.floorClosed(budget); math.Abs(got-1.0/3) > 1e-12 {
		t.Errorf("floor_closed at the run's own overload: %v, want 1/3", got)
	}
	if got := a.floorClosed(old); !math.IsNaN(got) {
		t.Errorf("floor_closed of a report without the bound: %v, want undefined", got)
	}
	rb, _ := b.run("budget")
	if got := b.floorClosed(rb); !math.IsNaN(b.Floor) || !math.IsNaN(got) {
		t.Errorf("no floor: floor %v, floor_closed %v; want both undefined", b.Floor, got)
	}
}

// TestMedianDefinedOnly: medians are over the defined values, with their number when some are
// not.
func TestMedianDefinedOnly(t *testing.T) {
	nan := math.NaN()
	if got := median([]float64{nan, 3, 1, nan}); got != 2 {
		t.Errorf("median of NaN, 3, 1, NaN: %v, want 2", got)
	}
	for _, tc := range []struct {
		v    []float64
		want string
	}{
		{[]float64{0.5, 0.8}, "0.650"},
		{[]float64{0.5, nan, 0.8}, "0.650 n=2"},
		{[]float64{nan, nan}, "-"},
		{nil, "-"},
	} {
		if got := medianText(tc.v); got != tc.want {
			t.Errorf("medianText(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

// TestTablesCarryFloorClosed: the per-half table and the floor table carry budget's
// floor_closed per trace ("-" where undefined) and its class medians over the defined traces.
func TestTablesCarryFloorClosed(t *testing.T) {
	tr := func(name, class string, floor, fr float64) traceResult {
		return traceResult{Trace: name, Class: class, Floor: floor, OracleFR: 0.7, Runs: []run{
			{Policy: "budget", FrontierRatio: fr, FloorClosed: backtest.FloorClosed(fr, floor), GapClosed: 0.1, Bound: floor,
				Episodes: 7, MissChance: backtest.BandMissChance(34.8, 62, 7)},
			{Policy: "hpa", FrontierRatio: 1, FloorClosed: backtest.FloorClosed(1, floor), GapClosed: 0}}}
	}
	m := map[string]traceResult{
		"p1": tr("p1", "periodic", 0.8, 0.9), // 0.1/0.2 = 0.5
		"p2": tr("p2", "periodic", 1, 0.9),   // the floor saves nothing: undefined
		"p3": tr("p3", "periodic", 0.5, 0.6), // 0.4/0.5 = 0.8
	}
	res := map[string]map[string]traceResult{"linear": m, "step": m}
	half := []string{"p1", "p2", "p3"}
	var per strings.Builder
	perTrace(&per, res, half, 0.01, nil)
	var fl strings.Builder
	floors(&fl, res, map[string][]string{"A": half, "B": nil}, nil, 0.01)
	for _, c := range []struct{ table, out, want string }{
		{"per half", per.String(), "| frontier ratio | floor closed | gap closed |"},
		{"per half", per.String(), "| p1 | periodic | 0.900 / 0.900 | 0.500 / 0.500 |"},
		{"per half", per.String(), "| p2 | periodic | 0.900 / 0.900 | - / - |"},
		{"per half", per.String(), "| 7 (0.30) / 7 (0.30) |"}, // episodes and the band miss chance
		{"per half", per.String(), "| **median** | periodic | **0.900 / 0.900** | 0.650 n=2 / 0.650 n=2 |"},
		{"floor", fl.String(), "| budget's frontier ratio | budget's floor closed |"},
		{"floor", fl.String(), "| p3 | A | periodic | 0.500 / 0.500 | 0.500 / 0.500 | 0.600 / 0.600 | 0.800 / 0.800 | 0.700 / 0.700 |"},
		{"floor", fl.String(), "| p2 | A | periodic | 1.000 / 1.000 | 1.000 / 1.000 | 0.900 / 0.900 | - / - |"},
		{"floor", fl.String(), "Class medians of budget's `floor_closed`"},
		{"floor", fl.String(), "| A | 0.650 n=2 / 0.650 n=2 | - / - | - / - |"},
	} {
		if !strings.Contains(c.out, c.want) {
			t.Errorf("%s table lacks %q:\n%s", c.table, c.want, c.out)
		}
	}
}

// TestBandsChance: a cell outside the band carries the chance that a calibrated policy misses
// there (band_miss_chance), one inside does not, and one without a chance (no episode) says none.
func TestBandsChance(t *testing.T) {
	nan := math.NaN()
	tr := func(over, chance float64) traceResult {
		return traceResult{Trace: "elb", Class: "bursty", Runs: []run{{Policy: "budget", Overload: over, MissChance: chance}}}
	}
	res := results{}
	for _, r := range []struct {
		name   string
		budget float64
	}{{"default-b0.005", 0.005}, {"default", 0.01}, {"default-b0.02", 0.02}} {
		res[r.name] = map[string]map[string]traceResult{
			"linear": {"elb": tr(0.89*r.budget, 0.08)},
			"step":   {"elb": tr(1.78*r.budget, 0.3008)},
		}
	}
	res["default-b0.02"]["step"]["elb"] = tr(0, nan) // no overload, no episode
	var b strings.Builder
	bands(&b, res, map[string][]string{"A": nil, "B": {"elb"}}, nil)
	for _, want := range []string{
		"| elb | B | bursty | 0.89 / **1.78** (chance 0.30) | 0.89 / **1.78** (chance 0.30) | 0.89 / **0.00** |",
		"Outside the band (bold), of 2 (trace, demand) cells: 1 at 0.5 %, 1 at 1 %, 1 at 2 %.",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("bands lack %q:\n%s", want, b.String())
		}
	}
	for v, want := range map[float64]string{0.3008: "0.30", 0.0028: "0.003", 0.0004: "<0.001", nan: "-"} {
		if got := chanceText(v); got != want {
			t.Errorf("chanceText(%v) = %q, want %q", v, got, want)
		}
	}
}
