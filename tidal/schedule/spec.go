package schedule

import (
	"math/bits"
	"time"
)

const secondsPerDay = 86400

// starBit is robfig's marker, in a field's bit set, that the field was * or ?.
const starBit = 1 << 63

// spec is a parsed cron: robfig's bit sets (bit n set: value n matches) and the zone.
//
// Matching is done on civil time — a wall-clock reading in the zone, encoded as seconds since
// 1970-01-01 00:00:00 as if the zone were UTC — where every day has 86400 seconds, so the
// search forwards (next) and backwards (prev) is plain calendar arithmetic; instant maps a
// matching civil time to the instant it fires at, which is where daylight saving is handled.
type spec struct {
	second, minute, hour, dom, month, dow uint64
	loc                                   *time.Location
}

// dayMatches is robfig's rule: with * or ? in day-of-month or day-of-week both must match
// (one of them trivially), otherwise either.
func (sp *spec) dayMatches(days int64, d int) bool {
	domMatch := sp.dom&(1<<uint(d)) != 0
	dowMatch := sp.dow&(1<<uint(weekday(days))) != 0
	if sp.dom&starBit != 0 || sp.dow&starBit != 0 {
		return domMatch && dowMatch
	}
	return domMatch || dowMatch
}

// highest returns the largest value <= v whose bit is set, or -1.
func highest(set uint64, v int) int {
	m := set & (1<<uint(v+1) - 1)
	if m == 0 {
		return -1
	}
	return 63 - bits.LeadingZeros64(m)
}

// lowest returns the smallest value in [v, 59] whose bit is set, or -1.
func lowest(set uint64, v int) int {
	m := set &^ (1<<uint(v) - 1) & (1<<60 - 1)
	if m == 0 {
		return -1
	}
	return bits.TrailingZeros64(m)
}

// prev returns the latest matching civil time <= c, if there is one >= lower.
func (sp *spec) prev(c, lower int64) (int64, bool) {
	days := floorDiv(c, secondsPerDay)
	sod := int(c - days*secondsPerDay)
	y, m, d := civilFromDays(days)
	h, mi, s := sod/3600, sod/60%60, sod%60
	endOfPrevDay := func() {
		days--
		if d--; d == 0 {
			if m--; m == 0 {
				m, y = 12, y-1
			}
			d = daysIn(y, m)
		}
		h, mi, s = 23, 59, 59
	}
	for {
		if days*secondsPerDay+int64(h*3600+mi*60+s) < lower {
			return 0, false
		}
		if sp.month&(1<<uint(m)) == 0 {
			// The last second of the previous month.
			days -= int64(d)
			if m--; m == 0 {
				m, y = 12, y-1
			}
			d = daysIn(y, m)
			h, mi, s = 23, 59, 59
			continue
		}
		if !sp.dayMatches(days, d) {
			endOfPrevDay()
			continue
		}
		hh := highest(sp.hour, h)
		if hh < 0 {
			endOfPrevDay()
			continue
		}
		if hh < h {
			h, mi, s = hh, 59, 59
		}
		mm := highest(sp.minute, mi)
		if mm < 0 {
			if h == 0 {
				endOfPrevDay()
			} else {
				h, mi, s = h-1, 59, 59
			}
			continue
		}
		if mm < mi {
			mi, s = mm, 59
		}
		ss := highest(sp.second, s)
		if ss < 0 {
			switch {
			case mi > 0:
				mi, s = mi-1, 59
			case h > 0:
				h, mi, s = h-1, 59, 59
			default:
				endOfPrevDay()
			}
			continue
		}
		if c := days*secondsPerDay + int64(h*3600+mi*60+ss); c >= lower {
			return c, true
		}
		return 0, false
	}
}

