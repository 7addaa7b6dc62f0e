package exporter

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/debi-scaler/debi/config"
)

// Shard selects the policies of one exporter out of Count: those whose name hashes (FNV-1a,
// 32 bit) to Index modulo Count. The zero value and 0/1 select every policy. Because the choice
// depends on the name only, every exporter of a fleet computes the same split from the same
// file, and adding a policy moves no other.
type Shard struct {
	Index, Count uint32
}

// ParseShard reads "i/n" with 0 ≤ i < n.
func ParseShard(s string) (Shard, error) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return Shard{}, fmt.Errorf("shard %q: want i/n, e.g. 0/4", s)
	}
	i, err1 := strconv.ParseUint(a, 10, 32)
	n, err2 := strconv.ParseUint(b, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return Shard{}, fmt.Errorf("shard %q: want i/n, e.g. 0/4: %w", s, err)
	}
	if n == 0 || i >= n {
		return Shard{}, fmt.Errorf("shard %q: want 0 ≤ i < n", s)
	}
	return Shard{Index: uint32(i), Count: uint32(n)}, nil
}

// String is "i/n".
func (s Shard) String() string {
	if s.Count == 0 {
		return "0/1"
	}
	return fmt.Sprintf("%d/%d", s.Index, s.Count)
}

// Set implements flag.Value.
func (s *Shard) Set(v string) error {
	x, err := ParseShard(v)
	if err != nil {
		return err
	}
	*s = x
	return nil
}

// Owns reports whether the policy of that name belongs to the shard.
func (s Shard) Owns(name string) bool {
	if s.Count <= 1 {
		return true
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	return h.Sum32()%s.Count == s.Index
}

// Select returns the policies of the shard, in file order.
func (s Shard) Select(ps []config.Policy) []config.Policy {
	var out []config.Policy
	for _, p := range ps {
		if s.Owns(p.Name) {
			out = append(out, p)
		}
	}
	return out
}
