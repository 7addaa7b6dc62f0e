package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// CheckError is one problem Check found: the field path, its line in the file (0 when the file
// does not have the field, e.g. a required one that is missing, and its parent has no line
// either) and what is wrong, in the words of the file rather than of Go.
type CheckError struct {
	// Path is the YAML path of the field, e.g. policies[2].history_step.
	Path string
	// Line is the 1-based line of the field, or of its nearest parent present in the file.
	Line int
	// Msg says what is wrong.
	Msg string
}

func (e *CheckError) Error() string {
	switch {
	case e.Path == "" && e.Line == 0:
		return e.Msg
	case e.Path == "":
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	case e.Line == 0:
		return e.Path + ": " + e.Msg
	}
	return fmt.Sprintf("%s (line %d): %s", e.Path, e.Line, e.Msg)
}

// Check validates a configuration as Load does but reports every error it can find instead of
// the first, for `debi check config`: every wrong type and unknown field the decoder meets, then
// every invalid field of the global, exporter and webhook sections and of each policy, and each
// conflict across policies (every duplicate name, every second acting policy on a target).
// A check that rests on a field already reported (e.g. history_step against an invalid
// global.interval) is skipped rather than reported as its echo. Errors are *CheckError values in
// the order of their lines. A nil result means Load accepts the file.
func Check(b []byte) []error {
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return []error{syntaxError(b, err)}
	}
	if len(root.Content) == 0 {
		return []error{&CheckError{Msg: "empty configuration"}}
	}
	idx := indexNodes(&root)
	var errs []error
	bad := map[string]bool{} // paths with a decoding error: their zero values prove nothing

	c := &Config{}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil {
		var te *yaml.TypeError
		if errors.Is(err, io.EOF) {
			return []error{&CheckError{Msg: "empty configuration"}}
		}
		if !errors.As(err, &te) {
			// The decoder stopped: nothing after this point was read.
			return []error{&CheckError{Msg: withYAMLPaths(b, err).Error()}}
		}
		for _, m := range te.Errors {
			e := idx.decodeError(m)
			bad[e.Path] = true
			errs = append(errs, e)
		}
	}
	var keys struct {
		Policies []givenKeys `yaml:"policies"`
	}
	_ = yaml.Unmarshal(b, &keys) // best effort: wrong types were reported above

	// keep says whether a validation error is news, not the echo of a decoding error at, above
	// or below its path (policies[1].target is not checked for a clash when its kind could not
	// be read).
	keep := func(path string) bool {
		for p := path; p != ""; p = parentPath(p) {
			if bad[p] {
				return false
			}
		}
		for p := range bad {
			if path != "" && (strings.HasPrefix(p, path+".") || strings.HasPrefix(p, path+"[")) {
				return false
			}
		}
		return true
	}
	// An interval that could not be decoded is no more valid than one out of range: what is
	// checked against it is skipped.
	c.intervalBad = !keep("global.interval")

	var found errList
	c.validate(keys.Policies, &found)
	for _, err := range found {
		path, msg := splitFieldError(err)
		if keep(path) {
			errs = append(errs, &CheckError{Path: path, Line: idx.line(path), Msg: inFileTerms(msg)})
		}
	}
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].(*CheckError).Line < errs[j].(*CheckError).Line })
	return errs
}

// templateFieldRe finds text/template's message for a field the query data lacks, which names
// the Go type of the data.
var templateFieldRe = regexp.MustCompile(`can't evaluate field (\w+) in type \S+`)

// inFileTerms rewrites what a validation message says in Go's terms: a query template's unknown
// field is named with the fields a template has.
func inFileTerms(msg string) string {
	return templateFieldRe.ReplaceAllString(msg, "unknown field .$1 (a query template has .Policy, .Namespace, .Kind and .Name)")
}

// splitFieldError separates the path of the package's validation errors from their message.
func splitFieldError(err error) (path, msg string) {
	var fe *FieldError
	if errors.As(err, &fe) {
		return fe.Path, fe.Err.Error()
	}
	var we *fieldError
	if errors.As(err, &we) {
		return we.path, we.msg
	}
	return "", err.Error()
}

// parentPath is the path of the field that holds path: policies[0] for policies[0].name, policies
// for policies[0].
func parentPath(path string) string {
	i := strings.LastIndexAny(path, ".[")
	if i <= 0 {
		return ""
	}
	return path[:i]
}

