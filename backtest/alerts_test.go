package backtest

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestBurnReplay: a quiet two days at a 1 % budget, then 15-second ticks overloaded in a row.
// Nineteen minutes of it (the priced rule's first episode after a calm spell, 75 ticks) burn 31
// × the budget's pace over the hour and page once, and open the burn ticket: six hours at more
// than 3 × (5.2 ×). It is less than two days' budget (1,125 s against 1,728 s), so the exhausted
// ticket stays shut; thirty minutes of it (120 ticks, 1,800 s) open it too. One start-up's worth
// (9 ticks) opens none; half the budget's pace spread evenly opens none. The lead time is 2
// minutes, so the page also needs 8 minutes of overload in the hour (it has 19), the burn ticket
// 12 minutes in six hours and the exhausted one 16 in the day.
func TestBurnReplay(t *testing.T) {
	const b, tick, lead = 0.01, 15 * time.Second, 2 * time.Minute
	calm := int(48 * time.Hour / tick)
	for _, tc := range []struct {
		name           string
		x              func(i int) float64 // the overload of tick i after the calm
		ticks          int
		pages, tickets int
	}{
		{"a 75-tick episode", func(i int) float64 { return b2f(i < 75) }, 1440, 1, 1},
		{"a 120-tick episode", func(i int) float64 { return b2f(i < 120) }, 1440, 1, 2},
		{"a 9-tick episode", func(i int) float64 { return b2f(i < 9) }, 1440, 0, 0},
		{"one tick in 200, three days", func(i int) float64 { return b2f(i%200 == 0) }, 3 * calm / 2, 0, 0},
		{"a 75-tick episode counted as shares of half", func(i int) float64 { return 0.5 * b2f(i < 150) }, 1440, 1, 1},
	} {
		r := newBurnReplay(b, tick, lead)
		for range calm {
			r.add(0)
		}
		for i := range tc.ticks {
			r.add(tc.x(i))
		}
		if got := r.fired[0]; got != tc.pages {
			t.Errorf("%s: %d pages, want %d", tc.name, got, tc.pages)
		}
		if got := r.fired[1] + r.fired[2]; got != tc.tickets {
			t.Errorf("%s: %d tickets (burn %d, exhausted %d), want %d", tc.name, got, r.fired[1], r.fired[2], tc.tickets)
		}
	}
	// The page waits its two minutes: 35 ticks put the hour above 14.4 × (35/240 = 14.6 %), and
	// it fires 2 minutes after the condition first holds, not before.
	r := newBurnReplay(b, tick, lead)
	for range calm {
		r.add(0)
	}
	first := -1
	for i := range 200 {
		r.add(1)
		if r.fired[0] == 1 && first < 0 {
			first = i
		}
	}
	if want := 35 - 1 + int(2*time.Minute/tick); first != want {
		t.Errorf("the page fired at tick %d of the episode, want %d (35 ticks to 14.4 × the hour, then 2 m)", first, want)
	}
	if newBurnReplay(0, tick, lead) != nil || newBurnReplay(b, 0, lead) != nil {
		t.Error("a replay without a budget or a tick, want none")
	}
}

// TestBurnReplayLeads: at a 0.5 % budget with pods that take 2 minutes to start, the episodes a
// budget is spent in (a missed step seen a tick late, then a start-up: 9 ticks) reach 14.4 ×
// the budget's pace over the hour at two: 18 ticks, 270 s against 259 s. They do not page
// until the hour holds more than four lead times (480 s); a workload overloaded all the time
// pages once it has (33 ticks), two minutes later.
func TestBurnReplayLeads(t *testing.T) {
	const b, tick, lead = 0.005, 15 * time.Second, 2 * time.Minute
	calm := int(48 * time.Hour / tick)
	replay := func(x func(i int) float64, ticks int) (*burnReplay, int) {
		r := newBurnReplay(b, tick, lead)
		for range calm {
			r.add(0)
		}
		first := -1
		for i := range ticks {
			r.add(x(i))
			if r.fired[0] == 1 && first < 0 {
				first = i
			}
		}
		return r, first
	}
	// Episodes of 9 ticks, 10 minutes apart from their starts.
	every := func(n int) func(i int) float64 {
		return func(i int) float64 { return b2f(i < n*40 && i%40 < 9) }
	}
	for _, tc := range []struct {
		episodes, pages int
	}{{2, 0}, {3, 0}, {4, 1}} {
		if r, _ := replay(every(tc.episodes), 480); r.fired[0] != tc.pages {
			t.Errorf("%d episodes of 9 ticks within the hour: %d pages, want %d", tc.episodes, r.fired[0], tc.pages)
		}
	}
	// Without the lead times, two episodes would have paged: the hour's burn is above 14.4.
	r, _ := replay(every(2), 80)
	if burn := r.burn(2); burn <= 14.4 {
		t.Errorf("two episodes: burn %.1f over the hour, want above 14.4 (the test no longer tests the lead times)", burn)
	}
	if _, first := replay(func(int) float64 { return 1 }, 200); first != 33-1+int(2*time.Minute/tick) {
		t.Errorf("overloaded all the time: the page fired at tick %d, want %d (33 ticks, 495 s > 480 s, then 2 m)", first, 33-1+int(2*time.Minute/tick))
	}
}

