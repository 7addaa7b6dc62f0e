package forecast

import (
	"math"
	"slices"
)

// errorTail keeps, under Neighbours, the tailTop largest errors of each class in each of its last
// tailWindows error windows (Window errors of the class each), with the forecasts they were made
// on: at the default window (2880 errors, 12 hours at 15 s ticks) a week of each class's largest
// errors, in about 1 KB.
//
// The errors nearest a forecast resolve a level α down to about the inverse of how many are read
// (400 at a 0.5 % budget), and the priced rule reads levels down to a tenth of the budget at a
// high price (1/2000 at 0.5 %): a quantile of more errors than a window holds. Below what the
// window resolves, the largest errors of a window are the rare tall ones it happened to see,
// and a spike taller than the last twelve hours' is news to it however high the price. The tail
// keeps the tall ones of a week, so the level is read from as many errors as it needs
// (errorTail.gather; docs/results-budget.md, the twenty-sixth round).
type errorTail struct {
	window int32
	cur    [Classes]uint8                         // each class's current bucket
	n      [Classes][tailWindows]int32            // errors of the class in each bucket
	k      [Classes][tailWindows]uint8            // of them kept in top
	top    [Classes][tailWindows][tailTop]bfError // the largest errors of each bucket
}

const (
	// tailWindows is the number of error windows the tail spans: 14, a week at the default.
	tailWindows = 14
	// tailTop is the number of largest errors kept of each window: 8, which resolves the level
	// at a tenth of the budget in each window's worth of the errors nearest a forecast.
	tailTop = 8
	// tailKept is the most errors the tail keeps of a class.
	tailKept = tailWindows * tailTop
)

// bfError is a kept error and its forecast, each in bfloat16 (the top half of a float32: 8
// bits of mantissa: 0.4 %, 0.8 % for the error, rounded down): the tail is read at levels where the errors
// are tall, and the forecast only places an error among the levels of the nearest ones.
type bfError struct{ f, e uint16 }

// toBF16 is v in bfloat16, rounded to the nearest (ties to even).
func toBF16(v float32) uint16 {
	b := math.Float32bits(v)
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// toBF16Down is v in bfloat16, rounded down: a kept error is never above the error, so the tail
// never raises a quantile that the window's own errors resolve.
func toBF16Down(v float32) uint16 {
	b := math.Float32bits(v)
	if v < 0 && b&0xffff != 0 {
		b += 0x10000 // a larger magnitude: down
	}
	return uint16(b >> 16)
}

func fromBF16(v uint16) float64 { return float64(math.Float32frombits(uint32(v) << 16)) }

func newErrorTail(window int) *errorTail { return &errorTail{window: int32(window)} }

// add keeps the error e of the class made on forecast f if it is among its window's tailTop
// largest (bfError.less).
func (t *errorTail) add(class int, f, e float32) {
	b := t.cur[class]
	if t.n[class][b] >= t.window {
		b = (b + 1) % tailWindows
		t.cur[class], t.n[class][b], t.k[class][b] = b, 0, 0
	}
	t.n[class][b]++
	x := bfError{toBF16(f), toBF16Down(e)}
	top := &t.top[class][b]
	if k := t.k[class][b]; k < tailTop {
		top[k] = x
		t.k[class][b]++
		return
	}
	lo := 0
	for i := 1; i < tailTop; i++ {
		if top[i].less(top[lo]) {
			lo = i
		}
	}
	if top[lo].less(x) {
		top[lo] = x
	}
}

// less orders kept errors by error, then by forecast: which of equal errors a window keeps does
// not depend on the order they came in.
func (x bfError) less(y bfError) bool {
	xe, ye := fromBF16(x.e), fromBF16(y.e)
	return xe < ye || xe == ye && fromBF16(x.f) < fromBF16(y.f)
}

// gather appends to buf[:0] the kept errors of the class whose forecasts near accepts, largest
// first, and returns them with the number of errors of the class the tail spans.
func (t *errorTail) gather(class int, near func(f float64) bool, buf []float64) ([]float64, int) {
	buf, n := buf[:0], 0
	for b := range tailWindows {
		n += int(t.n[class][b])
		for _, x := range t.top[class][b][:t.k[class][b]] {
			if near(fromBF16(x.f)) {
				buf = append(buf, fromBF16(x.e))
			}
		}
	}
	slices.Sort(buf)
	slices.Reverse(buf)
	return buf, n
}

// tailAt is the quantile at level α, as quantileSorted reads it, of share·n errors whose largest
// are gathered (largest first): the quantile's rank from the largest, (share·n − 1)·α, falls
// among them. ok false: it does not (the level is not deep enough to need the tail).
func tailAt(gathered []float64, n int, share, alpha float64) (q float64, ok bool) {
	r := (share*float64(n) - 1) * alpha
	if !(r >= 0) {
		return 0, false
	}
	i := int(r)
	frac := r - float64(i)
	if i >= len(gathered) || frac > 0 && i+1 >= len(gathered) {
		return 0, false
	}
	if frac == 0 {
		return gathered[i], true
	}
	return gathered[i] - frac*(gathered[i]-gathered[i+1]), true
}
