// Package schedule evaluates the cron rules of a Tidal (tidal.io/v1alpha1,
// spec.triggers.times.rules) into the replicas a workload should have at a given instant.
// It is pure: no clock, no timers, no Kubernetes types. The Tidal controller converts each
// rule to a [Rule], calls [Parse] once per generation, then [Schedule.At] to get the desired
// replicas now and [Schedule.Next] to arm its timer.
//
// # Cron syntax
//
// Six space-separated fields, as in the Elastic Scaler guide's example
// "CRON_TZ=Asia/Shanghai 0 50 16 * * *":
//
//	second(0-59) minute(0-59) hour(0-23) day-of-month(1-31) month(1-12|JAN-DEC) day-of-week(0-6|SUN-SAT)
//
// Each field takes *, ?, a value, a range a-b, a step */n, a/n or a-b/n, or a comma list of
// those (github.com/robfig/cron/v3 parses them; its rules apply: day-of-week 7 is rejected,
// names are case-insensitive). When both day-of-month and day-of-week are restricted (neither
// starts with * or ?) a day matches if either matches, as in Vixie cron and robfig.
//
// An optional prefix "CRON_TZ=<IANA zone> " or "TZ=<IANA zone> " sets the zone whose wall clock
// the fields describe. Without a prefix the zone is UTC — not the process's local zone, which
// differs between a developer's machine and the controller's pod. "Local" is rejected for the
// same reason. The package imports time/tzdata, so zones resolve in debi's image (built on an
// empty base by hack/image, with no /usr/share/zoneinfo).
//
// The descriptors @yearly (@annually), @monthly, @weekly, @daily (@midnight) and @hourly are
// accepted (with or without a zone prefix); they are the six-field schedules robfig defines
// for them ("0 0 0 1 1 *", "0 0 0 1 * *", "0 0 0 * * 0", "0 0 0 * * *", "0 0 * * * *").
// "@every <duration>" is rejected: an interval counted from whenever a process started has no
// fixed activations, so a controller restarted at any moment could not know which rule is in
// force.
//
// A rule must be able to fire: a cron that matches no date (day-of-month 30 in February only,
// 31 in April only) is rejected.
//
// # Semantics
//
// Rules are level-setting, not edge-triggered: at instant t the desired replicas are those of
// the rule whose latest activation at or before t is the most recent. A controller that starts
// at 17:00 knows that a 16:50 rule is in force without waiting for the next 16:50. Activations
// have second granularity: a rule for 16:50:00 is in force from 16:50:00.000 on, and At of
// 16:49:59.999 still returns the previous rule.
//
// Ties — several rules activated at the same instant — go to the rule moved least by daylight
// saving (only a rule whose time was skipped by a clock change fires later than its nominal
// time, see below), and then to the rule later in the list: two rules with the same cron, or
// 08:00 UTC and 16:00 Asia/Shanghai, resolve to the second.
//
// Lookback: At searches each rule's activations back [Lookback] (367 days of the rule's wall
// clock). Every rule that matches at least one date in every calendar year has fired within
// that window, so At's ok is false only when all the rules fire less than once a year (those
// restricted to 29 February) and none has fired in the last 367 days. A schedule with a
// yearly or more frequent rule always has an answer.
//
// # Daylight saving time
//
// The fields are matched against the rule zone's wall clock, and each matching wall-clock
// second fires exactly once:
//
//   - A wall-clock time that does not exist (skipped when clocks go forward, e.g. 02:30 in
//     Europe/Berlin on the last Sunday of March) fires at the instant the clock jumps over it
//     (03:00 CEST). Several skipped times of one rule collapse into that one activation.
//     robfig's SpecSchedule.Next skips such a time altogether, so a daily 02:30 "scale up"
//     would be missed for a whole day; this package does not use robfig's Next.
//   - A wall-clock time that occurs twice (when clocks go back, e.g. 02:30 in Europe/Berlin on
//     the last Sunday of October) fires once, at its first occurrence (02:30 CEST). robfig's
//     Next fires it twice (02:30 CEST and 02:30 CET). During the repeated hour no rule
//     fires — also a rule with a wildcard hour, such as "0 30 * * * *", fires at 02:30 CEST and
//     next at 03:30 CET — so the rules in force at the end of the first pass stay in force.
//
// A rule moved by a skipped hour ranks, in a tie, by its nominal time: in Berlin a 02:30 rule
// and a 03:00 rule both activate at 03:00 CEST on the spring-forward day, and the 03:00 rule
// wins wherever it is in the list, as it would have a minute later had 02:30 existed.
//
// The instants returned are in the location of the time passed in.
package schedule

