package forecast

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkHighWater measures one high-water computation on a demand-like history: a base load
// with exponential noise and occasional bursts. The allocation count must stay at 1 (the sorted
// copy), whatever the size.
func BenchmarkHighWater(b *testing.B) {
	for _, method := range []string{"moments", "grimshaw"} {
		for _, n := range []int{1000, 10000} {
			rng := rand.New(rand.NewPCG(uint64(n), 1))
			x := make([]float64, n)
			for i := range x {
				x[i] = 4 + rng.ExpFloat64()
				if rng.IntN(50) == 0 {
					x[i] += 5 * rng.ExpFloat64()
				}
			}
			cfg := DefaultPOTConfig()
			cfg.Method = method
			b.Run(fmt.Sprintf("%s/n=%d", method, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := HighWater(x, cfg); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