// TestBurnReplayKeep: keep_firing_for makes one alert of one burn that pauses. At a 1 % budget
// with 2-minute start-ups:
//   - A workload overloaded in 3-minute episodes every 40 minutes for a day (7.5 %, a fault) is
//     above 3 × over six hours throughout, but its 30-minute window lets go for ten minutes
//     between episodes: without keep_firing_for the burn ticket reopens at 32 of the day's 36
//     episodes; with its hour it is one ticket. The exhausted ticket opens once either way;
//     nothing pages (7.5 × the pace over the hour).
//   - A workload overloaded for 30 minutes, then served for 8, then overloaded again: the 5
//     minutes' burn falls under 14.4 × for about 14 ticks, and the page fires twice without
//     keep_firing_for, once with its 10 minutes.
func TestBurnReplayKeep(t *testing.T) {
	const b, tick, lead = 0.01, 15 * time.Second, 2 * time.Minute
	calm := int(48 * time.Hour / tick)
	run := func(x func(i int) float64, ticks int) *burnReplay {
		r := newBurnReplay(b, tick, lead)
		for range calm {
			r.add(0)
		}
		for i := range ticks {
			r.add(x(i))
		}
		return r
	}
	episodes := func(i int) float64 { return b2f(i%160 < 12) }
	pause := func(i int) float64 { return b2f(i < 120 || i >= 152) }
	shipped := burnAlerts
	defer func() { burnAlerts = shipped }()
	for _, tc := range []struct {
		name                       string
		keep                       bool
		pages, burnTicket, exhaust int
	}{
		{"without keep_firing_for", false, 0, 0, 1},
		{"as shipped", true, 0, 1, 1},
	} {
		burnAlerts = shipped
		if !tc.keep {
			for i := range burnAlerts {
				burnAlerts[i].keep = 0
			}
		}
		r := run(episodes, int(24*time.Hour/tick))
		if tc.keep && (r.fired[0] != tc.pages || r.fired[1] != tc.burnTicket || r.fired[2] != tc.exhaust) {
			t.Errorf("episodes, %s: %d pages, %d burn tickets, %d exhausted, want %d, %d, %d", tc.name, r.fired[0], r.fired[1], r.fired[2], tc.pages, tc.burnTicket, tc.exhaust)
		}
		if !tc.keep && (r.fired[0] != 0 || r.fired[1] < 30 || r.fired[2] != 1) {
			t.Errorf("episodes, %s: %d pages, %d burn tickets, %d exhausted, want 0, at least 30 (one an episode once six hours hold them), 1", tc.name, r.fired[0], r.fired[1], r.fired[2])
		}
		want := map[bool]int{false: 2, true: 1}[tc.keep]
		if r := run(pause, 240); r.fired[0] != want {
			t.Errorf("a pause of 8 minutes, %s: %d pages, want %d", tc.name, r.fired[0], want)
		}
	}
}

func b2f(v bool) float64 {
	if v {
		return 1
	}
	return 0
}

// TestAlertsAsShipped: the replayed alerts are the ones rules/debi.alerts.yaml ships: each one's
// windows, factor, lead times and duration are in an alert's expression and its for.
func TestAlertsAsShipped(t *testing.T) {
	b, err := os.ReadFile("../rules/debi.alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(string(b), "- alert: ")
	prom := func(d time.Duration) string {
		if d%(24*time.Hour) == 0 {
			return fmt.Sprintf("%dd", d/(24*time.Hour))
		}
		if d%time.Hour == 0 {
			return fmt.Sprintf("%dh", d/time.Hour)
		}
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	space := regexp.MustCompile(`\s+`)
	for _, a := range burnAlerts {
		var want []string
		if a.exhausted > 0 {
			want = []string{fmt.Sprintf("increase(debi_budget_overloaded_seconds_total[%s]) / 60 > %g * %g * debi_budget_overload_budget", prom(burnWindows[a.long]), a.exhausted, burnWindows[a.long].Minutes())}
		} else {
			want = []string{fmt.Sprintf("policy:debi_budget_burn_rate:ratio_rate%s > %g", prom(burnWindows[a.long]), a.factor)}
		}
		want = append(want, fmt.Sprintf("policy:debi_budget_burn_rate:ratio_rate%s > %g", prom(burnWindows[a.short]), a.factor),
			fmt.Sprintf("and increase(debi_budget_overloaded_seconds_total[%s]) > %g * (debi_policy_lead_time_seconds or 0 * debi_budget_overload_budget)", prom(burnWindows[a.long]), a.leads),
			"for: "+prom(a.hold), "keep_firing_for: "+prom(a.keep))
		found := false
		for _, bl := range blocks {
			bl = space.ReplaceAllString(bl, " ")
			ok := strings.HasPrefix(bl, "DebiOverloadBudget")
			for _, w := range want {
				ok = ok && strings.Contains(bl, w)
			}
			found = found || ok
		}
		if !found {
			t.Errorf("%s: no alert in rules/debi.alerts.yaml has %q", a.name, want)
		}
	}
}
