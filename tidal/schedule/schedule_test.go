package schedule

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
)

func mustLoad(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func mustParse(t testing.TB, rules ...Rule) *Schedule {
	t.Helper()
	s, err := Parse(rules)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestParseValid(t *testing.T) {
	for _, expr := range []string{
		"CRON_TZ=Asia/Shanghai 0 50 16 * * *", // the guide's example
		"TZ=Asia/Shanghai 0 0 8 * * *",
		"  CRON_TZ=Europe/Berlin   30 0 2 * * *  ",
		"0 0 8 * * *",
		"0 */15 8-18 * * MON-FRI",
		"0 0,30 9 1,15 JAN,jul ?",
		"5/10 0 0 * * 0",
		"0 0 0 29 2 *", // fires only in leap years
		"0 0 0 31 * *",
		"0 0 12 1 * 1", // day-of-month OR day-of-week
		"@daily", "@midnight", "@hourly", "@weekly", "@monthly", "@yearly", "@annually",
		"CRON_TZ=America/New_York @daily",
		"CRON_TZ=UTC 0 0 0 * * *",
	} {
		if _, err := Parse([]Rule{{Name: "r", Cron: expr, Replicas: 1}}); err != nil {
			t.Errorf("Parse(%q): %v", expr, err)
		}
	}
	// replicas 0 is a valid level (scale to zero); names only need to be unique.
	mustParse(t, Rule{"night", "0 0 22 * * *", 0}, Rule{"day", "0 0 7 * * *", 4})
}

func TestParseInvalid(t *testing.T) {
	for _, tc := range []struct {
		cron string
		want string
	}{
		{"", "rules[0].cron: \"\": must not be empty"},
		{"   ", "must not be empty"},
		{"* * * * *", "expected exactly 6 fields, found 5"},
		{"0 * * * * * *", "expected exactly 6 fields, found 7"},
		{"60 * * * * *", "above maximum"},
		{"0 60 * * * *", "above maximum"},
		{"0 0 24 * * *", "above maximum"},
		{"0 0 0 0 * *", "below minimum"},
		{"0 0 0 32 * *", "above maximum"},
		{"0 0 0 * 13 *", "above maximum"},
		{"0 0 0 * * 7", "above maximum"},
		{"0 0 0 * * FUNDAY", "failed to parse int"},
		{"0 0 5-3 * * *", "beyond end of range"},
		{"0 */0 * * * *", "step of range should be a positive number"},
		{"0 0 0 30 2 *", "matches no date"},
		{"0 0 0 31 4,6,9,11 *", "matches no date"},
		{"CRON_TZ=", "needs an IANA time zone name"},
		{"CRON_TZ= 0 0 8 * * *", "needs an IANA time zone name"},
		{"CRON_TZ=UTC", "CRON_TZ=UTC must be followed by a schedule"},
		{"TZ=Asia/Shanghai ", "TZ=Asia/Shanghai must be followed by a schedule"},
		{"CRON_TZ=Mars/Olympus 0 0 8 * * *", "unknown time zone \"Mars/Olympus\""},
		{"CRON_TZ=Local 0 0 8 * * *", "CRON_TZ=Local is the controller's zone"},
		{"CRON_TZ=UTC TZ=Asia/Tokyo 0 0 8 * * *", "more than one time zone prefix"},
		{"@every 1h", "@every is not supported"},
		{"CRON_TZ=UTC @every 5m", "@every is not supported"},
		{"@fortnightly", "unrecognized descriptor"},
	} {
		_, err := Parse([]Rule{{Name: "r", Cron: tc.cron, Replicas: 1}})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "rules[0].cron: ") {
			t.Errorf("Parse(%q) = %v, want rules[0].cron: …%s…", tc.cron, err, tc.want)
		}
	}
}

func TestParseErrorsAll(t *testing.T) {
	if _, err := Parse(nil); err == nil || err.Error() != "rules: at least one rule is required" {
		t.Errorf("Parse(nil) = %v", err)
	}
	_, err := Parse([]Rule{
		{Name: "ok", Cron: "0 0 8 * * *", Replicas: 1},
		{Name: "", Cron: "0 0 9 * * *", Replicas: -1},
		{Name: "ok", Cron: "CRON_TZ=UTC", Replicas: 2},
		{Name: "x", Cron: "0 0 8 * *", Replicas: -3},
		{Name: "x", Cron: "0 0 8 * * *", Replicas: 0},
	})
	if err == nil {
		t.Fatal("no error")
	}
	want := []string{
		`rules[1].name: must not be empty`,
		`rules[1].replicas: must be >= 0, got -1`,
		`rules[2].name: "ok" duplicates rules[0].name`,
		`rules[2].cron: "CRON_TZ=UTC": CRON_TZ=UTC must be followed by a schedule`,
		`rules[3].replicas: must be >= 0, got -3`,
		`rules[3].cron: "0 0 8 * *": expected exactly 6 fields, found 5: [0 0 8 * *]`,
		`rules[4].name: "x" duplicates rules[3].name`,
	}
	if got := err.Error(); got != strings.Join(want, "\n") {
		t.Errorf("errors:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	if u, ok := err.(interface{ Unwrap() []error }); !ok || len(u.Unwrap()) != len(want) {
		t.Errorf("want an errors.Join of %d errors, got %T", len(want), err)
	}
}

// robfig v3.0.1 panics on a zone prefix with nothing after it; Parse handles the prefix itself.
func TestRobfigPanicsOnBareZonePrefix(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("robfig no longer panics on \"CRON_TZ=UTC\"; the workaround in parseCron may be dropped")
		}
	}()
	_, _ = parser.Parse("CRON_TZ=UTC")
}