func syntaxError(b []byte, err error) error {
	if line, msg, ok := syntaxErrorLine(b, err); ok {
		return &CheckError{Line: line, Msg: msg}
	}
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if m := yamlLineRe.FindStringSubmatch(msg + " "); m != nil && strings.HasPrefix(msg, "line ") {
		line, _ := strconv.Atoi(m[1])
		return &CheckError{Line: line, Msg: strings.TrimPrefix(msg, m[0])}
	}
	return &CheckError{Msg: msg}
}

// nodeIndex maps the file's lines to field paths and back.
type nodeIndex struct {
	lines  map[string]int       // path → line of its key (or of the list item)
	keys   map[int]string       // line → path of the first key on it
	values map[int][]pathedNode // line → the value nodes that start on it, outermost first
}

type pathedNode struct {
	path string
	node *yaml.Node
}

func indexNodes(root *yaml.Node) *nodeIndex {
	idx := &nodeIndex{lines: map[string]int{}, keys: map[int]string{}, values: map[int][]pathedNode{}}
	var walk func(n *yaml.Node, path string, line int)
	walk = func(n *yaml.Node, path string, line int) {
		if path != "" {
			if _, ok := idx.lines[path]; !ok {
				idx.lines[path] = line
			}
			idx.values[n.Line] = append(idx.values[n.Line], pathedNode{path, n})
		}
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path, c.Line)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := k.Value
				if path != "" {
					p = path + "." + k.Value
				}
				if _, ok := idx.keys[k.Line]; !ok {
					idx.keys[k.Line] = p
				}
				walk(v, p, k.Line)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, fmt.Sprintf("%s[%d]", path, i), c.Line)
			}
		}
	}
	walk(root, "", 0)
	return idx
}

// line is the line of path, or of its nearest parent in the file.
func (idx *nodeIndex) line(path string) int {
	for p := path; p != ""; p = parentPath(p) {
		if l, ok := idx.lines[p]; ok {
			return l
		}
	}
	return 0
}

var (
	unmarshalRe  = regexp.MustCompile("^line (\\d+): cannot unmarshal (!!\\w+)(?: `.*`)? into (.+)$")
	notFoundRe   = regexp.MustCompile(`^line (\d+): field (.+) not found in type .+$`)
	alreadySetRe = regexp.MustCompile(`^line (\d+): field (.+) already set in type .+$`)
	lineRe       = regexp.MustCompile(`^line (\d+): (.*)$`)
)

// decodeError rewrites one of the decoder's messages in the file's terms: the path at its line,
// the value as written and what the field wants, never a Go type.
func (idx *nodeIndex) decodeError(msg string) *CheckError {
	if m := unmarshalRe.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		want := kindOf(m[3])
		kind := map[string]yaml.Kind{"!!seq": yaml.SequenceNode, "!!map": yaml.MappingNode}[m[2]]
		if kind == 0 {
			kind = yaml.ScalarNode
		}
		for _, v := range idx.values[line] {
			if v.node.Kind != kind {
				continue
			}
			got := map[yaml.Kind]string{yaml.SequenceNode: "a list", yaml.MappingNode: "a mapping"}[kind]
			if kind == yaml.ScalarNode {
				return &CheckError{Path: v.path, Line: line, Msg: fmt.Sprintf("%q is not %s", v.node.Value, want)}
			}
			return &CheckError{Path: v.path, Line: line, Msg: fmt.Sprintf("must be %s, not %s", want, got)}
		}
		return &CheckError{Path: idx.keys[line], Line: line, Msg: "must be " + want}
	}
	if m := notFoundRe.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &CheckError{Path: idx.keys[line], Line: line, Msg: fmt.Sprintf("unknown field %q", m[2])}
	}
	if m := alreadySetRe.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &CheckError{Path: idx.keys[line], Line: line, Msg: fmt.Sprintf("field %q is set twice", m[2])}
	}
	if m := lineRe.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &CheckError{Path: idx.keys[line], Line: line, Msg: m[2]}
	}
	return &CheckError{Msg: msg}
}

// kindOf names what a Go type of the configuration accepts.
func kindOf(goType string) string {
	t := strings.TrimLeft(goType, "*")
	switch {
	case t == "time.Duration" || t == "model.Duration":
		return "a duration (e.g. 30s, 5m, 1h)"
	case t == "bool":
		return "a boolean (true or false)"
	case t == "string":
		return "a string"
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "uint"):
		return "an integer"
	case strings.HasPrefix(t, "float"):
		return "a number"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map["):
		return "a mapping"
	case strings.Contains(t, "."):
		return "a mapping" // a struct of the configuration
	}
	return "of another type"
}
