package schedule

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
)

var propZones = []string{
	"UTC", "Asia/Shanghai", "Europe/Berlin", "America/New_York", "Asia/Kolkata",
	"Australia/Lord_Howe", // 30-minute DST
	"America/Sao_Paulo",   // DST at midnight until 2019
	"Pacific/Chatham", "America/Santiago",
}

// randField returns a random cron field over [lo, hi]; sparse limits it to few values.
func randField(r *rand.Rand, lo, hi int, sparse bool) string {
	v := func() int { return lo + r.IntN(hi-lo+1) }
	k := r.IntN(6)
	if sparse && k >= 3 {
		k = r.IntN(2) + 1
	}
	switch k {
	case 0:
		return "*"
	case 1:
		return fmt.Sprint(v())
	case 2:
		a, b := v(), v()
		return fmt.Sprintf("%d,%d", a, b)
	case 3:
		a, b := v(), v()
		if a > b {
			a, b = b, a
		}
		return fmt.Sprintf("%d-%d", a, b)
	case 4:
		return fmt.Sprintf("*/%d", 1+r.IntN(hi-lo+1))
	default:
		a, b := v(), v()
		if a > b {
			a, b = b, a
		}
		return fmt.Sprintf("%d-%d/%d", a, b, 1+r.IntN(4))
	}
}

// randCron returns a random valid expression. dense allows several activations a minute.
func randCron(r *rand.Rand, zone string, dense bool) string {
	sec := fmt.Sprint(r.IntN(60))
	if dense {
		sec = randField(r, 0, 59, false)
	}
	min := randField(r, 0, 59, !dense)
	if !dense && min == "*" {
		min = "0"
	}
	hour := randField(r, 0, 23, false)
	dom, month, dow := "*", "*", "*"
	switch r.IntN(6) {
	case 0:
		dom = randField(r, 1, 31, true)
	case 1:
		dow = randField(r, 0, 6, false)
	case 2:
		dom, dow = randField(r, 1, 28, true), randField(r, 0, 6, true)
	case 3:
		dom, month = randField(r, 1, 28, true), randField(r, 1, 12, false)
	}
	e := strings.Join([]string{sec, min, hour, dom, month, dow}, " ")
	if zone != "UTC" || r.IntN(2) == 0 {
		e = "CRON_TZ=" + zone + " " + e
	}
	return e
}

func randRules(t testing.TB, r *rand.Rand, n int, zones []string, dense bool) (*Schedule, []Rule) {
	for {
		rules := make([]Rule, n)
		for i := range rules {
			rules[i] = Rule{Name: fmt.Sprint("r", i), Cron: randCron(r, zones[r.IntN(len(zones))], dense), Replicas: int32(i)}
		}
		s, err := Parse(rules)
		if err == nil {
			return s, rules
		}
		if !strings.Contains(err.Error(), "matches no date") {
			t.Fatal(err)
		}
	}
}