// The default zone is UTC whatever time.Local is; robfig's would be time.Local.
func TestDefaultZoneIsUTC(t *testing.T) {
	saved := time.Local
	time.Local = mustLoad(t, "Asia/Tokyo")
	defer func() { time.Local = saved }()
	s := mustParse(t, Rule{"r", "0 0 8 * * *", 1})
	_, next := s.Next(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC))
	if want := time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC); !next.Equal(want) {
		t.Errorf("Next = %v, want %v", next, want)
	}
}

type probe struct {
	at       time.Time
	rule     string // "" means ok=false
	activ    time.Time
	nextRule string
	next     time.Time
}

func check(t *testing.T, s *Schedule, probes []probe) {
	t.Helper()
	for _, p := range probes {
		r, a, ok := s.At(p.at)
		if p.rule == "" {
			if ok {
				t.Errorf("At(%v) = %s@%v, want none", p.at, r.Name, a)
			}
		} else if !ok || r.Name != p.rule || !a.Equal(p.activ) {
			t.Errorf("At(%v) = %s@%v ok=%v, want %s@%v", p.at, r.Name, a, ok, p.rule, p.activ)
		}
		if p.nextRule != "" {
			nr, n := s.Next(p.at)
			if nr.Name != p.nextRule || !n.Equal(p.next) {
				t.Errorf("Next(%v) = %s@%v, want %s@%v", p.at, nr.Name, n, p.nextRule, p.next)
			}
		}
	}
}

// The guide's Tidal: 16:50 → 3 replicas, 08:00 → 5, Asia/Shanghai.
func TestGuideExample(t *testing.T) {
	sh := mustLoad(t, "Asia/Shanghai")
	s := mustParse(t,
		Rule{"time1", "CRON_TZ=Asia/Shanghai 0 50 16 * * *", 3},
		Rule{"time2", "CRON_TZ=Asia/Shanghai 0 0 8 * * *", 5},
	)
	d := func(day, h, m, sec int) time.Time { return time.Date(2026, 12, day, h, m, sec, 0, sh) }
	check(t, s, []probe{
		{d(1, 17, 0, 0), "time1", d(1, 16, 50, 0), "time2", d(2, 8, 0, 0)}, // started after 16:50
		{d(1, 7, 59, 59), "time1", d(0, 16, 50, 0), "time2", d(1, 8, 0, 0)},
		{d(1, 8, 0, 0), "time2", d(1, 8, 0, 0), "time1", d(1, 16, 50, 0)},
		{d(1, 8, 0, 1), "time2", d(1, 8, 0, 0), "time1", d(1, 16, 50, 0)},
		{d(1, 16, 49, 59), "time2", d(1, 8, 0, 0), "time1", d(1, 16, 50, 0)},
		{d(1, 16, 50, 0), "time1", d(1, 16, 50, 0), "time2", d(2, 8, 0, 0)},
		{d(1, 16, 50, 1), "time1", d(1, 16, 50, 0), "time2", d(2, 8, 0, 0)},
	})
	r, _, _ := s.At(d(1, 12, 0, 0))
	if r.Replicas != 5 {
		t.Errorf("replicas at noon = %d, want 5", r.Replicas)
	}
	// The instants are in the caller's location; 16:50 CST is 08:50 UTC.
	if _, a, _ := s.At(d(1, 17, 0, 0).UTC()); a.Location() != time.UTC || a.Hour() != 8 || a.Minute() != 50 {
		t.Errorf("activation in UTC = %v", a)
	}
}

