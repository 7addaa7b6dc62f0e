package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckReportsEveryError checks that Check reports each error of a file holding several,
// in different sections and policies, with its field path and line, in the file's words.
func TestCheckReportsEveryError(t *testing.T) {
	b, err := os.ReadFile("testdata/check-errors.yml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Load(b); err == nil {
		t.Fatal("Load accepted the fixture")
	}
	errs := Check(b)
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	// Lines as in the fixture; the duplicate name is found over the valid policies and
	// renumbered to the file's indexes (web is policies[0], its duplicate policies[4]).
	want := []string{
		`global.query_timeout (line 5): must be positive`,
		`policies[0].history_step (line 10): "abc" is not a duration`,
		`policies[1].target.namespace (line 12): required`,
		`policies[2].algorithm (line 16): unknown policy "crystalball"`,
		`policies[3].scaling.min_replica (line 22): unknown field "min_replica"`,
		`policies[4].name (line 23): "web" is already used by policies[0]`,
	}
	if len(got) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) {
			t.Errorf("error %d = %q, want it to contain %q", i, got[i], w)
		}
	}
	for _, e := range errs {
		ce, ok := e.(*CheckError)
		if !ok || ce.Line == 0 || ce.Path == "" {
			t.Errorf("%q: want a *CheckError with a path and a line", e)
			continue
		}
		for _, goName := range []string{"time.Duration", "config.", "scaling.", "!!str", "unmarshal", "type "} {
			if strings.Contains(ce.Msg, goName) {
				t.Errorf("%q leaks %q", e, goName)
			}
		}
	}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string // substrings, one per error, in order
	}{
		{"valid", "policies:\n  - {name: web, target: {namespace: shop, name: web}, request: 1}\n", nil},
		{"empty", "", []string{"empty configuration"}},
		{"syntax", "policies:\n  - name: web\n   target: x\n", []string{"line 1: did not find expected"}},
		{"wrong types", "global:\n  interval: [1s]\npolicies:\n  - name: web\n    target: {namespace: shop, name: web}\n    request: lots\n    history: many\n",
			[]string{"global.interval (line 2): must be a duration (e.g. 30s, 5m, 1h), not a list", `policies[0].request (line 6): "lots" is not a number`, `policies[0].history (line 7): "many" is not an integer`}},
		{"unknown top-level field", "polices: []\n", []string{`polices (line 1): unknown field "polices"`}},
		{"target a scalar", "policies:\n  - name: web\n    target: web\n    request: 1\n", []string{`policies[0].target (line 3): "web" is not a mapping`}},
		{"webhook", "policies:\n  - {name: web, target: {namespace: shop, name: web}, request: 1}\nwebhook:\n  mode: yolo\n", []string{"webhook.mode (line 4): must be one of"}},
		{"override of an invalid policy is not an echo", "policies:\n  - {name: web, target: {name: web}, request: 1}\nwebhook:\n  policies:\n    - {name: web, mode: act}\n",
			[]string{"policies[0].target.namespace (line 2): required"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := Check([]byte(tc.yaml))
			if len(errs) != len(tc.want) {
				t.Fatalf("got %v, want %d errors %q", errs, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(errs[i].Error(), w) {
					t.Errorf("error %d = %q, want %q", i, errs[i], w)
				}
			}
			// Check and Load agree on validity.
			if _, err := Load([]byte(tc.yaml)); (err == nil) != (len(errs) == 0) {
				t.Errorf("Load: %v, Check: %v", err, errs)
			}
		})
	}
}

// TestCheckGoodFixtures checks that every file Load accepts passes Check.
func TestCheckGoodFixtures(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.yml")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		_, lerr := Load(b)
		errs := Check(b)
		if (lerr == nil) != (len(errs) == 0) {
			t.Errorf("%s: Load %v, Check %v", f, lerr, errs)
		}
	}
}

// FuzzCheck checks that Check never panics and agrees with Load on whether a file is valid.
func FuzzCheck(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.yml")
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		errs := Check(b)
		if _, err := Load(b); (err == nil) != (len(errs) == 0) {
			t.Fatalf("Load: %v, Check: %v", err, errs)
		}
	})
}