import (
	"errors"
	"fmt"
	"strings"
	"time"

	// The release image (hack/image) is an empty base with no /usr/share/zoneinfo; without
	// the embedded database every CRON_TZ= rule would fail to load its zone there.
	_ "time/tzdata"

	"github.com/robfig/cron/v3"
)

// Lookback is how far back, on a rule's wall clock, [Schedule.At] searches for its latest
// activation: the longest gap between two activations of a rule that fires every year
// (366 days, 1 March 2027 to 1 March 2028), plus a day.
const Lookback = 367 * 24 * time.Hour

// Rule is one entry of spec.triggers.times.rules, without its description.
type Rule struct {
	Name     string
	Cron     string
	Replicas int32
}

// Schedule is a parsed, validated rule list. It is immutable and safe for concurrent use.
type Schedule struct {
	rules []Rule
	specs []spec
}

// parser takes the six fields and descriptors; the zone prefix is stripped before it runs
// (see parseCron).
var parser = cron.NewParser(cron.Second | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Parse validates every rule and returns the schedule, or all the problems found, joined,
// each prefixed by its field path relative to the rule list: "rules[1].cron: …",
// "rules[2].replicas: …", "rules[3].name: …".
func Parse(rules []Rule) (*Schedule, error) {
	if len(rules) == 0 {
		return nil, errors.New("rules: at least one rule is required")
	}
	var errs []error
	s := &Schedule{rules: append([]Rule(nil), rules...), specs: make([]spec, len(rules))}
	seen := make(map[string]int, len(rules))
	for i, r := range rules {
		switch j, dup := seen[r.Name]; {
		case r.Name == "":
			errs = append(errs, fmt.Errorf("rules[%d].name: must not be empty", i))
		case dup:
			errs = append(errs, fmt.Errorf("rules[%d].name: %q duplicates rules[%d].name", i, r.Name, j))
		default:
			seen[r.Name] = i
		}
		if r.Replicas < 0 {
			errs = append(errs, fmt.Errorf("rules[%d].replicas: must be >= 0, got %d", i, r.Replicas))
		}
		sp, err := parseCron(r.Cron)
		if err != nil {
			errs = append(errs, fmt.Errorf("rules[%d].cron: %q: %w", i, r.Cron, err))
			continue
		}
		s.specs[i] = sp
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

// parseCron parses one cron expression with its optional zone prefix.
func parseCron(expr string) (spec, error) {
	rest := strings.TrimSpace(expr)
	if rest == "" {
		return spec{}, errors.New("must not be empty")
	}
	loc := time.UTC
	if strings.HasPrefix(rest, "CRON_TZ=") || strings.HasPrefix(rest, "TZ=") {
		// robfig v3.0.1 slices spec[eq+1:i] with i = strings.Index(spec, " "), which panics when
		// the prefix is the whole expression ("CRON_TZ=UTC"); the prefix is handled here.
		prefix, after, _ := strings.Cut(rest, "=")
		name, tail, found := strings.Cut(after, " ")
		if name == "" {
			return spec{}, fmt.Errorf("%s= needs an IANA time zone name", prefix)
		}
		if name == "Local" {
			return spec{}, fmt.Errorf("%s=Local is the controller's zone, not a fixed one; name an IANA zone", prefix)
		}
		var err error
		if loc, err = time.LoadLocation(name); err != nil {
			return spec{}, fmt.Errorf("unknown time zone %q: %w", name, err)
		}
		rest = strings.TrimSpace(tail)
		if !found || rest == "" {
			return spec{}, fmt.Errorf("%s=%s must be followed by a schedule", prefix, name)
		}
		if strings.HasPrefix(rest, "CRON_TZ=") || strings.HasPrefix(rest, "TZ=") {
			return spec{}, errors.New("more than one time zone prefix")
		}
	}
	if strings.HasPrefix(rest, "@every") {
		return spec{}, errors.New("@every is not supported: an interval has no fixed activations; use six fields, e.g. \"0 */15 * * * *\"")
	}
	sched, err := parser.Parse(rest)
	if err != nil {
		return spec{}, err
	}
	ss, ok := sched.(*cron.SpecSchedule)
	if !ok { // only @every yields another type
		return spec{}, fmt.Errorf("unsupported schedule %T", sched)
	}
	sp := spec{
		second: ss.Second, minute: ss.Minute, hour: ss.Hour,
		dom: ss.Dom, month: ss.Month, dow: ss.Dow,
		loc: loc,
	}
	// Any (month, day) that exists recurs within 8 years (29 February: 2096, 2104), and any
	// day of the week within 7 days, so nine years from a leap year's start decide it.
	from := daysFromCivil(2000, 1, 1) * secondsPerDay
	if _, ok := sp.next(from-1, 2009); !ok {
		return spec{}, errors.New("matches no date: no month listed has the day of month listed")
	}
	return sp, nil
}

// Rules returns a copy of the rules, in their original order.
func (s *Schedule) Rules() []Rule { return append([]Rule(nil), s.rules...) }

// At returns the rule in force at t — the one activated most recently at or before t — and its
// activation instant (in t's location). ok is false when no rule has fired within [Lookback].
func (s *Schedule) At(t time.Time) (rule Rule, activated time.Time, ok bool) {
	best, u := s.at(t)
	if best < 0 {
		return Rule{}, time.Time{}, false
	}
	return s.rules[best], time.Unix(u, 0).In(t.Location()), true
}

// at returns the index of the rule in force at t and its activation (unix seconds), or -1.
func (s *Schedule) at(t time.Time) (best int, bestU int64) {
	best = -1
	var bestShift int64
	tsec := t.Unix()
	for i := range s.specs {
		sp := &s.specs[i]
		w := sp.maxWall(t)
		lower := w - int64(Lookback/time.Second)
		c, ok := sp.prev(w, lower)
		for ok {
			u, shift := sp.instant(c)
			if u <= tsec {
				// Larger instant wins; at the same instant the smaller DST shift (the later
				// nominal time) wins; then the later rule (>= with ascending i).
				if best < 0 || u > bestU || (u == bestU && shift <= bestShift) {
					best, bestU, bestShift = i, u, shift
				}
				break
			}
			// Not reachable with real zones (see maxWall); kept so that a zone with stacked
			// transitions can only make At look further back, never return the future.
			c, ok = sp.prev(c-1, lower)
		}
	}
	return best, bestU
}

// Next returns the first activation strictly after t (in t's location) and the rule in force
// from then on. The time is zero if no rule fires within nine years, which Parse rules out.
func (s *Schedule) Next(t time.Time) (Rule, time.Time) {
	tsec := t.Unix()
	var minU int64
	found := false
	for i := range s.specs {
		sp := &s.specs[i]
		w := sp.maxWall(t)
		y, _, _ := civilFromDays(floorDiv(w, secondsPerDay))
		c, ok := sp.next(w, y+9)
		for ok {
			u, _ := sp.instant(c)
			if u > tsec {
				if !found || u < minU {
					minU, found = u, true
				}
				break
			}
			c, ok = sp.next(c, y+9) // defensive, as in at
		}
	}
	if !found {
		return Rule{}, time.Time{}
	}
	best, _ := s.at(time.Unix(minU, 0))
	return s.rules[best], time.Unix(minU, 0).In(t.Location())
}