// Exactly at the activation second it is in force; a nanosecond before it is not; Next is
// strictly after its argument.
func TestAroundActivation(t *testing.T) {
	s := mustParse(t, Rule{"a", "0 0 8 * * *", 1}, Rule{"b", "30 15 9 * * *", 2})
	at8 := time.Date(2026, 5, 5, 8, 0, 0, 0, time.UTC)
	at915 := time.Date(2026, 5, 5, 9, 15, 30, 0, time.UTC)
	prevB := at915.AddDate(0, 0, -1)
	check(t, s, []probe{
		{at8.Add(-time.Second), "b", prevB, "a", at8},
		{at8.Add(-time.Nanosecond), "b", prevB, "a", at8},
		{at8, "a", at8, "b", at915},
		{at8.Add(time.Nanosecond), "a", at8, "b", at915},
		{at8.Add(time.Second), "a", at8, "b", at915},
		{at915.Add(-time.Second), "a", at8, "b", at915},
		{at915, "b", at915, "a", at8.AddDate(0, 0, 1)},
		{at915.Add(time.Second), "b", at915, "a", at8.AddDate(0, 0, 1)},
	})
}

func TestWeekly(t *testing.T) {
	s := mustParse(t,
		Rule{"weekday", "CRON_TZ=Europe/Berlin 0 0 9 * * MON", 10},
		Rule{"weekend", "CRON_TZ=Europe/Berlin 0 0 18 * * FRI", 2},
	)
	be := mustLoad(t, "Europe/Berlin")
	d := func(day, h int) time.Time { return time.Date(2026, 6, day, h, 0, 0, 0, be) } // 1 June 2026 is a Monday
	check(t, s, []probe{
		{d(1, 8), "weekend", d(-2, 18), "weekday", d(1, 9)},
		{d(1, 9), "weekday", d(1, 9), "weekend", d(5, 18)},
		{d(4, 23), "weekday", d(1, 9), "weekend", d(5, 18)},
		{d(7, 12), "weekend", d(5, 18), "weekday", d(8, 9)},
	})
}

func TestMonthly(t *testing.T) {
	s := mustParse(t,
		Rule{"start", "0 0 0 1 * *", 10},
		Rule{"mid", "0 0 0 15 * *", 4},
		Rule{"last", "0 0 12 31 * *", 7}, // only months with 31 days
	)
	d := func(m time.Month, day, h int) time.Time { return time.Date(2026, m, day, h, 0, 0, 0, time.UTC) }
	check(t, s, []probe{
		{d(3, 10, 0), "start", d(3, 1, 0), "mid", d(3, 15, 0)},
		{d(3, 1, 0), "start", d(3, 1, 0), "mid", d(3, 15, 0)},
		{d(3, 31, 11), "mid", d(3, 15, 0), "last", d(3, 31, 12)},
		{d(3, 31, 13), "last", d(3, 31, 12), "start", d(4, 1, 0)},
		{d(4, 30, 23), "mid", d(4, 15, 0), "start", d(5, 1, 0)},
		{d(2, 28, 23), "mid", d(2, 15, 0), "start", d(3, 1, 0)},
	})
	// A 31st rule alone, asked about April: March 31st.
	s = mustParse(t, Rule{"last", "0 0 12 31 * *", 7})
	check(t, s, []probe{{d(4, 20, 0), "last", d(3, 31, 12), "last", d(5, 31, 12)}})
}

func TestTies(t *testing.T) {
	at := time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)
	// Same cron: the later rule wins, in At and in Next.
	s := mustParse(t, Rule{"first", "0 0 8 * * *", 1}, Rule{"second", "0 0 8 * * *", 2})
	check(t, s, []probe{{at, "second", at, "second", at.AddDate(0, 0, 1)}})
	// Different zones, same instant (08:00 UTC = 16:00 CST).
	s = mustParse(t, Rule{"shanghai", "CRON_TZ=Asia/Shanghai 0 0 16 * * *", 1}, Rule{"utc", "0 0 8 * * *", 2})
	check(t, s, []probe{{at, "utc", at, "utc", at.AddDate(0, 0, 1)}})
	s = mustParse(t, Rule{"utc", "0 0 8 * * *", 2}, Rule{"shanghai", "CRON_TZ=Asia/Shanghai 0 0 16 * * *", 1})
	check(t, s, []probe{{at.Add(time.Hour), "shanghai", at, "shanghai", at.AddDate(0, 0, 1)}})
}

