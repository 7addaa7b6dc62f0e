package exporter

import (
	"fmt"
	"testing"

	"github.com/debi-scaler/debi/config"
)

// fnv1a is FNV-1a (32 bit) written out from its definition: offset basis 2166136261,
// prime 16777619, xor then multiply per byte. It is the oracle for Shard.Owns.
func fnv1a(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

func TestParseShard(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Shard
		ok   bool
	}{
		{"0/1", Shard{0, 1}, true},
		{"3/4", Shard{3, 4}, true},
		{" 1/2 ", Shard{1, 2}, true},
		{"4/4", Shard{}, false},
		{"0/0", Shard{}, false},
		{"1", Shard{}, false},
		{"-1/2", Shard{}, false},
		{"a/b", Shard{}, false},
	} {
		got, err := ParseShard(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseShard(%q) = %v, %v; want %v, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
}

// TestShardPartition: n shards split the policies into disjoint sets that cover them all, by
// FNV-1a of the name.
func TestShardPartition(t *testing.T) {
	var ps []config.Policy
	for i := range 1000 {
		ps = append(ps, config.Policy{Name: fmt.Sprintf("ns-%d/web-%d", i%37, i)})
	}
	const n = 4
	owner := map[string]int{}
	for i := range n {
		s := Shard{Index: uint32(i), Count: n}
		sel := s.Select(ps)
		// Each shard gets 250 ± 25 % of a uniform split of 1,000 names.
		if len(sel) < 190 || len(sel) > 310 {
			t.Errorf("shard %v has %d policies, want about 250", s, len(sel))
		}
		for _, p := range sel {
			if j, dup := owner[p.Name]; dup {
				t.Fatalf("%s in shards %d and %d", p.Name, j, i)
			}
			owner[p.Name] = i
			if want := int(fnv1a(p.Name) % n); want != i {
				t.Fatalf("%s in shard %d, FNV-1a says %d", p.Name, i, want)
			}
		}
	}
	if len(owner) != len(ps) {
		t.Fatalf("%d of %d policies assigned", len(owner), len(ps))
	}
	if !(Shard{}).Owns("anything") || !(Shard{0, 1}).Owns("anything") {
		t.Fatal("the zero shard and 0/1 must own every policy")
	}
}
