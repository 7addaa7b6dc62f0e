package backtest

import (
	"fmt"
	"time"

	"gonum.org/v1/plot/vg/vgimg"
)

// burstRise is the span over which the burst zoom looks for the largest rise of demand;
// burstHalfWindow the zoom on each side of it (the window is at most twice that).
const (
	burstRise       = 30 * time.Minute
	burstHalfWindow = 3 * time.Hour
)

// burst is <trace>-burst.png: a zoom on the largest rise of demand.
func (v *traceView) burst() (*vgimg.Canvas, error) {
	b := v.findBurst()
	half := int(burstHalfWindow / v.tick)
	from, to := b.centre-half, b.centre+half
	if from < v.warm {
		to += v.warm - from
		from = v.warm
	}
	if to > v.n {
		from = max(v.warm, from-(to-v.n))
		to = v.n
	}
	ax := timeAxis{origin: v.warm, tick: v.tick, unit: time.Hour, label: "hours since the start of the scored period"}.dated(v.tr.Start)
	w := window{from: from, to: to, bucket: 1, axis: ax, marks: []int{b.start, b.end}}
	day := ""
	if time.Duration(v.n-v.warm)*v.tick > 72*time.Hour {
		day = fmt.Sprintf(" (day %.1f)", ax.x(b.end)/24)
	}
	var title string
	if b.rise {
		title = fmt.Sprintf("%s%s — zoom on the largest rise of demand within %s (between the dotted lines)\n%.1f → %.1f pods at u_sla (%+.1f cores) from %.2f h to %.2f h after the start of the scored period%s; window of %s",
			v.tr.Trace, classSuffix(v.tr.Class), humanSpan(burstRise), v.demand[b.start]/v.perPod, v.demand[b.end]/v.perPod,
			v.demand[b.end]-v.demand[b.start], ax.x(b.start), ax.x(b.end), day, humanSpan(time.Duration(to-from)*v.tick))
	} else {
		title = fmt.Sprintf("%s%s — zoom on the demand maximum (dotted line): demand never rises within %s\n%.1f pods at u_sla at %.2f h after the start of the scored period%s; window of %s",
			v.tr.Trace, classSuffix(v.tr.Class), humanSpan(burstRise), v.demand[b.end]/v.perPod, ax.x(b.end), day, humanSpan(time.Duration(to-from)*v.tick))
	}
	title += fmt.Sprintf("\ntick %v, start-up delay %v: each step of the thin line is a scaling action; where it leads the thick line, new pods are starting", v.tick, v.o.StartupDelay)
	return v.panels(title, w, true)
}

type burstSpot struct {
	start, end, centre int
	rise               bool // false: the demand maximum
}

// findBurst finds the largest rise of demand over burstRise within the scored period (the rise
// ending at each tick is from the lowest demand of the burstRise before it); when demand never
// rises it falls back to the demand maximum.
func (v *traceView) findBurst() burstSpot {
	k := max(1, int(burstRise/v.tick))
	var dq []int // ticks of increasing demand: a sliding minimum
	best, bs, be := 0.0, v.warm, v.warm
	peak := v.warm
	for i := v.warm; i < v.n; i++ {
		d := v.demand[i]
		if d > v.demand[peak] {
			peak = i
		}
		for len(dq) > 0 && v.demand[dq[len(dq)-1]] >= d {
			dq = dq[:len(dq)-1]
		}
		dq = append(dq, i)
		for dq[0] < i-k {
			dq = dq[1:]
		}
		if r := d - v.demand[dq[0]]; r > best {
			best, bs, be = r, dq[0], i
		}
	}
	if best > 0 {
		return burstSpot{start: bs, end: be, centre: (bs + be) / 2, rise: true}
	}
	return burstSpot{start: peak, end: peak, centre: peak}
}
