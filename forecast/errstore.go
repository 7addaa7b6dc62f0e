package forecast

import (
	"cmp"
	"slices"
)

// errorStore keeps a Calibrator's last errors under Neighbours, each class's last window apart,
// each error with the forecast it was made on: every class's in arrival order (a ring, whose
// oldest the next one replaces once it is full), and all of them by ascending forecast (the
// rings' slots, which the quantile of a forecast is read along). An error takes 10 bytes: its
// forecast and its value in single precision, and its slot in the order by forecast (class c's
// ring is the slots c·window to (c+1)·window − 1, made as far as c at c's first error). The
// slots are kept in chunks of storeChunk: Go rounds an array above 32 KB up to whole 8 KB pages
// (two rings of 2880 errors, 46 KB, would take 49), and a chunk is a size class of its own.
// After the first window of each class it does not allocate.
type errorStore struct {
	window int
	chunks []*[storeChunk]fcError // the classes' rings, one after the other: slot k is chunks[k/storeChunk][k%storeChunk]
	n      [Classes]int           // errors kept of each class
	next   [Classes]int           // once a class's ring is full, the place of its oldest
	byF    []uint16               // the slots by ascending (forecast, error): equal ones in any order
}

// storeChunk is the number of errors of a chunk: 3 KB, one of the allocator's size classes.
const storeChunk = 384

// fcError is one kept error and the forecast it was made on.
type fcError struct {
	f, e float32 // single precision: a policy keeps thousands (its largest state)
}

// maxWindow is the largest window whose slots (Classes of them) a uint16 indexes.
const maxWindow = (1 << 16) / Classes

func cmpFcError(a, b fcError) int {
	if c := cmp.Compare(a.f, b.f); c != 0 {
		return c
	}
	return cmp.Compare(a.e, b.e)
}

func newErrorStore(window int) errorStore {
	return errorStore{window: window, byF: make([]uint16, 0, window),
		chunks: make([]*[storeChunk]fcError, 0, (Classes*window+storeChunk-1)/storeChunk)}
}

// slot is the kept error in slot k.
func (s *errorStore) slot(k uint16) *fcError { return &s.chunks[k/storeChunk][k%storeChunk] }

func (s *errorStore) len() int { return len(s.byF) }

// count is the number of errors of the class kept.
func (s *errorStore) count(class int) int { return s.n[class] }

// at is the kept error i in the order by forecast.
func (s *errorStore) at(i int) fcError { return *s.slot(s.byF[i]) }

// classAt is the class of the kept error i in the order by forecast: 1 past the first ring.
func (s *errorStore) classAt(i int) int {
	if int(s.byF[i]) >= s.window {
		return 1
	}
	return 0
}

// Two classes: classAt compares instead of dividing.
const (
	_ uint = Classes - 2
	_ uint = 2 - Classes
)

// search is the first position in the order by forecast whose error is not below v.
func (s *errorStore) search(v fcError) int {
	lo, hi := 0, len(s.byF)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if cmpFcError(*s.slot(s.byF[m]), v) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// add keeps v of the class given, the class's oldest kept error leaving once it has window.
func (s *errorStore) add(class int, v fcError) {
	for need := (class + 1) * s.window; len(s.chunks)*storeChunk < need; {
		// The class's ring, and those before it: a Calibrator whose forecasts are of one class (a
		// 1-minute history, or the quantile rule's) holds one window.
		s.chunks = append(s.chunks, new([storeChunk]fcError))
	}
	var slot int
	if s.n[class] < s.window {
		slot = class*s.window + s.n[class]
		s.n[class]++
	} else {
		slot = class*s.window + s.next[class]
		s.next[class] = (s.next[class] + 1) % s.window
		// The oldest leaves the order by forecast: among the errors equal to it, the one in its slot.
		k := s.search(*s.slot(uint16(slot)))
		for int(s.byF[k]) != slot {
			k++
		}
		s.byF = slices.Delete(s.byF, k, k+1)
	}
	*s.slot(uint16(slot)) = v
	if len(s.byF) == cap(s.byF) {
		// A class's first error past the others' windows: room for one more window, exactly
		// (append's growth would overshoot; a store holds at most Classes windows).
		s.byF = append(make([]uint16, 0, len(s.byF)+s.window), s.byF...)
	}
	s.byF = slices.Insert(s.byF, s.search(v), uint16(slot))
}
