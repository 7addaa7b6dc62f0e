package deploy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"go.yaml.in/yaml/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/debi-scaler/debi/config"
)

// The getting-started page, held to the repository's own artefacts (issue 13). Three tests,
// all matched by -run TestGettingStarted:
//
//   - TestGettingStartedLinks: every relative link of the pages resolves to a file, and an
//     #anchor to a heading of it (GitHub's slugs); every repository path in inline code exists.
//   - TestGettingStartedYAML: every fenced yaml block is classified — a debi configuration
//     (top-level keys among global/exporter/policies/webhook; a fragment marked "… as in step
//     N" is merged over the page's full configuration), Helm values (keys of
//     values.schema.json) or Kubernetes objects (apiVersion and kind) — and a configuration
//     must load with config.Load and pass config.Check. Helm values and objects are checked by
//     the commands test, where helm and a cluster are at hand.
//   - TestGettingStartedCommands: every command of every fenced sh/bash/console block, and
//     every inline `kubectl …`, `debi …`, `go run …`, `make …` span, is run against the real
//     thing in page order: kubectl against a real kube-apiserver (the Prometheus Operator's
//     CRDs installed, as "What you need" demands), helm with the real binary (helm template
//     for the values schema, helm install --dry-run=server against a second kube-apiserver,
//     whose manifest is then applied with a server-side dry run), debi built from ./cmd/debi,
//     make targets looked up in the Makefile, promtool and prometheus of the backfill and
//     laptop recipes against the files and blocks the page's commands wrote (the tests that
//     run those recipes on a real Prometheus are exporter's TestBackfillRecipe and cmd/debi's
//     TestDemoWhatIf).
//
// Every extraction is strict: a fence language, a command, a kubectl verb, a flag or a shell
// construct the test does not know fails it with the file and line, so a new command cannot
// slip into the page unverified. The few commands that only make sense on a live cluster are
// in docAllowlist, each with its reason.

// docPages are the pages held to the repository: the getting-started page whole, and the
// README's quick start (up to the next "## " heading).
var docPages = []struct{ path, section string }{
	{"docs/getting-started.md", ""},
	{"README.md", "## Quick start"},
}

// docAllowlist: commands verified only as far as the repository goes (the namespace, the
// Deployment or Service they name exist in what the page installed), not run, with the
// reason. The key is the command's first two words after kubectl's global flags.
var docAllowlist = map[string]string{
	// Reads a running pod's log: there are no pods (no kubelet, no controller-manager) on the
	// test's kube-apiserver. The object it names and the message it greps for are checked.
	"kubectl logs": "needs running pods",
	// Opens a tunnel to a running pod: no pods here. The Service and its port are checked.
	"kubectl port-forward": "needs running pods",
	// Lists objects the cluster's controllers create (Events of the scaled workload): nothing
	// to list without a running webhook. The namespace is checked.
	"kubectl get": "reads what a running webhook wrote",
}

// docSubstitutions are the command substitutions a command may contain, replaced by the
// value they would produce. openssl is not run: any random value will do.
var docSubstitutions = map[*regexp.Regexp]func([]string) string{
	regexp.MustCompile(`^\$\(openssl rand -hex ([0-9]+)\)$`): func(m []string) string {
		n, _ := strconv.Atoi(m[1])
		b := make([]byte, n)
		_, _ = rand.Read(b)
		return hex.EncodeToString(b)
	},
}

// docBlock is a fenced block of a page: its language, its text and the line of its first
// content line.
type docBlock struct {
	file, lang, text string
	line             int
}

// docSpan is an inline code span or a link target, with its line and the heading it is under.
type docSpan struct {
	file, text string
	line       int
	heading    string
}

type docPage struct {
	file     string
	blocks   []docBlock
	code     []docSpan // inline code
	links    []docSpan // link targets
	headings []string
}

var (
	inlineCode = regexp.MustCompile("`([^`]+)`")
	linkTarget = regexp.MustCompile(`\]\(([^)\s]+)\)`)
)

// readPage splits a page (or its section) into fenced blocks, inline code and links.
func readPage(t *testing.T, file, section string) docPage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		t.Fatal(err)
	}
	p := docPage{file: file}
	lines := strings.Split(string(b), "\n")
	in := section == ""
	heading := ""
	var fence *docBlock
	for i, l := range lines {
		n := i + 1
		if fence != nil {
			if strings.HasPrefix(l, "```") {
				p.blocks = append(p.blocks, *fence)
				fence = nil
				continue
			}
			fence.text += l + "\n"
			continue
		}
		if strings.HasPrefix(l, "#") {
			if section != "" {
				if strings.TrimSpace(l) == section {
					in = true
				} else if in && strings.HasPrefix(l, "## ") {
					in = false
				}
			}
		}
		if !in {
			continue
		}
		if strings.HasPrefix(l, "```") {
			fence = &docBlock{file: file, lang: strings.TrimSpace(strings.TrimPrefix(l, "```")), line: n + 1}
			continue
		}
		if strings.HasPrefix(l, "#") {
			heading = strings.TrimSpace(strings.TrimLeft(l, "#"))
			p.headings = append(p.headings, heading)
		}
		for _, m := range inlineCode.FindAllStringSubmatch(l, -1) {
			p.code = append(p.code, docSpan{file, m[1], n, heading})
		}
		for _, m := range linkTarget.FindAllStringSubmatch(l, -1) {
			p.links = append(p.links, docSpan{file, m[1], n, heading})
		}
	}
	if fence != nil {
		t.Fatalf("%s:%d: fenced block never closed", file, fence.line-1)
	}
	if section != "" && len(p.blocks)+len(p.code) == 0 {
		t.Fatalf("%s: section %q not found or empty", file, section)
	}
	return p
}

// headingsOf reads every heading of a Markdown file, outside fenced blocks.
func headingsOf(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	fenced := false
	for l := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(l, "```") {
			fenced = !fenced
		}
		if !fenced && strings.HasPrefix(l, "#") {
			out = append(out, strings.TrimSpace(strings.TrimLeft(l, "#")))
		}
	}
	return out
}

// slugs are GitHub's heading anchors: lower case, punctuation dropped (letters, digits, spaces,
// hyphens and underscores kept), spaces turned to hyphens, repeats suffixed -1, -2, ….
func slugs(headings []string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, h := range headings {
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsNumber(r):
				b.WriteRune(r)
			}
		}
		s := b.String()
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

func TestSlugs(t *testing.T) {
	got := slugs([]string{"A live HPA baseline: shadow policies on the same target", "1. Install", "The yardstick (METHOD §7)", "1. Install", "`debi` — what-if?"})
	for _, want := range []string{"a-live-hpa-baseline-shadow-policies-on-the-same-target", "1-install", "the-yardstick-method-7", "1-install-1", "debi--what-if"} {
		if !got[want] {
			t.Errorf("slug %q missing from %v", want, got)
		}
	}
}