// next returns the earliest matching civil time > c, if there is one in a year <= maxYear.
func (sp *spec) next(c int64, maxYear int) (int64, bool) {
	c++
	days := floorDiv(c, secondsPerDay)
	sod := int(c - days*secondsPerDay)
	y, m, d := civilFromDays(days)
	h, mi, s := sod/3600, sod/60%60, sod%60
	startOfNextDay := func() {
		days++
		if d++; d > daysIn(y, m) {
			d = 1
			if m++; m == 13 {
				m, y = 1, y+1
			}
		}
		h, mi, s = 0, 0, 0
	}
	for {
		if y > maxYear {
			return 0, false
		}
		if sp.month&(1<<uint(m)) == 0 {
			// The first second of the next month.
			days += int64(daysIn(y, m) - d + 1)
			if m++; m == 13 {
				m, y = 1, y+1
			}
			d = 1
			h, mi, s = 0, 0, 0
			continue
		}
		if !sp.dayMatches(days, d) {
			startOfNextDay()
			continue
		}
		hh := lowest(sp.hour, h)
		if hh < 0 || hh > 23 {
			startOfNextDay()
			continue
		}
		if hh > h {
			h, mi, s = hh, 0, 0
		}
		mm := lowest(sp.minute, mi)
		if mm < 0 {
			if h == 23 {
				startOfNextDay()
			} else {
				h, mi, s = h+1, 0, 0
			}
			continue
		}
		if mm > mi {
			mi, s = mm, 0
		}
		ss := lowest(sp.second, s)
		if ss < 0 {
			switch {
			case mi < 59:
				mi, s = mi+1, 0
			case h < 23:
				h, mi, s = h+1, 0, 0
			default:
				startOfNextDay()
			}
			continue
		}
		return days*secondsPerDay + int64(h*3600+mi*60+ss), true
	}
}

// wall returns the civil time (whole seconds) of t in sp's zone.
func (sp *spec) wall(t time.Time) int64 {
	_, off := t.In(sp.loc).Zone()
	return t.Unix() + int64(off)
}

// maxWall returns the latest civil second the zone's clock has shown at or before t: the wall
// clock at t, except in the repeated hour after clocks went back, where it is the last second
// shown before they did. Every matching civil time <= maxWall(t) has fired by t (see instant),
// and none after it.
func (sp *spec) maxWall(t time.Time) int64 {
	tt := t.In(sp.loc)
	_, off := tt.Zone()
	w := tt.Unix() + int64(off)
	start, _ := tt.ZoneBounds()
	if start.IsZero() {
		return w
	}
	_, prevOff := start.Add(-time.Second).Zone()
	if prevOff > off {
		if before := start.Unix() - 1 + int64(prevOff); before > w {
			return before
		}
	}
	return w
}

// instant returns the unix second at which the civil time c fires: its first occurrence on the
// zone's clock, or, if the clock skipped it, the instant of the jump. shift is 0 for a time
// that occurred, and for a skipped one the wall-clock distance it was moved forward.
func (sp *spec) instant(c int64) (u, shift int64) {
	if sp.loc == time.UTC {
		return c, 0
	}
	// Offsets are within [-12h, +14h] (historical local mean times a little beyond), so the
	// instant lies in [c-14h, c+12h]; walk the zone's periods over that span in order.
	x := time.Unix(c-15*3600, 0).In(sp.loc)
	for range 8 {
		_, off := x.Zone()
		start, end := x.ZoneBounds()
		u := c - int64(off)
		if (start.IsZero() || u >= start.Unix()) && (end.IsZero() || u < end.Unix()) {
			return u, 0
		}
		if end.IsZero() {
			break
		}
		e := end.Unix()
		_, nextOff := end.Zone()
		if c >= e+int64(off) && c < e+int64(nextOff) {
			return e, e + int64(nextOff) - c
		}
		x = end
	}
	// Unreachable for tzdata zones; the offset of the instant c-offset(c) is a fair answer.
	_, off := time.Unix(c, 0).In(sp.loc).Zone()
	return c - int64(off), 0
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// weekday of a day number (days since 1970-01-01, a Thursday), 0 = Sunday.
func weekday(days int64) int {
	w := (days + 4) % 7
	if w < 0 {
		w += 7
	}
	return int(w)
}

func isLeap(y int) bool { return y%4 == 0 && (y%100 != 0 || y%400 == 0) }

func daysIn(y, m int) int {
	switch m {
	case 2:
		if isLeap(y) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysFromCivil and civilFromDays are Howard Hinnant's proleptic Gregorian conversions.
func daysFromCivil(y, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era = (y - 399) / 400
	}
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era)*146097 + int64(doe) - 719468
}

func civilFromDays(z int64) (y, m, d int) {
	z += 719468
	era := floorDiv(z, 146097)
	doe := int(z - era*146097)
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y = yoe + int(era)*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = doy - (153*mp+2)/5 + 1
	if mp < 10 {
		m = mp + 3
	} else {
		m = mp - 9
	}
	if m <= 2 {
		y++
	}
	return y, m, d
}
