package config

import (
	"fmt"
	"strings"
)

// FieldError is a configuration error at a field path such as policies[2].queries.demand.
type FieldError struct {
	// Path is the YAML path of the offending field.
	Path string
	// Err says what is wrong with it.
	Err error
}

func (e *FieldError) Error() string { return e.Path + ": " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e *FieldError) Unwrap() error { return e.Err }

// errorf returns a FieldError at path.
func errorf(path, format string, args ...any) error {
	return &FieldError{Path: path, Err: fmt.Errorf(format, args...)}
}

// subfieldError turns a validation error whose message starts with the field's YAML name
// ("min_replicas must be at least 1") into a FieldError at path.field.
func subfieldError(path string, err error) error {
	field, _, _ := strings.Cut(err.Error(), " ")
	return &FieldError{Path: path + "." + field, Err: err}
}

// errList collects the independent errors of one validation pass in the order of the checks:
// Load reports the first, Check every one. A check that depends on a field already found
// invalid is skipped rather than reported again.
type errList []error

// add appends err when it is not nil and reports whether it was.
func (l *errList) add(err error) bool {
	if err == nil {
		return false
	}
	*l = append(*l, err)
	return true
}

// addf appends a FieldError at path.
func (l *errList) addf(path, format string, args ...any) { l.add(errorf(path, format, args...)) }

// first is the first error, or nil.
func (l errList) first() error {
	if len(l) == 0 {
		return nil
	}
	return l[0]
}

// addSubfields appends the FieldErrors of another package's validation error under path: one per
// error errors.Join joined (each naming its field, as subfieldError reads it), in their order, so
// that the first is the one Load has always reported.
func (l *errList) addSubfields(path string, err error) {
	if err == nil {
		return
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			l.addSubfields(path, e)
		}
		return
	}
	l.add(subfieldError(path, err))
}