// TestGettingStartedLinks: relative links resolve to files and headings; repository paths in
// inline code exist.
func TestGettingStartedLinks(t *testing.T) {
	links, paths := 0, 0
	for _, pg := range docPages {
		p := readPage(t, pg.path, pg.section)
		dir := filepath.Dir(filepath.Join(root, pg.path))
		for _, l := range p.links {
			if strings.Contains(l.text, "://") || strings.HasPrefix(l.text, "mailto:") {
				continue
			}
			links++
			file, anchor, _ := strings.Cut(l.text, "#")
			target := filepath.Join(root, pg.path)
			if file != "" {
				target = filepath.Join(dir, filepath.FromSlash(file))
			}
			st, err := os.Stat(target)
			if err != nil {
				t.Errorf("%s:%d: link %s: %v", l.file, l.line, l.text, err)
				continue
			}
			if anchor == "" {
				continue
			}
			if st.IsDir() || !strings.HasSuffix(target, ".md") {
				t.Errorf("%s:%d: link %s: an anchor into a file that is not Markdown", l.file, l.line, l.text)
				continue
			}
			if !slugs(headingsOf(t, target))[anchor] {
				t.Errorf("%s:%d: link %s: no heading of %s has the anchor #%s", l.file, l.line, l.text, file, anchor)
			}
		}
		// Inline code naming a path of the repository (or a glob of them) must match a file.
		for _, c := range p.code {
			s := strings.TrimSuffix(c.text, "/")
			if !repoPath.MatchString(s) {
				continue
			}
			paths++
			if m, _ := filepath.Glob(filepath.Join(root, filepath.FromSlash(s))); len(m) == 0 {
				t.Errorf("%s:%d: `%s` names no file of the repository", c.file, c.line, c.text)
			}
		}
	}
	t.Logf("%d relative links, %d repository paths in inline code", links, paths)
	if links < 5 {
		t.Errorf("only %d relative links found: is the parser broken?", links)
	}
}

// repoPath matches inline code that is a path under one of the repository's top directories.
var repoPath = regexp.MustCompile(`^(deploy|rules|grafana|docs|cmd|hack|trace|config|exporter|webhook|backtest|forecast|scaling|policy|e2e)/[A-Za-z0-9_.*/-]*$`)

// debiConfigKeys are the top-level keys of a debi configuration file.
var debiConfigKeys = []string{"global", "exporter", "policies", "webhook"}

// elided marks a fragment of a configuration: "# … as in step 3".
var elided = regexp.MustCompile(`#\s*(…|\.\.\.)`)

type yamlKind int

const (
	yamlDebiConfig yamlKind = iota
	yamlHelmValues
	yamlObjects
)

// classifyYAML decides what a yaml block is, or fails.
func classifyYAML(t *testing.T, b docBlock) (yamlKind, []map[string]any) {
	t.Helper()
	var docs []map[string]any
	dec := yaml.NewDecoder(strings.NewReader(b.text))
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("%s:%d: yaml block does not parse: %v", b.file, b.line, err)
		}
		if m != nil {
			docs = append(docs, m)
		}
	}
	if len(docs) == 0 {
		t.Fatalf("%s:%d: empty yaml block", b.file, b.line)
	}
	if _, ok := docs[0]["apiVersion"]; ok {
		for i, d := range docs {
			if d["apiVersion"] == nil || d["kind"] == nil {
				t.Fatalf("%s:%d: document %d of a block of Kubernetes objects lacks apiVersion or kind", b.file, b.line, i)
			}
		}
		return yamlObjects, docs
	}
	if len(docs) > 1 {
		t.Fatalf("%s:%d: several documents that are not Kubernetes objects", b.file, b.line)
	}
	keysIn := func(allowed []string) bool {
		for k := range docs[0] {
			if !slices.Contains(allowed, k) {
				return false
			}
		}
		return true
	}
	if keysIn(debiConfigKeys) {
		return yamlDebiConfig, docs
	}
	if keysIn(helmValueKeys(t)) {
		return yamlHelmValues, docs
	}
	t.Fatalf("%s:%d: a yaml block that is neither a debi configuration (keys %v), Helm values (keys of values.schema.json) nor Kubernetes objects", b.file, b.line, debiConfigKeys)
	return 0, nil
}

// helmValueKeys are the top-level properties of the chart's values.schema.json.
func helmValueKeys(t *testing.T) []string {
	t.Helper()
	s := helmSchema(t)
	var out []string
	for k := range s["properties"].(map[string]any) {
		out = append(out, k)
	}
	return out
}

