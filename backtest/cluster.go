package backtest

import (
	"math"
	"sort"
	"time"
)

// cluster simulates a deployment: a pod added at t serves from t + delay, plus a random extra
// where start-ups vary (spread), and is paid for from t; removed pods go at once, those that
// would serve last (not yet ready) first, as a ReplicaSet deletes not-ready pods first.
type cluster struct {
	spec    int32
	readyAt []time.Duration // ready time of each pod, non-decreasing
	created []time.Duration // creation time of each pod, in readyAt's order
	delay   time.Duration
	// spread is the 0.9 quantile of a start-up's extra beyond delay, exponentially distributed
	// (0: every pod starts in delay exactly).
	spread time.Duration
	// reported is how many of the ready pods (a prefix) startups has reported.
	reported int
}

// newCluster is a deployment of n pods serving from the start, whose start-ups are not reported.
func newCluster(n int32, delay, spread time.Duration) *cluster {
	return &cluster{spec: n, readyAt: make([]time.Duration, n), created: make([]time.Duration, n), delay: delay, spread: spread, reported: int(n)}
}

// Startup is one pod's start-up in a run (Series.Startups): when it was created and when it
// served, as times since the run's first tick.
type Startup struct {
	Created, Ready time.Duration
}

// startups appends to s the pods that serve at t and were not reported before, and returns it.
func (c *cluster) startups(s []Startup, t time.Duration) []Startup {
	c.reported = min(c.reported, len(c.readyAt))
	r := int(c.ready(t))
	for j := c.reported; j < r; j++ {
		s = append(s, Startup{Created: c.created[j], Ready: c.readyAt[j]})
	}
	c.reported = max(c.reported, r)
	return s
}

// byReady sorts a cluster's pods by their ready times.
type byReady cluster

func (b *byReady) Len() int           { return len(b.readyAt) }
func (b *byReady) Less(i, j int) bool { return b.readyAt[i] < b.readyAt[j] }
func (b *byReady) Swap(i, j int) {
	b.readyAt[i], b.readyAt[j] = b.readyAt[j], b.readyAt[i]
	b.created[i], b.created[j] = b.created[j], b.created[i]
}

// ready counts the pods serving at t.
func (c *cluster) ready(t time.Duration) int32 {
	// readyAt is non-decreasing: the ready pods are a prefix.
	return int32(sort.Search(len(c.readyAt), func(i int) bool { return c.readyAt[i] > t }))
}

// scale sets the spec to n at t and reports whether it changed.
func (c *cluster) scale(t time.Duration, n int32) bool {
	n = max(n, 0)
	if n == c.spec {
		return false
	}
	grown := false
	for k := int32(len(c.readyAt)); k < n; k++ {
		c.readyAt = append(c.readyAt, t+c.delay+startupExtra(c.spread, t, k))
		c.created = append(c.created, t)
		grown = true
	}
	if grown && c.spread > 0 {
		sort.Sort((*byReady)(c))
	}
	c.readyAt, c.created = c.readyAt[:n], c.created[:n]
	c.spec = n
	return true
}

// startupExtra is the extra start-up of the k-th pod of a deployment created at t: exponential
// with 0.9 quantile spread, capped at its 0.999 quantile (three times spread), and the same
// for the same (t, k), so that policies ordering alike draw alike.
func startupExtra(spread, t time.Duration, k int32) time.Duration {
	if spread <= 0 {
		return 0
	}
	// splitmix64 of the creation time and the pod's index: a uniform u in [0, 1).
	x := uint64(t) ^ uint64(k)*0x9e3779b97f4a7c15
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	x ^= x >> 31
	u := math.Min(float64(x>>11)/(1<<53), 0.999)
	return time.Duration(float64(spread) * -math.Log1p(-u) / math.Ln10)
}

// StartupFit is the start-up delay and spread (Options.StartupDelay, StartupSpread) whose
// start-ups have the given median and 0.9 quantile: the least start-up plus an exponential extra,
// which fits both where the median is above 0.3 of the 0.9 quantile; below, the least start-up is
// 0 and the 0.9 quantile alone is kept. Start-ups whose 0.9 quantile is not above the median take
// the median exactly.
func StartupFit(median, p90 time.Duration) (delay, spread time.Duration) {
	if p90 <= median {
		return median, 0
	}
	// Extra ~ Exp(θ): its median is θ·ln 2 and its 0.9 quantile θ·ln 10.
	theta := float64(p90-median) / math.Log(5)
	delay = median - time.Duration(math.Round(theta*math.Ln2))
	if delay < 0 {
		return 0, p90
	}
	return delay, p90 - delay
}
