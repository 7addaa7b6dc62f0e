package backtest

import (
	"sort"
	"time"
)

// cluster simulates a deployment: a pod added at t serves from t + delay (it is paid for from
// t); removed pods go at once, newest (not yet ready) first.
type cluster struct {
	spec    int32
	readyAt []time.Duration // ready time of each pod, in creation order (so non-decreasing)
	delay   time.Duration
}

func newCluster(n int32, delay time.Duration) *cluster {
	return &cluster{spec: n, readyAt: make([]time.Duration, n), delay: delay}
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
	for int32(len(c.readyAt)) < n {
		c.readyAt = append(c.readyAt, t+c.delay)
	}
	c.readyAt = c.readyAt[:n]
	c.spec = n
	return true
}