func helmSchema(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chart, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// checkSchemaPath fails unless the dotted key (of --set, or named in the prose) is a property of values.schema.json,
// or lies under an object whose additionalProperties admit any key (labels, selectors).
func checkSchemaPath(s map[string]any, key string) error {
	node := s
	for i, seg := range strings.Split(key, ".") {
		if props, ok := node["properties"].(map[string]any); ok {
			if n, ok := props[seg].(map[string]any); ok {
				node = n
				continue
			}
		}
		switch ap := node["additionalProperties"].(type) {
		case map[string]any:
			node = ap
			continue
		case bool:
			if ap {
				return nil
			}
		case nil:
			if node["properties"] == nil {
				return nil
			}
		}
		return fmt.Errorf("%s is not a key of values.schema.json", strings.Join(strings.Split(key, ".")[:i+1], "."))
	}
	return nil
}

// mergeConfig lays a fragment over a full configuration: maps deep-merged, policies matched by
// name (a fragment's policy "as in step 3" keeps the full one's fields it does not set).
func mergeConfig(base, frag map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range frag {
		bm, ok1 := out[k].(map[string]any)
		fm, ok2 := v.(map[string]any)
		switch {
		case ok1 && ok2:
			out[k] = mergeConfig(bm, fm)
		case k == "policies":
			bl, _ := out[k].([]any)
			fl, _ := v.([]any)
			var merged []any
			for _, fp := range fl {
				fpm, _ := fp.(map[string]any)
				for _, bp := range bl {
					if bpm, ok := bp.(map[string]any); ok && fpm != nil && bpm["name"] == fpm["name"] {
						fp = mergeConfig(bpm, fpm)
					}
				}
				merged = append(merged, fp)
			}
			out[k] = merged
		default:
			out[k] = v
		}
	}
	return out
}

// checkDebiConfig loads a configuration block (merged over full when it is a fragment) with
// config.Load and config.Check, and returns its bytes.
func checkDebiConfig(t *testing.T, b docBlock, doc map[string]any, full []byte) []byte {
	t.Helper()
	data := []byte(b.text)
	if elided.MatchString(b.text) {
		if full == nil {
			t.Fatalf("%s:%d: a configuration fragment (\"…\") before any full configuration it could complete", b.file, b.line)
		}
		var base map[string]any
		if err := yaml.Unmarshal(full, &base); err != nil {
			t.Fatal(err)
		}
		var err error
		if data, err = yaml.Marshal(mergeConfig(base, doc)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := config.Load(data); err != nil {
		t.Errorf("%s:%d: the configuration does not load: %v\n%s", b.file, b.line, err, data)
	}
	for _, err := range config.Check(data) {
		t.Errorf("%s:%d: debi check config: %v", b.file, b.line, err)
	}
	return data
}

// TestGettingStartedYAML loads every debi configuration of the pages.
func TestGettingStartedYAML(t *testing.T) {
	n := 0
	var full []byte
	for _, pg := range docPages {
		for _, b := range readPage(t, pg.path, pg.section).blocks {
			if b.lang != "yaml" && b.lang != "yml" {
				continue
			}
			n++
			kind, docs := classifyYAML(t, b)
			if kind != yamlDebiConfig {
				continue // checked with helm and a cluster by TestGettingStartedCommands
			}
			data := checkDebiConfig(t, b, docs[0], full)
			if full == nil && !elided.MatchString(b.text) {
				full = data
			}
		}
	}
	t.Logf("%d yaml blocks", n)
	if full == nil {
		t.Error("the page has no full debi configuration (its debi.yml)")
	}
}

// dottedKey is inline code naming a key by its dotted path, optionally with a value:
// `webhook.tls.enabled=true`, `webhook.rbac.clusterWide: true`, `global.http_config`.
var dottedKey = regexp.MustCompile(`^([a-z][A-Za-z_]*(?:\.[A-Za-z_]+)+)(?:(=|: )(.+))?$`)

// TestGettingStartedKeys checks the keys the prose names in inline code: under "With Helm",
// chart values against values.schema.json; elsewhere, paths into the debi configuration (first
// segment global/exporter/policies/webhook) — with a value, merged over the page's debi.yml and
// loaded, without one, every segment a YAML field of package config. Keys of other software
// (kube-prometheus-stack's prometheus.prometheusSpec…) have other first segments and are left
// alone.
func TestGettingStartedKeys(t *testing.T) {
	s := helmSchema(t)
	var tags []string
	files, _ := filepath.Glob(filepath.Join(root, "config", "*.go"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`yaml:"([a-z_]+)`).FindAllStringSubmatch(string(b), -1) {
			tags = append(tags, m[1])
		}
	}
	var full []byte
	helmKeys, configKeys := 0, 0
	for _, pg := range docPages {
		p := readPage(t, pg.path, pg.section)
		for _, b := range p.blocks {
			if full == nil && (b.lang == "yaml" || b.lang == "yml") && !elided.MatchString(b.text) {
				if kind, _ := classifyYAML(t, b); kind == yamlDebiConfig {
					full = []byte(b.text)
				}
			}
		}
		for _, c := range p.code {
			m := dottedKey.FindStringSubmatch(c.text)
			if m == nil {
				continue
			}
			segs := strings.Split(m[1], ".")
			switch {
			case c.heading == "With Helm" && slices.Contains(helmValueKeys(t), segs[0]):
				helmKeys++
				if err := checkSchemaPath(s, m[1]); err != nil {
					t.Errorf("%s:%d: `%s`: %v", c.file, c.line, c.text, err)
				}
			case c.heading != "With Helm" && slices.Contains(debiConfigKeys, segs[0]):
				configKeys++
				if m[2] == "" {
					for _, seg := range segs {
						if !slices.Contains(tags, seg) {
							t.Errorf("%s:%d: `%s`: %s is no field of the debi configuration", c.file, c.line, c.text, seg)
						}
					}
					continue
				}
				if full == nil {
					t.Fatalf("%s:%d: `%s` before any full configuration", c.file, c.line, c.text)
				}
				var v any
				if err := yaml.Unmarshal([]byte(m[3]), &v); err != nil {
					t.Errorf("%s:%d: `%s`: the value does not parse: %v", c.file, c.line, c.text, err)
					continue
				}
				for i := len(segs) - 1; i >= 0; i-- {
					v = map[string]any{segs[i]: v}
				}
				var base map[string]any
				if err := yaml.Unmarshal(full, &base); err != nil {
					t.Fatal(err)
				}
				data, err := yaml.Marshal(mergeConfig(base, v.(map[string]any)))
				if err != nil {
					t.Fatal(err)
				}
				for _, err := range config.Check(data) {
					t.Errorf("%s:%d: `%s` set in the page's debi.yml: %v", c.file, c.line, c.text, err)
				}
			}
		}
	}
	t.Logf("%d chart keys, %d configuration keys in inline code", helmKeys, configKeys)
	if helmKeys < 5 {
		t.Errorf("only %d chart keys found under \"With Helm\": is the parser broken?", helmKeys)
	}
}

// docCommand is one command of a page: its words, the stages piped after it and its comment.
type docCommand struct {
	file, comment string
	line          int
	words         []string
	pipes         [][]string
}

func (c docCommand) where() string { return fmt.Sprintf("%s:%d", c.file, c.line) }

// shellWords splits one logical line into piped stages of words and a trailing comment. It
// knows quotes, backslash escapes, $(…), | and a " > FILE" redirection (the word ">"); any
// other shell construct is an error.
func shellWords(s string) ([][]string, string, error) {
	var stages [][]string
	var words []string
	var w strings.Builder
	inWord := false
	end := func() {
		if inWord {
			words = append(words, w.String())
		}
		w.Reset()
		inWord = false
	}
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case r == ' ' || r == '\t':
			end()
		case r == '#' && !inWord:
			end()
			return append(stages, words), strings.TrimSpace(string(rs[i+1:])), nil
		case r == '|':
			end()
			stages = append(stages, words)
			words = nil
		case r == '\'':
			j := i + 1
			for j < len(rs) && rs[j] != '\'' {
				j++
			}
			if j == len(rs) {
				return nil, "", fmt.Errorf("unterminated '")
			}
			w.WriteString(string(rs[i+1 : j]))
			inWord, i = true, j
		case r == '"':
			j := i + 1
			for ; j < len(rs) && rs[j] != '"'; j++ {
				if rs[j] == '\\' && j+1 < len(rs) {
					j++
				}
			}
			if j == len(rs) {
				return nil, "", fmt.Errorf("unterminated \"")
			}
			w.WriteString(string(rs[i+1 : j]))
			inWord, i = true, j
		case r == '$' && i+1 < len(rs) && rs[i+1] == '(':
			depth, j := 0, i+1
			for ; j < len(rs); j++ {
				if rs[j] == '(' {
					depth++
				} else if rs[j] == ')' {
					if depth--; depth == 0 {
						break
					}
				}
			}
			if j == len(rs) {
				return nil, "", fmt.Errorf("unterminated $(")
			}
			w.WriteString(string(rs[i : j+1]))
			inWord, i = true, j
		case r == '\\' && i+1 < len(rs):
			w.WriteRune(rs[i+1])
			inWord, i = true, i+1
		case r == '>' && !inWord && (i+1 == len(rs) || rs[i+1] == ' '):
			// A redirection of stdout to a file: the word ">", its target the next (run says which
			// commands may).
			words = append(words, ">")
		case strings.ContainsRune(";&<>`$(){}*?", r):
			return nil, "", fmt.Errorf("shell construct %q the test does not know", r)
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	end()
	return append(stages, words), "", nil
}

func TestShellWords(t *testing.T) {
	st, c, err := shellWords(`kubectl -n x create secret generic t --from-literal=token="$(openssl rand -hex 32)" | grep 'a b' # or: that`)
	if err != nil || c != "or: that" || len(st) != 2 || st[0][7] != "--from-literal=token=$(openssl rand -hex 32)" || st[1][1] != "a b" {
		t.Errorf("shellWords: %q %q %v", st, c, err)
	}
	// A redirection is the word ">" (run refuses it but after debi demo openmetrics); a ">"
	// inside a word, or one with no space after it, is still a construct the test does not know.
	if st, _, err := shellWords("debi demo openmetrics > demo.om"); err != nil || !slices.Equal(st[0], []string{"debi", "demo", "openmetrics", ">", "demo.om"}) {
		t.Errorf("shellWords of a redirection: %q %v", st, err)
	}
	for _, bad := range []string{"a; b", "a && b", "a >f", "a>f", "a 2> f", "echo $HOME", "a `b`"} {
		if _, _, err := shellWords(bad); err == nil {
			t.Errorf("shellWords(%q) accepted", bad)
		}
	}
}

// commandsOf extracts the commands of a fenced shell block; console blocks have theirs after
// "$ ", the rest being output.
func commandsOf(t *testing.T, b docBlock) []docCommand {
	t.Helper()
	var out []docCommand
	lines := strings.Split(strings.TrimRight(b.text, "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		n := b.line + i
		l := lines[i]
		if b.lang == "console" {
			if !strings.HasPrefix(l, "$ ") {
				continue
			}
			l = strings.TrimPrefix(l, "$ ")
		}
		for strings.HasSuffix(l, "\\") && i+1 < len(lines) {
			i++
			l = strings.TrimSuffix(l, "\\") + " " + strings.TrimPrefix(lines[i], "> ")
		}
		if strings.TrimSpace(l) == "" || strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue
		}
		st, comment, err := shellWords(l)
		if err != nil {
			t.Fatalf("%s:%d: %v in %q", b.file, n, err, l)
		}
		out = append(out, docCommand{file: b.file, line: n, words: st[0], pipes: st[1:], comment: comment})
	}
	return out
}

// inlineCommand: inline code that starts like a command is one when it has arguments (for make,
// a target): a bare `helm template` in prose names the command, it does not run it.
var inlineCommand = regexp.MustCompile(`^((kubectl|helm|debi|go run) \S+ \S+|make [a-z]\S*)`)

// docEnv is what the commands of the page act on, in page order.
type docEnv struct {
	t          *testing.T
	ctx        context.Context
	debi       string            // the built binary
	work       string            // the reader's working directory: the files the page has them write
	userFiles  map[string][]byte // files the page has the reader write: debi.yml, my-values.yaml
	kube       *cluster          // kubectl's cluster
	kubeObjs   []*unstructured.Unstructured
	helmC      *cluster // helm's cluster (the two ways of step 1 are alternatives)
	helmConfig string   // its kubeconfig
	kubeconfs  map[string]bool
	crds       string
	counts     map[string]int
	// written are the files the page's commands wrote into work (debi demo openmetrics >
	// demo.om); blocks the directories promtool wrote blocks into, for the Prometheus that
	// reads them.
	written, blocks map[string]bool
}

// startDocCluster starts a kube-apiserver with startCluster, installs the Prometheus
// Operator's CRDs (the page's prerequisite) and returns it with its kubeconfig, found beside
// the test's temporary directories (startCluster keeps its state in one).
func (e *docEnv) startDocCluster() (*cluster, string) {
	t := e.t
	marker := t.TempDir()
	c := startCluster(t)
	confs, _ := filepath.Glob(filepath.Join(filepath.Dir(marker), "*", "kubeconfig"))
	kc := ""
	for _, f := range confs {
		if !e.kubeconfs[f] {
			kc = f
			e.kubeconfs[f] = true
		}
	}
	if kc == "" {
		t.Fatal("startCluster's kubeconfig not found beside the test's temporary directories")
	}
	if e.crds == "" {
		e.crds = crdDir(t)
	}
	c.installCRDs(e.ctx, t, e.crds)
	// The page's premise: the workload shop/web's namespace exists.
	e.applyTo(c, nsObject("shop"), "", false)
	return c, kc
}

func nsObject(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}}}
}

