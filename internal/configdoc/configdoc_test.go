package configdoc

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/debi-scaler/debi/config"
)

var update = flag.Bool("update", false, "rewrite docs/configuration.md")

const root = "../.."

// TestReferenceIsFresh fails when docs/configuration.md differs from what the config types,
// their comments and their defaults generate.
func TestReferenceIsFresh(t *testing.T) {
	got, err := Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(root, "docs", "configuration.md")
	if *update {
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run `make generate`)", err)
	}
	if !bytes.Equal(got, want) {
		t.Error("docs/configuration.md is stale: run `make generate` (or go test ./internal/configdoc -update)")
	}
}

// TestEveryFieldDocumented walks config.Config by reflection and requires a table row for every
// YAML field at its path, so a new field cannot be left out of the reference.
func TestEveryFieldDocumented(t *testing.T) {
	b, err := Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	sections := map[string]string{}
	for _, s := range strings.Split(doc, "\n## ")[1:] {
		title, body, _ := strings.Cut(s, "\n")
		sections[strings.Trim(title, "`")] = body
	}
	n := 0
	var walk func(path string, typ reflect.Type)
	walk = func(path string, typ reflect.Type) {
		key := path
		if key == "" {
			key = "top level"
		}
		body, ok := sections[key]
		if !ok {
			t.Errorf("no section for %s", key)
			return
		}
		for i := 0; i < typ.NumField(); i++ {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("yaml"), ",")
			if name == "" || name == "-" {
				continue
			}
			n++
			ft := typ.Field(i).Type
			if name == "[]" && ft.Kind() == reflect.Slice {
				// The key written as a list itself (config.PolicyMetrics): a row of its own, and
				// the entries' section at path[].
				if !strings.Contains(body, "| (the key as a list) |") {
					t.Errorf("section %s lacks the row of its list form", key)
				}
				walk(path+"[]", ft.Elem())
				continue
			}
			if !strings.Contains(body, "| `"+name+"` |") {
				t.Errorf("section %s lacks field %s", key, name)
			}
			switch {
			case ft.Kind() == reflect.Struct && ft.PkgPath() != "time":
				walk(join(path, name), ft)
			case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
				walk(join(path, name)+"[]", ft.Elem())
			}
		}
	}
	walk("", reflect.TypeOf(config.Config{}))
	if n < 60 {
		t.Errorf("walked %d fields; config has more than 60", n)
	}
	for _, want := range []string{"| `interval` | duration | `15s` |", "| `mode` | string | `shadow` |"} {
		if !strings.Contains(doc, want) {
			t.Errorf("reference lacks the row %q: defaults not taken from config.Load", want)
		}
	}
}

func TestMentions(t *testing.T) {
	if !mentions("Lower and Upper bound", "Upper") || mentions("Uppermost", "Upper") {
		t.Error("mentions matches words, not substrings")
	}
}