// At(t) agrees with a brute-force scan of Next from far back: scanning Next from t-w visits
// every activation in (t-w, t]; the last one is At's, whatever rule Next reports for it. The
// window doubles until an activation is found or it exceeds the lookback.
func TestPropertyAtMatchesNextScan(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	lo := time.Date(2015, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	hi := time.Date(2032, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	cases := 400
	if testing.Short() {
		cases = 60
	}
	for range cases {
		s, rules := randRules(t, r, 1+r.IntN(5), propZones, false)
		at := time.Unix(lo+r.Int64N(hi-lo), r.Int64N(1e9))
		if r.IntN(4) == 0 { // exactly on an activation, or a second either side
			_, n := s.Next(at)
			at = n.Add(time.Duration(r.IntN(3)-1) * time.Second)
		}
		var (
			found bool
			last  time.Time
			lastR Rule
		)
		for w := 6 * time.Hour; !found && w < 2*Lookback; w *= 2 {
			for x := at.Add(-w); ; {
				nr, n := s.Next(x)
				if n.IsZero() || n.After(at) {
					break
				}
				found, last, lastR, x = true, n, nr, n
			}
		}
		got, a, ok := s.At(at)
		if found && at.Sub(last) > Lookback-2*24*time.Hour {
			continue // near the lookback's edge, which is on each rule's wall clock
		}
		if ok != found || (ok && (!a.Equal(last) || got != lastR)) {
			t.Fatalf("rules %q\nAt(%v) = %s@%v ok=%v; Next scan: %s@%v found=%v", rules, at, got.Name, a, ok, lastR.Name, last, found)
		}
	}
}

// An oracle independent of prev, next and instant: walk the instants second by second around
// DST transitions, tracking each zone's highest wall-clock reading so far; a rule fires at the
// instant its matching wall-clock times are first reached or jumped over (the package's
// definition). At and Next must agree with it at every second.
func TestPropertySecondBySecondAcrossDST(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	zones := []string{"Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/Sao_Paulo", "Pacific/Chatham"}
	years := []int{2018, 2026}
	if testing.Short() {
		zones, years = zones[:2], years[1:]
	}
	for _, zone := range zones {
		loc := mustLoad(t, zone)
		for _, year := range years {
			for _, tr := range transitions(loc, year) {
				for trial := range 2 {
					s, rules := randRules(t, r, 2+r.IntN(4), []string{zone}, trial == 0)
					if trial == 1 {
						// Two daily rules inside the wall-clock span that is skipped or repeated.
						a, b := wallClock(tr.Add(-time.Second))+1, wallClock(tr)
						a, b = min(a, b), max(a, b)
						for i := range 2 {
							c := time.Unix(a+r.Int64N(b-a), 0).UTC()
							rules[i].Cron = fmt.Sprintf("CRON_TZ=%s 0 %d %d * * *", zone, c.Minute(), c.Hour())
						}
						s = mustParse(t, rules...)
					}
					oracle(t, s, rules, loc, tr.Add(-3*time.Hour), tr.Add(3*time.Hour))
				}
			}
		}
	}
}

// wallClock is t's reading on its own location's clock, as civil seconds.
func wallClock(t time.Time) int64 { _, off := t.Zone(); return t.Unix() + int64(off) }

func transitions(loc *time.Location, year int) []time.Time {
	var out []time.Time
	end := time.Date(year+1, 1, 1, 0, 0, 0, 0, loc)
	for x := time.Date(year, 1, 1, 0, 0, 0, 0, loc); x.Before(end); {
		_, e := x.ZoneBounds()
		if e.IsZero() || !e.Before(end) {
			break
		}
		out = append(out, e)
		x = e
	}
	return out
}

func matches(sp *spec, c int64) bool {
	t := time.Unix(c, 0).UTC()
	bit := func(set uint64, v int) bool { return set&(1<<uint(v)) != 0 }
	domOK, dowOK := bit(sp.dom, t.Day()), bit(sp.dow, int(t.Weekday()))
	day := domOK || dowOK
	if sp.dom&starBit != 0 || sp.dow&starBit != 0 {
		day = domOK && dowOK
	}
	return day && bit(sp.month, int(t.Month())) && bit(sp.hour, t.Hour()) && bit(sp.minute, t.Minute()) && bit(sp.second, t.Second())
}

func oracle(t *testing.T, s *Schedule, rules []Rule, loc *time.Location, from, to time.Time) {
	t.Helper()
	wallOf := func(u int64) int64 { _, off := time.Unix(u, 0).In(loc).Zone(); return u + int64(off) }
	type fire struct {
		u    int64
		rule int
	}
	var fires []fire // the winner of each instant at which some rule fires
	maxWall := wallOf(from.Unix() - 1)
	for u := from.Unix(); u <= to.Unix(); u++ {
		w := wallOf(u)
		if w <= maxWall {
			continue
		}
		best, bestShift := -1, int64(0)
		for i := range s.specs {
			for c := w; c > maxWall; c-- { // the latest matching time reached at u
				if matches(&s.specs[i], c) {
					if shift := w - c; best < 0 || shift <= bestShift {
						best, bestShift = i, shift
					}
					break
				}
			}
		}
		maxWall = w
		if best >= 0 {
			fires = append(fires, fire{u, best})
		}
	}
	if len(fires) == 0 {
		return
	}
	k := 0
	for u := fires[0].u; u <= to.Unix(); u++ {
		for k+1 < len(fires) && fires[k+1].u <= u {
			k++
		}
		at := time.Unix(u, 0)
		got, a, ok := s.At(at)
		if !ok || got.Name != rules[fires[k].rule].Name || a.Unix() != fires[k].u {
			t.Fatalf("rules %q\nAt(%v) = %s@%v ok=%v, oracle %s@%v", rules, at.In(loc), got.Name, a.In(loc), ok,
				rules[fires[k].rule].Name, time.Unix(fires[k].u, 0).In(loc))
		}
		if k+1 < len(fires) {
			nr, n := s.Next(at)
			if nr.Name != rules[fires[k+1].rule].Name || n.Unix() != fires[k+1].u {
				t.Fatalf("rules %q\nNext(%v) = %s@%v, oracle %s@%v", rules, at.In(loc), nr.Name, n.In(loc),
					rules[fires[k+1].rule].Name, time.Unix(fires[k+1].u, 0).In(loc))
			}
		}
	}
}

// On civil time (UTC, no DST) the forward search is robfig's: next agrees with robfig's
// SpecSchedule.Next, and prev is its inverse.
func TestCivilSearchMatchesRobfig(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	lo := time.Date(1999, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	hi := time.Date(2040, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	n := 20000
	if testing.Short() {
		n = 2000
	}
	for range n {
		expr := randCron(r, "UTC", r.IntN(2) == 0)
		expr = strings.TrimPrefix(expr, "CRON_TZ=UTC ")
		sp, err := parseCron(expr)
		if err != nil {
			continue
		}
		rs, err := parser.Parse(expr)
		if err != nil {
			t.Fatal(err)
		}
		ss := rs.(*cron.SpecSchedule)
		ss.Location = time.UTC
		c := lo + r.Int64N(hi-lo)
		want := ss.Next(time.Unix(c, 0).UTC())
		got, ok := sp.next(c, time.Unix(c, 0).UTC().Year()+9)
		if !want.IsZero() && (!ok || got != want.Unix()) {
			t.Fatalf("%q: next(%v) = %v, robfig %v", expr, time.Unix(c, 0).UTC(), time.Unix(got, 0).UTC(), want)
		}
		p, ok := sp.prev(c, c-int64(Lookback/time.Second))
		if ok {
			if p > c || !ss.Next(time.Unix(p-1, 0).UTC()).Equal(time.Unix(p, 0)) {
				t.Fatalf("%q: prev(%v) = %v does not match", expr, time.Unix(c, 0).UTC(), time.Unix(p, 0).UTC())
			}
			if nx := ss.Next(time.Unix(p, 0).UTC()); !nx.IsZero() && nx.Unix() <= c {
				t.Fatalf("%q: prev(%v) = %v, but %v matches in between", expr, time.Unix(c, 0).UTC(), time.Unix(p, 0).UTC(), nx)
			}
		} else if !want.IsZero() && want.Unix() <= c {
			t.Fatal("impossible")
		}
	}
	for _, d := range []int64{-800000, -1, 0, 1, 11016, 19000, 60000, 2932896} {
		y, m, dd := civilFromDays(d)
		tt := time.Unix(d*secondsPerDay, 0).UTC()
		if y != tt.Year() || m != int(tt.Month()) || dd != tt.Day() || daysFromCivil(y, m, dd) != d || weekday(d) != int(tt.Weekday()) {
			t.Errorf("civil conversions of day %d: %d-%d-%d", d, y, m, dd)
		}
	}
}

// BenchmarkAt: ten rules in three zones, mixing daily, hourly, weekly and monthly rules,
// evaluated at spread-out instants.
func BenchmarkAt(b *testing.B) {
	rules := []Rule{
		{"morning", "CRON_TZ=Asia/Shanghai 0 0 8 * * *", 5},
		{"evening", "CRON_TZ=Asia/Shanghai 0 50 16 * * *", 3},
		{"night", "CRON_TZ=Europe/Berlin 0 30 2 * * *", 1},
		{"quarter", "CRON_TZ=Europe/Berlin 0 */15 9-17 * * MON-FRI", 6},
		{"weekly", "CRON_TZ=America/New_York 0 0 6 * * MON", 8},
		{"weekend", "CRON_TZ=America/New_York 0 0 20 * * FRI", 2},
		{"monthly", "0 0 0 1 * *", 9},
		{"mid", "0 0 12 15 * *", 4},
		{"yearly", "0 0 0 1 1 *", 10},
		{"lastday", "0 0 23 31 * *", 7},
	}
	s := mustParse(b, rules...)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ts := make([]time.Time, 1024)
	for i := range ts {
		ts[i] = base.Add(time.Duration(i) * 8761 * time.Second * 37) // spread over ~4 years
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, _, ok := s.At(ts[i%len(ts)]); !ok {
			b.Fatal("no rule")
		}
	}
}

func BenchmarkNext(b *testing.B) {
	s := mustParse(b,
		Rule{"morning", "CRON_TZ=Asia/Shanghai 0 0 8 * * *", 5},
		Rule{"evening", "CRON_TZ=Asia/Shanghai 0 50 16 * * *", 3},
		Rule{"night", "CRON_TZ=Europe/Berlin 0 30 2 * * *", 1},
		Rule{"quarter", "CRON_TZ=Europe/Berlin 0 */15 9-17 * * MON-FRI", 6},
		Rule{"weekly", "CRON_TZ=America/New_York 0 0 6 * * MON", 8},
		Rule{"weekend", "CRON_TZ=America/New_York 0 0 20 * * FRI", 2},
		Rule{"monthly", "0 0 0 1 * *", 9},
		Rule{"mid", "0 0 12 15 * *", 4},
		Rule{"yearly", "0 0 0 1 1 *", 10},
		Rule{"lastday", "0 0 23 31 * *", 7},
	)
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b.ReportAllocs()
	for b.Loop() {
		_, n := s.Next(t)
		t = n
	}
}

// FuzzParse: Parse never panics (robfig's parser does on "CRON_TZ=UTC"), and on what it accepts
// At and Next agree: At(t) is at or before t, Next(t) strictly after, and Next's activation
// is At's at that instant.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"CRON_TZ=Asia/Shanghai 0 50 16 * * *", "CRON_TZ=UTC", "TZ=", "CRON_TZ= ", "@daily",
		"CRON_TZ=Europe/Berlin 0 30 2 * * *", "0 */7 1-3 29 2 *", "@every 1h", "0 0 0 31 4 *",
	} {
		f.Add(s, int64(1774746000))
	}
	f.Fuzz(func(t *testing.T, expr string, sec int64) {
		s, err := Parse([]Rule{{Name: "a", Cron: expr, Replicas: 1}, {Name: "b", Cron: "0 0 12 * * *", Replicas: 2}})
		if err != nil {
			return
		}
		at := time.Unix(sec%(200*365*secondsPerDay), 0) // within 1770..2170
		if _, a, ok := s.At(at); !ok || a.After(at) {
			t.Fatalf("At(%v) = %v, %v", at, a, ok)
		}
		nr, n := s.Next(at)
		if !n.After(at) {
			t.Fatalf("Next(%v) = %v", at, n)
		}
		if r, a, ok := s.At(n); !ok || !a.Equal(n) || r != nr {
			t.Fatalf("At(Next(%v) = %s@%v) = %s@%v, %v", at, nr.Name, n, r.Name, a, ok)
		}
	})
}