func (e *docEnv) applyTo(c *cluster, o *unstructured.Unstructured, ns string, dryRun bool) error {
	err := c.apply(e.ctx, o, ns, dryRun)
	if err != nil && !dryRun {
		// A kind just installed may lag behind in the mapper's cached discovery.
		c.mapper.Reset()
		err = c.apply(e.ctx, o, ns, dryRun)
	}
	return err
}

func (e *docEnv) kubectlCluster() *cluster {
	if e.kube == nil {
		e.kube, _ = e.startDocCluster()
	}
	return e.kube
}

// file resolves a file a command names: one the page has the reader write, or one of the
// repository (relative to the clone's root, where the page's commands run).
func (e *docEnv) file(c docCommand, name string) (string, bool) {
	if b, ok := e.userFiles[name]; ok {
		p := filepath.Join(e.work, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			e.t.Fatal(err)
		}
		return p, true
	}
	p := filepath.Join(root, filepath.FromSlash(name))
	if _, err := os.Stat(p); err != nil {
		e.t.Errorf("%s: %s: neither a file of the repository nor one the page has the reader write (%v)", c.where(), name, err)
		return "", false
	}
	abs, _ := filepath.Abs(p)
	return abs, true
}

// substitute replaces the known command substitutions of a word; any other $(…) fails.
func (e *docEnv) substitute(c docCommand, w string) string {
	for {
		i := strings.Index(w, "$(")
		if i < 0 {
			return w
		}
		j := strings.Index(w[i:], ")") + i
		sub := w[i : j+1]
		done := false
		for re, f := range docSubstitutions {
			if m := re.FindStringSubmatch(sub); m != nil {
				w, done = w[:i]+f(m)+w[j+1:], true
			}
		}
		if !done {
			e.t.Errorf("%s: command substitution %s the test does not know", c.where(), sub)
			return w
		}
	}
}

func (e *docEnv) run(c docCommand) {
	w := c.words
	if len(w) >= 3 && w[0] == "go" && w[1] == "run" && w[2] == "./cmd/debi" {
		w = append([]string{"debi"}, w[3:]...)
	}
	for i := range w {
		w[i] = e.substitute(c, w[i])
	}
	if len(w) == 0 {
		e.t.Errorf("%s: empty command", c.where())
		return
	}
	if slices.Contains(w, ">") && w[0] != "debi" {
		e.t.Errorf("%s: a redirection after %s: the test knows only `debi demo openmetrics > FILE`", c.where(), w[0])
		return
	}
	if len(c.pipes) > 0 && w[0] != "kubectl" {
		e.t.Errorf("%s: a pipe after %s: the test knows only `kubectl logs … | grep`", c.where(), w[0])
		return
	}
	switch w[0] {
	case "kubectl":
		e.kubectl(c, w[1:])
	case "helm":
		e.helm(c, w[1:])
	case "debi":
		e.debiCmd(c, w[1:])
	case "make":
		e.make(c, w[1:])
	case "kind", "crane":
		e.imageCmd(c, w)
	case "promtool":
		e.promtool(c, w[1:])
	case "prometheus":
		e.prometheus(c, w[1:])
	case "go":
		e.goCmd(c, w[1:])
	default:
		e.t.Errorf("%s: command %q the test does not know: verify it here or allowlist it", c.where(), strings.Join(w, " "))
	}
}

