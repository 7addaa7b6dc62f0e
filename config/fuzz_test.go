package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// FuzzLoad feeds arbitrary bytes to Load: it never panics, and every error either names the
// field path at fault (a *FieldError or a webhook section error) or is the YAML decoder's own
// ("yaml: …", with the path added where the line is known). A configuration Load accepts
// re-validates: marshalled back to YAML, defaults filled in, it loads again.
//
// Seeds: every fixture of testdata/ and the sections of the webhook table tests.
func FuzzLoad(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.yml")
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, section := range []string{
		"mode: yolo",
		"bearer_token_file: /t\n  allow_unauthenticated: true",
		"max_body_bytes: 10",
		"decision_timeout: -1s",
		`queries: {load: 'x{{.Nope}}'}`,
		`queries: {window_load: 'sum(('}`,
		"tidal: {resources: [{group: a/b, version: v1, resource: r}]}",
		"tidal: {push: {enabled: true, bearer_token_file: /p}}",
		"tidal: {push: {enabled: true}}",
		"leader_election: {lease_duration: 5s, renew_deadline: 10s}",
		"policies: [{name: web, mode: fight}]",
	} {
		f.Add([]byte(webhookBase + "webhook:\n  " + section + "\n"))
	}
	f.Add([]byte(""))
	f.Add([]byte("policies:\n  - {name: w, target: {namespace: s, name: w}, lead_time: auto}\n  - {name: v, target: {namespace: s, name: v}, lead_time: \"auto\", scaling: {min_replicas: 0}}\n"))
	f.Add([]byte("a: &a [*a, *a]\n"))
	f.Add([]byte("policies: !!binary AAAA\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Load(b)
		if err != nil {
			var fe *FieldError
			var we *fieldError
			msg := err.Error()
			if !errors.As(err, &fe) && !errors.As(err, &we) && !strings.HasPrefix(msg, "yaml: ") && msg != "empty configuration" {
				t.Fatalf("error names no field path and is not a YAML error: %q", msg)
			}
			return
		}
		if c == nil {
			t.Fatal("Load returned neither a configuration nor an error")
		}
		out, err := yaml.Marshal(c)
		if err != nil {
			t.Fatalf("accepted configuration does not marshal: %v", err)
		}
		if _, err := Load(out); err != nil {
			t.Fatalf("accepted configuration refused once marshalled: %v\n%s", err, out)
		}
	})
}