// Europe/Berlin, 29 March 2026: 02:00 CET becomes 03:00 CEST (01:00 UTC); 02:30 does not exist.
func TestBerlinSpringForward(t *testing.T) {
	be := mustLoad(t, "Europe/Berlin")
	jump := time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC)
	s := mustParse(t,
		Rule{"night", "CRON_TZ=Europe/Berlin 0 30 2 * * *", 7},
		Rule{"noon", "CRON_TZ=Europe/Berlin 0 0 12 * * *", 2},
	)
	noonBefore := time.Date(2026, 3, 28, 12, 0, 0, 0, be)
	check(t, s, []probe{
		{jump.Add(-time.Second), "noon", noonBefore, "night", jump}, // 01:59:59 CET
		{jump, "night", jump, "noon", time.Date(2026, 3, 29, 12, 0, 0, 0, be)},
		{jump.Add(45 * time.Minute), "night", jump, "noon", time.Date(2026, 3, 29, 12, 0, 0, 0, be)},
		// The day after, 02:30 exists again.
		{time.Date(2026, 3, 30, 2, 29, 59, 0, be), "noon", time.Date(2026, 3, 29, 12, 0, 0, 0, be), "night", time.Date(2026, 3, 30, 2, 30, 0, 0, be)},
	})
	if got := jump.In(be); got.Hour() != 3 || got.Minute() != 0 {
		t.Fatalf("test premise: %v", got)
	}

	// robfig's Next skips the missing 02:30 and fires the next day.
	rs, err := cron.ParseStandard("CRON_TZ=Europe/Berlin 30 2 * * *")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rs.Next(jump.Add(-time.Hour)), time.Date(2026, 3, 30, 2, 30, 0, 0, be); !got.Equal(want) {
		t.Errorf("robfig Next = %v, documented as %v", got, want)
	}

	// Several skipped times of one rule collapse into one activation at the jump.
	s = mustParse(t, Rule{"every10", "CRON_TZ=Europe/Berlin 0 */10 2 * * *", 1}, Rule{"x", "CRON_TZ=Europe/Berlin 0 0 4 * * *", 2})
	_, n := s.Next(jump.Add(-time.Second))
	_, n2 := s.Next(n)
	if !n.Equal(jump) || !n2.Equal(time.Date(2026, 3, 29, 4, 0, 0, 0, be)) {
		t.Errorf("Next = %v then %v", n, n2)
	}

	// A moved 02:30 and a real 03:00 tie at 03:00 CEST: the 03:00 rule wins (later nominal
	// time) although it comes first in the list.
	s = mustParse(t,
		Rule{"three", "CRON_TZ=Europe/Berlin 0 0 3 * * *", 3},
		Rule{"twothirty", "CRON_TZ=Europe/Berlin 0 30 2 * * *", 9},
		Rule{"twofifty", "CRON_TZ=Europe/Berlin 0 50 2 * * *", 8},
	)
	check(t, s, []probe{{jump, "three", jump, "twothirty", time.Date(2026, 3, 30, 2, 30, 0, 0, be)}})
	r, _ := s.Next(jump.Add(-time.Second))
	if r.Name != "three" {
		t.Errorf("Next's rule at the jump = %s, want three", r.Name)
	}
	// Among moved rules, the later nominal time wins.
	s = mustParse(t,
		Rule{"twofifty", "CRON_TZ=Europe/Berlin 0 50 2 * * *", 8},
		Rule{"twothirty", "CRON_TZ=Europe/Berlin 0 30 2 * * *", 9},
	)
	check(t, s, []probe{{jump, "twofifty", jump, "twothirty", time.Date(2026, 3, 30, 2, 30, 0, 0, be)}})
}