// imageCmd checks the commands that move a locally built image onto a cluster against what
// `make image` writes (hack/image's default tarball and layout), and a pushed tag against the
// one scheme (the chart's appVersion).
func (e *docEnv) imageCmd(c docCommand, w []string) {
	e.counts[w[0]]++
	main, err := os.ReadFile(filepath.Join(root, "hack/image/main.go"))
	if err != nil {
		e.t.Fatal(err)
	}
	writes := func(path string) bool { return strings.Contains(string(main), `"../../`+path+`"`) }
	switch {
	case w[0] == "kind" && len(w) >= 4 && w[1] == "load" && w[2] == "image-archive":
		if !writes(w[3]) {
			e.t.Errorf("%s: kind load image-archive %s: make image writes no such tarball", c.where(), w[3])
		}
	case w[0] == "crane" && len(w) == 4 && w[1] == "push":
		if !writes(w[2]) {
			e.t.Errorf("%s: crane push %s: make image writes no such layout", c.where(), w[2])
		}
		if _, tag, _ := strings.Cut(w[3][strings.LastIndex(w[3], "/")+1:], ":"); tag != chartAppVersion(e.t) {
			e.t.Errorf("%s: crane push %s: the tag is not the chart's appVersion", c.where(), w[3])
		}
	default:
		e.t.Errorf("%s: %s: only kind load image-archive and crane push are known", c.where(), strings.Join(w, " "))
	}
}

// docGoTools are the commands of other modules a page has the reader go install, with why.
var docGoTools = map[string]string{
	// crane pushes the OCI layout `make image` writes (hack/image) to a registry, without Docker.
	"github.com/google/go-containerregistry/cmd/crane": "pushes bin/image",
}

// goCmd checks go install and go test as far as the repository goes, without running them:
// go install of this module names a main package of the clone (the module path from go.mod)
// at @latest, or a tool of docGoTools; go test names packages of the clone.
func (e *docEnv) goCmd(c docCommand, args []string) {
	e.counts["go"]++
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		e.t.Fatal(err)
	}
	module := regexp.MustCompile(`(?m)^module (\S+)$`).FindSubmatch(gomod)
	if module == nil {
		e.t.Fatal("go.mod names no module")
	}
	switch {
	case len(args) == 2 && args[0] == "install":
		pkg, v, ok := strings.Cut(args[1], "@")
		if !ok || v != "latest" {
			e.t.Errorf("%s: go install %s: want <package>@latest", c.where(), args[1])
			return
		}
		if _, ok := docGoTools[pkg]; ok {
			return
		}
		dir, ok := strings.CutPrefix(pkg, string(module[1])+"/")
		if !ok {
			e.t.Errorf("%s: go install %s: neither a package of %s nor a tool of docGoTools", c.where(), pkg, module[1])
			return
		}
		files, _ := filepath.Glob(filepath.Join(root, filepath.FromSlash(dir), "*.go"))
		for _, f := range files {
			if b, err := os.ReadFile(f); err == nil && regexp.MustCompile(`(?m)^package main$`).Match(b) {
				return
			}
		}
		e.t.Errorf("%s: go install %s: %s is no main package of the clone", c.where(), pkg, dir)
	case len(args) >= 2 && args[0] == "test":
		for _, a := range args[1:] {
			if strings.HasPrefix(a, "-") {
				e.t.Errorf("%s: go test flag %s the test does not know", c.where(), a)
				continue
			}
			dir := strings.TrimSuffix(strings.TrimSuffix(a, "..."), "/")
			if st, err := os.Stat(filepath.Join(root, filepath.FromSlash(dir))); !strings.HasPrefix(a, "./") || err != nil || !st.IsDir() {
				e.t.Errorf("%s: go test %s: not a package pattern of the clone", c.where(), a)
			}
		}
	default:
		e.t.Errorf("%s: go %s: only go run ./cmd/debi, go install and go test are known", c.where(), strings.Join(args, " "))
	}
}

// promtool checks the backfill recipe's commands (exporter.TestBackfillRecipe runs them on a real
// Prometheus): create-blocks-from rules with its flags, over the repository's rule file; and the
// laptop demo's create-blocks-from openmetrics (cmd/debi's TestDemoWhatIf runs it) of a file an
// earlier command of the page wrote into a directory.
func (e *docEnv) promtool(c docCommand, args []string) {
	e.counts["promtool"]++
	if len(args) >= 3 && args[0] == "tsdb" && args[1] == "create-blocks-from" && args[2] == "openmetrics" {
		if len(args) != 5 || strings.HasPrefix(args[3], "-") || strings.HasPrefix(args[4], "-") {
			e.t.Errorf("%s: promtool %s: want tsdb create-blocks-from openmetrics FILE DIR", c.where(), strings.Join(args, " "))
			return
		}
		if !e.written[args[3]] {
			e.t.Errorf("%s: promtool reads %s, which no command of the page wrote before", c.where(), args[3])
		}
		if e.blocks == nil {
			e.blocks = map[string]bool{}
		}
		e.blocks[args[4]] = true
		return
	}
	if len(args) < 3 || args[0] != "tsdb" || args[1] != "create-blocks-from" || args[2] != "rules" {
		e.t.Errorf("%s: promtool %s: only tsdb create-blocks-from rules and openmetrics are known", c.where(), strings.Join(args, " "))
		return
	}
	var files []string
	for i := 3; i < len(args); i++ {
		switch a := args[i]; a {
		case "--start", "--end", "--url", "--output-dir", "--eval-interval":
			i++
			if a == "--start" || a == "--end" {
				if i >= len(args) {
					e.t.Errorf("%s: %s without a value", c.where(), a)
				} else if _, err := time.Parse(time.RFC3339, args[i]); err != nil {
					e.t.Errorf("%s: %s %s: %v", c.where(), a, args[i], err)
				}
			}
		default:
			if strings.HasPrefix(a, "-") {
				e.t.Errorf("%s: promtool flag %s the test does not know", c.where(), a)
				continue
			}
			files = append(files, a)
		}
	}
	if len(files) == 0 {
		e.t.Errorf("%s: no rule file", c.where())
	}
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			e.t.Errorf("%s: rule file %s: %v", c.where(), f, err)
		}
	}
}

// prometheus checks the laptop demo's Prometheus (cmd/debi's TestDemoWhatIf runs it): its flags
// are known ones, its data directory is one promtool wrote blocks into. It is not run: it serves
// in the foreground until stopped.
func (e *docEnv) prometheus(c docCommand, args []string) {
	e.counts["prometheus"]++
	data := ""
	for i := 0; i < len(args); i++ {
		name, value, ok := strings.Cut(args[i], "=")
		switch name {
		case "--storage.tsdb.path", "--config.file", "--storage.tsdb.retention.time", "--web.listen-address":
		default:
			e.t.Errorf("%s: prometheus argument %s the test does not know", c.where(), args[i])
			continue
		}
		if !ok && i+1 < len(args) {
			i++
			value = args[i]
		}
		if name == "--storage.tsdb.path" {
			data = value
		}
	}
	if !e.blocks[data] {
		e.t.Errorf("%s: prometheus --storage.tsdb.path=%s: no promtool command of the page wrote blocks there", c.where(), data)
	}
}

func (e *docEnv) make(c docCommand, args []string) {
	e.counts["make"]++
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		e.t.Fatal(err)
	}
	if len(args) == 0 {
		e.t.Errorf("%s: make without a target", c.where())
	}
	for _, a := range args {
		if strings.HasPrefix(a, "-") || strings.Contains(a, "=") {
			if strings.Contains(a, "=") && !strings.HasPrefix(a, "-") {
				continue // a variable: N=1000
			}
			e.t.Errorf("%s: make flag %s the test does not know", c.where(), a)
			continue
		}
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(a) + `:`).Match(mk) {
			e.t.Errorf("%s: make %s: no such target in the Makefile", c.where(), a)
		}
	}
}

