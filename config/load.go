package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Warnings are the settings that were invalid and replaced by their defaults while loading.
func (c *Config) Warnings() []string { return c.warnings }

// LoadFile reads and validates a configuration file.
func LoadFile(name string) (*Config, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	return LoadFileContent(name, b)
}

// LoadFileContent validates b, the content of the configuration file name (as LoadFile, for a
// file already read).
func LoadFileContent(name string, b []byte) (*Config, error) {
	c, err := Load(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	// As Prometheus does: files named in the file are relative to its directory.
	c.Global.HTTPConfig.SetDirectory(filepath.Dir(name))
	c.dir = filepath.Dir(name)
	c.setDirectory(c.dir)
	return c, nil
}

// Load parses, fills defaults and validates a configuration.
func Load(src []byte) (*Config, error) {
	b := autoLeadTime(src)
	c := &Config{}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty configuration")
		}
		return nil, withYAMLPaths(b, err)
	}
	// The same document again, for the keys only (anchors and merge keys resolved by the
	// decoder): the strict decode above has already rejected anything malformed.
	var keys struct {
		Policies []givenKeys `yaml:"policies"`
	}
	if err := yaml.NewDecoder(bytes.NewReader(b)).Decode(&keys); err != nil {
		return nil, withYAMLPaths(b, err)
	}
	if err := c.setDefaultsAndValidate(keys.Policies); err != nil {
		return nil, err
	}
	c.src = src
	return c, nil
}

// autoLeadTime is b with each policies[].lead_time: auto written 0s, padded to the same length
// so that every line and column stays where it was: a lead_time of 0, as one left unset, is
// measured (Policy.LeadTimeMeasured). A value it cannot place exactly is left to the decoder,
// which refuses it as any duration it cannot read.
func autoLeadTime(b []byte) []byte {
	var root yaml.Node
	if yaml.Unmarshal(b, &root) != nil || len(root.Content) == 0 {
		return b
	}
	pols := mappingValue(root.Content[0], "policies")
	if pols == nil || pols.Kind != yaml.SequenceNode {
		return b
	}
	starts := []int{0}
	for i, c := range b {
		if c == '\n' {
			starts = append(starts, i+1)
		}
	}
	out, cloned := b, false
	for _, p := range pols.Content {
		v := mappingValue(p, "lead_time")
		if v == nil || v.Kind != yaml.ScalarNode || !strings.EqualFold(v.Value, "auto") || v.Line < 1 || v.Line > len(starts) {
			continue
		}
		n := len(v.Value)
		if v.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
			n += 2
		}
		off := starts[v.Line-1] + v.Column - 1
		if off < 0 || off+n > len(b) || !bytes.Contains(bytes.ToLower(b[off:off+n]), []byte("auto")) {
			continue
		}
		if !cloned {
			out, cloned = bytes.Clone(b), true
		}
		copy(out[off:off+n], fmt.Sprintf("%-*s", n, "0s"))
	}
	return out
}

// mappingValue is the value of key in mapping node m, or nil.
func mappingValue(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

var yamlLineRe = regexp.MustCompile(`line (\d+): `)

// withYAMLPaths rewrites the decoder's "line N: …" messages (unknown fields, wrong types) to
// name the field path at that line as well, e.g. "policies[1].scaling.min_replica (line 12): …".
func withYAMLPaths(b []byte, err error) error {
	var root yaml.Node
	if yaml.Unmarshal(b, &root) != nil {
		if line, msg, ok := syntaxErrorLine(b, err); ok {
			return fmt.Errorf("yaml: line %d: %s", line, msg)
		}
		return err
	}
	paths := map[int]string{}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := k.Value
				if path != "" {
					p = path + "." + k.Value
				}
				if _, ok := paths[k.Line]; !ok {
					paths[k.Line] = p
				}
				walk(v, p)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, fmt.Sprintf("%s[%d]", path, i))
			}
		}
	}
	walk(&root, "")
	msg := yamlLineRe.ReplaceAllStringFunc(err.Error(), func(m string) string {
		line, _ := strconv.Atoi(yamlLineRe.FindStringSubmatch(m)[1])
		if p, ok := paths[line]; ok {
			return fmt.Sprintf("%s (line %d): ", p, line)
		}
		return m
	})
	return errors.New(msg)
}

// yamlSyntaxRe splits the message of a YAML syntax error: "yaml: line N: problem", or
// "yaml: problem" where the library names no line.
var yamlSyntaxRe = regexp.MustCompile(`^yaml: (?:line (\d+): )?(.*)$`)

// syntaxErrorLine returns the line of a YAML syntax error err in b, and its message without the
// line. go.yaml.in/yaml/v3 names the line where the enclosing construct starts (its context
// mark), not the line of the problem, and counts it from 0 for parser errors (from 1 for
// scanner errors): an indentation error on line 6 inside a list that starts on line 4 is
// reported at "line 3", a mapping value not allowed on line 10 at "line 9". The parser stops at
// the first problem, so its line is the first line whose end makes the file's prefix fail with
// the same message; the problem is never before its context, so the search starts at the line
// the library names. ok is false when err is not a syntax error or no prefix reproduces it
// (the message is then left as it is).
func syntaxErrorLine(b []byte, err error) (line int, msg string, ok bool) {
	var te *yaml.TypeError
	if err == nil || errors.As(err, &te) {
		return 0, "", false
	}
	m := yamlSyntaxRe.FindStringSubmatch(err.Error())
	if m == nil || strings.Contains(m[2], "\n") {
		return 0, "", false
	}
	msg = m[2]
	from := 1
	if m[1] != "" {
		from, _ = strconv.Atoi(m[1])
		from = max(from, 1)
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	end := make([]int, len(lines)+1) // end[n]: the bytes of the first n lines
	for k, l := range lines {
		end[k+1] = end[k] + len(l)
	}
	fails := func(n int) bool { // the first n lines fail with the same message
		var node yaml.Node
		perr := yaml.Unmarshal(b[:end[n]], &node)
		if perr == nil {
			return false
		}
		pm := yamlSyntaxRe.FindStringSubmatch(perr.Error())
		return pm != nil && pm[2] == msg
	}
	// Past the problem every prefix fails with it: gallop from the context's line, then bisect
	// the last step, so a problem far inside a long list costs a few dozen parses, not one a line.
	lo, hi := from-1, from
	for step := 1; hi < len(lines) && !fails(hi); step *= 2 {
		lo, hi = hi, min(hi+step, len(lines))
	}
	if hi > len(lines) || !fails(hi) {
		return 0, "", false
	}
	for hi-lo > 1 {
		if mid := (lo + hi) / 2; fails(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi, msg, true
}