// Europe/Berlin, 25 October 2026: 03:00 CEST becomes 02:00 CET (01:00 UTC); 02:30 occurs twice.
func TestBerlinFallBack(t *testing.T) {
	be := mustLoad(t, "Europe/Berlin")
	back := time.Date(2026, 10, 25, 1, 0, 0, 0, time.UTC)
	first := time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC)  // 02:30 CEST
	second := time.Date(2026, 10, 25, 1, 30, 0, 0, time.UTC) // 02:30 CET
	if a, b := first.In(be), second.In(be); a.Hour() != 2 || b.Hour() != 2 || a.Minute() != 30 || b.Minute() != 30 {
		t.Fatalf("test premise: %v %v", a, b)
	}
	s := mustParse(t,
		Rule{"twothirty", "CRON_TZ=Europe/Berlin 0 30 2 * * *", 7},
		Rule{"twofortyfive", "CRON_TZ=Europe/Berlin 0 45 2 * * *", 3},
	)
	nextDay := time.Date(2026, 10, 26, 2, 30, 0, 0, be)
	fortyfive := first.Add(15 * time.Minute)
	check(t, s, []probe{
		{first.Add(-time.Second), "twofortyfive", time.Date(2026, 10, 24, 2, 45, 0, 0, be), "twothirty", first},
		{first, "twothirty", first, "twofortyfive", fortyfive},
		{fortyfive, "twofortyfive", fortyfive, "twothirty", nextDay},
		{back, "twofortyfive", fortyfive, "twothirty", nextDay},   // 02:00 CET
		{second, "twofortyfive", fortyfive, "twothirty", nextDay}, // no second firing
		{second.Add(20 * time.Minute), "twofortyfive", fortyfive, "twothirty", nextDay},
	})

	// robfig's Next fires 02:30 twice.
	rs, err := cron.ParseStandard("CRON_TZ=Europe/Berlin 30 2 * * *")
	if err != nil {
		t.Fatal(err)
	}
	if got := rs.Next(first.Add(-time.Second)); !got.Equal(first) {
		t.Errorf("robfig Next = %v, want %v", got, first)
	}
	if got := rs.Next(first); !got.Equal(second) {
		t.Errorf("robfig Next after the first 02:30 = %v, documented as the second 02:30 %v", got, second)
	}

	// A wildcard-hour rule fires at 02:30 CEST, then 03:30 CET: once per wall-clock time.
	s = mustParse(t, Rule{"hourly", "CRON_TZ=Europe/Berlin 0 30 * * * *", 1})
	if _, n := s.Next(first); !n.Equal(time.Date(2026, 10, 25, 2, 30, 0, 0, time.UTC)) {
		t.Errorf("hourly Next after 02:30 CEST = %v, want 03:30 CET", n.In(be))
	}
}

// A rule for 29 February fires less than once a year: At's ok is false in between.
func TestLookback(t *testing.T) {
	s := mustParse(t, Rule{"leap", "0 0 0 29 2 *", 1})
	leap := time.Date(2028, 2, 29, 0, 0, 0, 0, time.UTC)
	check(t, s, []probe{
		{time.Date(2027, 6, 1, 0, 0, 0, 0, time.UTC), "", time.Time{}, "leap", leap},
		{leap.Add(-time.Second), "", time.Time{}, "leap", leap},
		{leap, "leap", leap, "leap", time.Date(2032, 2, 29, 0, 0, 0, 0, time.UTC)},
		{leap.Add(Lookback - time.Second), "leap", leap, "", time.Time{}},
		{leap.Add(Lookback + time.Second), "", time.Time{}, "", time.Time{}},
	})
	// 2100 is not a leap year: Next still finds 2104 (eight years).
	if _, n := s.Next(time.Date(2097, 1, 1, 0, 0, 0, 0, time.UTC)); !n.Equal(time.Date(2104, 2, 29, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("Next from 2097 = %v", n)
	}
	// A yearly rule is always found, the day before its anniversary in a leap year included.
	s = mustParse(t, Rule{"mar1", "0 0 0 1 3 *", 1})
	at := time.Date(2028, 2, 29, 23, 59, 59, 0, time.UTC)
	check(t, s, []probe{{at, "mar1", time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC), "mar1", at.Add(time.Second)}})
}

func ExampleSchedule_At() {
	s, err := Parse([]Rule{
		{Name: "time1", Cron: "CRON_TZ=Asia/Shanghai 0 50 16 * * *", Replicas: 3},
		{Name: "time2", Cron: "CRON_TZ=Asia/Shanghai 0 0 8 * * *", Replicas: 5},
	})
	if err != nil {
		panic(err)
	}
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC) // 17:00 in Shanghai
	rule, activated, _ := s.At(now)
	next, when := s.Next(now)
	fmt.Println(rule.Name, rule.Replicas, activated)
	fmt.Println(next.Name, next.Replicas, when)
	// Output:
	// time1 3 2026-12-01 08:50:00 +0000 UTC
	// time2 5 2026-12-02 00:00:00 +0000 UTC
}