// kubectl runs the kubectl commands the page has: create namespace, create secret generic,
// apply --server-side -k/-f; allowlisted ones are checked as far as the repository goes.
func (e *docEnv) kubectl(c docCommand, args []string) {
	t := e.t
	ns := ""
	var rest []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case (a == "-n" || a == "--namespace") && i+1 < len(args):
			ns, i = args[i+1], i+1
		case strings.HasPrefix(a, "--namespace="):
			ns = strings.TrimPrefix(a, "--namespace=")
		default:
			rest = append(rest, a)
		}
	}
	if len(rest) == 0 {
		t.Errorf("%s: kubectl without a verb", c.where())
		return
	}
	verb := rest[0]
	if reason, ok := docAllowlist["kubectl "+verb]; ok {
		e.counts["allowlisted"]++
		t.Logf("%s: kubectl %s not run (%s); checking what it names", c.where(), verb, reason)
		e.kubectlAllowlisted(c, ns, rest)
		return
	}
	if len(c.pipes) > 0 {
		t.Errorf("%s: a pipe after kubectl %s", c.where(), verb)
	}
	e.counts["kubectl"]++
	k := e.kubectlCluster()
	switch {
	case verb == "create" && len(rest) == 3 && rest[1] == "namespace":
		if err := e.applyTo(k, nsObject(rest[2]), "", false); err != nil {
			t.Errorf("%s: %v", c.where(), err)
		}
	case verb == "create" && len(rest) >= 4 && rest[1] == "secret" && rest[2] == "generic":
		data := map[string]any{}
		for _, f := range rest[4:] {
			kv, ok := strings.CutPrefix(f, "--from-literal=")
			key, val, ok2 := strings.Cut(kv, "=")
			if !ok || !ok2 {
				t.Errorf("%s: kubectl create secret generic: flag %s the test does not know", c.where(), f)
				return
			}
			data[key] = base64.StdEncoding.EncodeToString([]byte(val))
		}
		if ns == "" {
			t.Errorf("%s: the Secret is created in no namespace (-n)", c.where())
		}
		s := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
			"metadata": map[string]any{"name": rest[3], "namespace": ns}, "data": data}}
		if err := e.applyTo(k, s, ns, false); err != nil {
			t.Errorf("%s: %v", c.where(), err)
		}
	case verb == "apply":
		serverSide := false
		var objs []*unstructured.Unstructured
		for i := 1; i < len(rest); i++ {
			switch a := rest[i]; {
			case a == "--server-side":
				serverSide = true
			case (a == "-k" || a == "--kustomize") && i+1 < len(rest):
				dir, ok := e.file(c, rest[i+1])
				if ok {
					objs = append(objs, renderKustomize(t, dir)...)
				}
				i++
			case (a == "-f" || a == "--filename") && i+1 < len(rest):
				if f, ok := e.file(c, rest[i+1]); ok {
					b, err := os.ReadFile(f)
					if err != nil {
						t.Fatal(err)
					}
					objs = append(objs, decodeObjects(t, b)...)
				}
				i++
			default:
				t.Errorf("%s: kubectl apply: argument %s the test does not know", c.where(), a)
			}
		}
		if !serverSide {
			t.Errorf("%s: kubectl apply without --server-side: the dashboard ConfigMaps exceed client-side apply's last-applied annotation", c.where())
		}
		if len(objs) == 0 {
			t.Errorf("%s: kubectl apply of nothing", c.where())
		}
		for _, o := range objs {
			if err := e.applyTo(k, o, ns, false); err != nil {
				t.Errorf("%s: %s %s/%s: %v", c.where(), o.GetKind(), o.GetNamespace(), o.GetName(), err)
			}
		}
		e.kubeObjs = append(e.kubeObjs, objs...)
		e.checkSecretsExist(c, objs)
	default:
		t.Errorf("%s: kubectl %s: a form the test does not know: verify it here or allowlist it", c.where(), strings.Join(rest, " "))
	}
}

// checkSecretsExist: every Secret a Deployment just applied mounts exists in the cluster with
// the keys it projects — the page creates the token Secret before the install.
func (e *docEnv) checkSecretsExist(c docCommand, objs []*unstructured.Unstructured) {
	secrets := e.kube.dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "secrets"})
	for _, d := range findAll(objs, "Deployment") {
		vols, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "volumes")
		for _, v := range vols {
			name, ok, _ := unstructured.NestedString(v.(map[string]any), "secret", "secretName")
			if !ok {
				continue
			}
			if opt, _, _ := unstructured.NestedBool(v.(map[string]any), "secret", "optional"); opt {
				continue
			}
			s, err := secrets.Namespace(d.GetNamespace()).Get(e.ctx, name, metav1.GetOptions{})
			if err != nil {
				e.t.Errorf("%s: Deployment %s mounts Secret %s, which the page has not created: %v", c.where(), d.GetName(), name, err)
				continue
			}
			items, _, _ := unstructured.NestedSlice(v.(map[string]any), "secret", "items")
			for _, it := range items {
				key := it.(map[string]any)["key"].(string)
				if _, ok, _ := unstructured.NestedString(s.Object, "data", key); !ok {
					e.t.Errorf("%s: Deployment %s wants key %q of Secret %s; the page creates %v", c.where(), d.GetName(), key, name, s.Object["data"])
				}
			}
		}
	}
}

// kubectlAllowlisted checks what an allowlisted command names: its namespace, and the
// deploy/NAME or svc/NAME (with its port) it reads, among the objects the page installed; a
// grep after `kubectl logs` must look for a message debi logs.
func (e *docEnv) kubectlAllowlisted(c docCommand, ns string, rest []string) {
	t := e.t
	objs := e.kubeObjs
	if len(objs) == 0 {
		t.Errorf("%s: kubectl %s before anything was installed", c.where(), rest[0])
		return
	}
	if ns != "" && find(objs, "Namespace", ns) == nil {
		found := false
		for _, o := range objs {
			found = found || o.GetNamespace() == ns
		}
		if !found {
			t.Errorf("%s: namespace %s: nothing of the page is installed there", c.where(), ns)
		}
	}
	kinds := map[string]string{"deploy": "Deployment", "deployment": "Deployment", "svc": "Service", "service": "Service"}
	var svc *unstructured.Unstructured
	for _, a := range rest[1:] {
		typ, name, ok := strings.Cut(a, "/")
		if !ok || strings.HasPrefix(a, "-") {
			continue
		}
		kind, known := kinds[typ]
		if !known {
			t.Errorf("%s: %s: a resource type the test does not know", c.where(), a)
			continue
		}
		var o *unstructured.Unstructured
		for _, x := range findAll(objs, kind) {
			if x.GetName() == name && (ns == "" || x.GetNamespace() == ns) {
				o = x
			}
		}
		if o == nil {
			t.Errorf("%s: %s: no %s %s in namespace %s among what the page installed", c.where(), a, kind, name, ns)
		}
		if kind == "Service" {
			svc = o
		}
	}
	if rest[0] == "port-forward" && svc != nil {
		port := rest[len(rest)-1]
		ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
		ok := false
		for _, p := range ports {
			ok = ok || fmt.Sprint(p.(map[string]any)["port"]) == strings.Split(port, ":")[len(strings.Split(port, ":"))-1]
		}
		if !ok {
			t.Errorf("%s: Service %s has no port %s: %v", c.where(), svc.GetName(), port, ports)
		}
	}
	for _, p := range c.pipes {
		if len(p) != 2 || p[0] != "grep" || rest[0] != "logs" {
			t.Errorf("%s: pipe %v: the test knows only `kubectl logs … | grep MESSAGE`", c.where(), p)
			continue
		}
		if !sourceLogs(t, p[1]) {
			t.Errorf("%s: grep %q: no debi source logs that message", c.where(), p[1])
		}
	}
}

// sourceLogs reports whether a non-test Go file of the webhook or the exporter contains msg as
// a string literal.
func sourceLogs(t *testing.T, msg string) bool {
	t.Helper()
	for _, dir := range []string{"webhook", "exporter"} {
		files, _ := filepath.Glob(filepath.Join(root, dir, "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err == nil && bytes.Contains(b, []byte(strconv.Quote(msg))) {
				return true
			}
		}
	}
	return false
}

// helm runs helm install|upgrade: the chart, every -f values file and every --set key must
// exist; helm template must render it (values.schema.json); helm install --dry-run=server on a
// cluster of its own must accept it, and its manifest must pass a server-side dry run. A
// trailing "# or -f FILE" is a second install with that values file instead.
func (e *docEnv) helm(c docCommand, args []string) {
	t := e.t
	if len(args) == 0 || (args[0] != "install" && args[0] != "upgrade") {
		t.Errorf("%s: helm %s: a form the test does not know", c.where(), strings.Join(args, " "))
		return
	}
	variants := [][]string{args}
	if alt, ok := strings.CutPrefix(c.comment, "or "); ok {
		altWords, _, err := shellWords(alt)
		if err != nil || len(altWords) != 1 || len(altWords[0]) != 2 || altWords[0][0] != "-f" {
			t.Errorf("%s: comment %q: the test knows only \"# or -f FILE\" after helm", c.where(), c.comment)
		} else {
			v := slices.Clone(args)
			for i := len(v) - 2; i >= 0; i-- {
				if v[i] == "-f" || v[i] == "--values" {
					v[i+1] = altWords[0][1]
					break
				}
			}
			variants = append(variants, v)
		}
	}
	bin := helmBin(t)
	if e.helmC == nil {
		e.helmC, e.helmConfig = e.startDocCluster()
	}
	for _, v := range variants {
		e.counts["helm"]++
		e.helmInstall(c, bin, v)
	}
}

func (e *docEnv) helmInstall(c docCommand, bin string, args []string) {
	t := e.t
	var pos, flags []string
	ns, createNS := "default", false
	sets := map[string]string{}
	for i := 1; i < len(args); i++ {
		a := args[i]
		next := func() string {
			if i+1 >= len(args) {
				t.Errorf("%s: %s without a value", c.where(), a)
				return ""
			}
			i++
			return args[i]
		}
		switch {
		case a == "--namespace" || a == "-n":
			ns = next()
			flags = append(flags, "--namespace", ns)
		case a == "--create-namespace":
			createNS = true
		case a == "--set" || a == "--set-string":
			kv := next()
			k, val, _ := strings.Cut(kv, "=")
			sets[k] = val
			if err := checkSchemaPath(helmSchema(t), k); err != nil {
				t.Errorf("%s: --set %s: %v", c.where(), k, err)
			}
			flags = append(flags, a, kv)
		case a == "-f" || a == "--values":
			if f, ok := e.file(c, next()); ok {
				flags = append(flags, "--values", f)
			}
		case strings.HasPrefix(a, "-"):
			t.Errorf("%s: helm flag %s the test does not know", c.where(), a)
		default:
			pos = append(pos, a)
		}
	}
	if args[0] == "upgrade" {
		t.Errorf("%s: helm upgrade: only install is verified (add --install support here)", c.where())
		return
	}
	if len(pos) != 2 {
		t.Errorf("%s: helm install wants RELEASE CHART, got %v", c.where(), pos)
		return
	}
	release := pos[0]
	chartDir, ok := e.file(c, pos[1])
	if !ok {
		return
	}
	if _, err := os.Stat(filepath.Join(chartDir, "Chart.yaml")); err != nil {
		t.Errorf("%s: %s is not a chart: %v", c.where(), pos[1], err)
		return
	}
	// helm template: the values schema, offline, with the Operator's APIs as on the cluster.
	tmpl := append(append([]string{"template", release, chartDir}, flags...), operatorAPIs...)
	if out, err := helmErr(bin, tmpl...); err != nil {
		t.Errorf("%s: helm %s: %v\n%s", c.where(), strings.Join(tmpl, " "), err, out)
		return
	}
	// helm install --dry-run=server on a cluster that serves monitoring.coreos.com: the chart's
	// "auto" must see it and render the Operator objects.
	if createNS {
		if err := e.applyTo(e.helmC, nsObject(ns), "", false); err != nil {
			t.Fatal(err)
		}
	}
	inst := append(append([]string{"install", release, chartDir}, flags...), "--dry-run=server", "--output", "json", "--kubeconfig", e.helmConfig)
	out := helm(t, bin, inst...)
	var rel struct{ Manifest string }
	if err := json.Unmarshal(out, &rel); err != nil {
		t.Fatalf("%s: helm install --output json: %v\n%s", c.where(), err, out)
	}
	objs := decodeObjects(t, []byte(rel.Manifest))
	for _, k := range operatorKinds {
		if find(objs, k, "") == nil {
			t.Errorf("%s: helm install rendered no %s, yet the cluster serves its CRD (the chart's auto)", c.where(), k)
		}
	}
	for k, v := range sets {
		if kind, label, ok := strings.Cut(k, ".labels."); ok {
			want := map[string]string{"serviceMonitor": "ServiceMonitor", "prometheusRule": "PrometheusRule"}[kind]
			for _, o := range findAll(objs, want) {
				if o.GetLabels()[label] != v {
					t.Errorf("%s: --set %s=%s: %s %s lacks the label", c.where(), k, v, want, o.GetName())
				}
			}
		}
	}
	for _, o := range objs {
		if err := e.applyTo(e.helmC, o, ns, true); err != nil {
			t.Errorf("%s: helm install's %s %s: server-side dry run: %v", c.where(), o.GetKind(), o.GetName(), err)
		}
	}
	checkConfig(t, objs, ns, config.ModeShadow)
}

// debiCmd runs the debi CLI: check config for real; backtest on the embedded traces for real;
// the what-if backtest against an unreachable Prometheus, which must fail on connecting (so
// every flag parsed and the configuration and policy were found); demo openmetrics > FILE for
// real, into the work directory; anything else with --help appended, which parses every flag
// before it.
func (e *docEnv) debiCmd(c docCommand, args []string) {
	t := e.t
	e.counts["debi"]++
	args = slices.Clone(args)
	what := "help"
	redirect := ""
	if i := slices.Index(args, ">"); i >= 0 {
		if len(args) < 2 || args[0] != "demo" || args[1] != "openmetrics" || i != len(args)-2 {
			t.Errorf("%s: debi %s: only debi demo openmetrics … > FILE is known to write a file", c.where(), strings.Join(args, " "))
			return
		}
		redirect, args, what = args[i+1], args[:i], "run"
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--config.file" && i+1 < len(args):
			if f, ok := e.file(c, args[i+1]); ok {
				args[i+1] = f
			}
			i++
		case a == "--prometheus.url" && i+1 < len(args):
			args[i+1] = "http://127.0.0.1:1" // nothing listens there
			what = "unreachable"
			i++
		case a == "--plots" && i+1 < len(args):
			args[i+1] = filepath.Join(e.work, "plots")
			i++
		}
	}
	switch {
	case len(args) >= 3 && args[0] == "check" && args[1] == "config":
		what = "run"
		for i, f := range args[2:] {
			if strings.HasPrefix(f, "-") {
				continue
			}
			if p, ok := e.file(c, f); ok {
				args[2+i] = p
			}
		}
	case len(args) == 1 && args[0] == "backtest":
		what = "run"
	}
	if what == "help" {
		args = append(args, "--help")
	}
	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.debi, args...)
	cmd.Dir = e.work
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if redirect != "" {
		f, err := os.Create(filepath.Join(e.work, redirect))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cmd.Stdout = f
		if e.written == nil {
			e.written = map[string]bool{}
		}
		e.written[redirect] = true
	}
	start := time.Now()
	err := cmd.Run()
	t.Logf("%s: debi %s: %v in %v", c.where(), strings.Join(args, " "), err, time.Since(start).Round(time.Millisecond))
	switch what {
	case "unreachable":
		t.Logf("%s: as expected, it fails on connecting: %s", c.where(), strings.TrimSpace(stderr.String()))
		if err == nil || !strings.Contains(stderr.String()+stdout.String(), "connection refused") {
			t.Errorf("%s: debi %s against an unreachable Prometheus: %v, want an error about connecting\n%s%s", c.where(), strings.Join(args, " "), err, stdout.String(), stderr.String())
		}
	default:
		if err != nil {
			t.Errorf("%s: debi %s: %v\n%s%s", c.where(), strings.Join(args, " "), err, stdout.String(), stderr.String())
		}
	}
}

// TestGettingStartedCommands runs the pages' commands, and applies their Kubernetes objects and
// Helm values, in page order.
func TestGettingStartedCommands(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	e := &docEnv{t: t, ctx: ctx, work: t.TempDir(), kubeconfs: map[string]bool{}, counts: map[string]int{}}
	integrationEnv(t, "DEBI_K8S_ASSETS", "kube-apiserver and etcd built by hack/k8s-env.sh build")
	helmBin(t)

	// The files the page has the reader write: debi.yml is its first full configuration
	// (step 3), my-values.yaml the same under config: ("with Helm, put the same YAML under
	// config: in your values").
	var pages []docPage
	for _, pg := range docPages {
		pages = append(pages, readPage(t, pg.path, pg.section))
	}
	e.userFiles = map[string][]byte{}
	for _, p := range pages {
		for _, b := range p.blocks {
			if (b.lang == "yaml" || b.lang == "yml") && e.userFiles["debi.yml"] == nil && !elided.MatchString(b.text) {
				if kind, _ := classifyYAML(t, b); kind == yamlDebiConfig {
					e.userFiles["debi.yml"] = []byte(b.text)
				}
			}
		}
	}
	if e.userFiles["debi.yml"] == nil {
		t.Fatal("the page has no full debi configuration (its debi.yml)")
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(e.userFiles["debi.yml"], &cfg); err != nil {
		t.Fatal(err)
	}
	vals, err := yaml.Marshal(map[string]any{"config": cfg})
	if err != nil {
		t.Fatal(err)
	}
	e.userFiles["my-values.yaml"] = vals

	out := filepath.Join(t.TempDir(), "debi")
	build := exec.Command("go", "build", "-o", out, "./cmd/debi")
	build.Dir = root
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/debi: %v\n%s", err, b)
	}
	e.debi = out

	for _, p := range pages {
		// Blocks and inline commands in line order.
		type item struct {
			line  int
			block *docBlock
			span  *docSpan
		}
		var items []item
		for i := range p.blocks {
			items = append(items, item{line: p.blocks[i].line, block: &p.blocks[i]})
		}
		for i := range p.code {
			if inlineCommand.MatchString(p.code[i].text) {
				items = append(items, item{line: p.code[i].line, span: &p.code[i]})
			}
		}
		slices.SortStableFunc(items, func(a, b item) int { return a.line - b.line })
		for _, it := range items {
			if it.span != nil {
				st, comment, err := shellWords(it.span.text)
				if err != nil {
					t.Errorf("%s:%d: %v in `%s`", p.file, it.line, err, it.span.text)
					continue
				}
				e.run(docCommand{file: p.file, line: it.line, words: st[0], pipes: st[1:], comment: comment})
				continue
			}
			b := *it.block
			switch b.lang {
			case "sh", "bash", "shell", "console":
				cmds := commandsOf(t, b)
				if len(cmds) == 0 {
					t.Errorf("%s:%d: a %s block without a command", b.file, b.line, b.lang)
				}
				for _, c := range cmds {
					e.run(c)
				}
			case "yaml", "yml":
				e.counts["yaml"]++
				e.yamlBlock(b)
			case "", "text":
				// A diagram, or a command's output. It must not hide a command from this test.
				for i, l := range strings.Split(b.text, "\n") {
					if regexp.MustCompile(`^\s*(\$ |kubectl |helm |debi |go run |make )`).MatchString(l) {
						t.Errorf("%s:%d: a command in an untagged block: tag it sh", b.file, b.line+i)
					}
				}
			default:
				t.Errorf("%s:%d: fenced block of language %q the test does not know", b.file, b.line, b.lang)
			}
		}
	}
	t.Logf("verified: %v", e.counts)
	if e.counts["kubectl"] < 4 || e.counts["helm"] < 1 || e.counts["debi"] < 2 {
		t.Errorf("too few commands verified (%v): is the parser broken?", e.counts)
	}
}

// yamlBlock checks a yaml block with what it needs: Helm values through helm template (the
// values schema), Kubernetes objects through a server-side dry run after what the page
// installed. Configurations are TestGettingStartedYAML's.
func (e *docEnv) yamlBlock(b docBlock) {
	t := e.t
	kind, docs := classifyYAML(t, b)
	switch kind {
	case yamlHelmValues:
		f := filepath.Join(e.work, fmt.Sprintf("values-%d.yaml", b.line))
		if err := os.WriteFile(f, []byte(b.text), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := helmErr(helmBin(t), append([]string{"template", "debi", chart, "--values", f}, operatorAPIs...)...); err != nil {
			t.Errorf("%s:%d: the Helm values do not render: %v\n%s", b.file, b.line, err, out)
		}
	case yamlObjects:
		if e.kube == nil {
			t.Errorf("%s:%d: Kubernetes objects before the page installed anything", b.file, b.line)
			return
		}
		for _, d := range docs {
			o := &unstructured.Unstructured{Object: normalize(t, d).(map[string]any)}
			if err := e.applyTo(e.kube, o, "debi-system", true); err != nil {
				t.Errorf("%s:%d: %s %s: %v", b.file, b.line, o.GetKind(), o.GetName(), err)
			}
		}
	}
}
