package config

// Policies from objects in the cluster (ElasticScalers, translated by package elasticscaler):
// global.elastic_scalers, the policy an object translates to and its merge with the file's.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// ElasticScalersConfig is global.elastic_scalers: policies from ElasticScaler objects.
type ElasticScalersConfig struct {
	// Enabled watches ElasticScalers (elasticscalers.v1alpha1.elasticscaler.io) and runs each
	// valid MetricsTrigger object as the policy <namespace>.<name> beside the file's policies
	// (default false). The watch waits while the API server does not serve the resource.
	Enabled bool `yaml:"enabled"`
	// Namespaces limits the watch to these namespaces (default: every namespace, which needs a
	// ClusterRole to list and watch elasticscalers).
	Namespaces []string `yaml:"namespaces"`
}

// ReloadError is the error of a reload whose next settings would change the ElasticScaler watch
// started under c (the configuration at start-up), naming the field; nil when the watch can stay
// as it is. The watch, its namespaces and the actors and Leases built on them are set at
// start-up, so a narrower list would leave the objects of the namespaces it drops running and a
// wider one would not be watched: turning the watch on, or another set of namespaces while it is
// on, needs a restart, as a new global.interval does. Turning it off is a reload like any other:
// the object policies are dropped (and come back when a later reload turns it on again).
func (c ElasticScalersConfig) ReloadError(next ElasticScalersConfig) error {
	const why = "the ElasticScaler watch cannot change while it runs: restart to apply"
	if !next.Enabled {
		return nil
	}
	if !c.Enabled {
		return fmt.Errorf("global.elastic_scalers.enabled: turned on by a reload (false at start-up); %s", why)
	}
	a, b := slices.Clone(c.Namespaces), slices.Clone(next.Namespaces)
	slices.Sort(a)
	slices.Sort(b)
	if !slices.Equal(slices.Compact(a), slices.Compact(b)) {
		return fmt.Errorf("global.elastic_scalers.namespaces: changed from %v at start-up to %v; %s", c.Namespaces, next.Namespaces, why)
	}
	return nil
}

// ObjectPolicy is a policy that comes from an object in the cluster rather than from the file.
type ObjectPolicy struct {
	// Source names the object, "elasticscaler <namespace>/<name>": the prefix of its errors.
	Source string
	// Namespace and Name are the object's.
	Namespace, Name string
	// Created orders the objects: when two conflict (one acting policy per target), the older
	// one wins, as the file's earlier policy does.
	Created time.Time
	// Policy is the translated policy, before defaults (WithPolicies fills and checks them).
	Policy Policy
	// Mode is the policy's webhook mode (spec.debi.mode; act when unset, as the API documents).
	Mode string
	// Paused is spec.debi.paused: the webhook writes nothing for the policy.
	Paused bool
	// PausedReplicas is spec.debi.pausedReplicas: the policy is paused held at that count.
	PausedReplicas *int32
	// StateTrigger marks the policy of a StateTrigger object (TranslateStateTrigger): its
	// decisions come from its Tidal's status only, through the webhook's Tidal watch. It must
	// not be run by the exporter, whose recommendations would fight the Tidal's.
	StateTrigger bool
	// Paths maps the fields of the policy (relative paths such as scaling.max_replicas) to the
	// object's fields that set them (spec.maxReplicas): WithPolicies reports an error of the
	// policy at the object's field.
	Paths map[string]string
}

// ObjectError is an error of an object's field: "elasticscaler ns/name: spec.maxReplicas: …".
type ObjectError struct {
	// Source names the object (ObjectPolicy.Source).
	Source string
	// Path is the object's field path (spec.trigger.metricsTrigger.algorithmConfig.upTolerance);
	// empty for the object as a whole.
	Path string
	// Err says what is wrong.
	Err error
}

func (e *ObjectError) Error() string {
	if e.Path == "" {
		return e.Source + ": " + e.Err.Error()
	}
	return e.Source + ": " + e.Path + ": " + e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *ObjectError) Unwrap() error { return e.Err }

var policyPathRe = regexp.MustCompile(`^policies\[(\d+)\](?:\.(.*))?$`)
var policyIndexRe = regexp.MustCompile(`\bpolicies\[(\d+)\]`)
var webhookPolicyPathRe = regexp.MustCompile(`^webhook\.policies\[(\d+)\](?:\.(.*))?$`)

// WithPolicies returns the configuration with the file's policies and every valid extra one,
// validated together as the file alone is (config.Load's defaults and checks, the checks across
// policies included: unique names, one acting policy per target), and one *ObjectError per error
// of a rejected extra, at the object's field path. The file's policies always win a conflict;
// among the extras, the older object (then the smaller source) wins. Each extra's mode becomes
// its webhook.policies entry. c is not modified; the extras' warnings are the result's
// Warnings() after the file's.
func (c *Config) WithPolicies(extra []ObjectPolicy) (*Config, []error) {
	ext := slices.Clone(extra)
	sort.SliceStable(ext, func(i, j int) bool {
		if !ext[i].Created.Equal(ext[j].Created) {
			return ext[i].Created.Before(ext[j].Created)
		}
		return ext[i].Source < ext[j].Source
	})
	var rejected []error
	// Each pass validates the file and the extras left; the errors at an extra's fields reject
	// it. An error the pass cannot attribute (a section-wide check an extra trips) falls back to
	// adding the extras one at a time.
	for {
		n, errs, err := c.validateWith(ext)
		if err != nil { // the file itself no longer validates: cannot happen for Load's output
			return c, append(rejected, err)
		}
		if len(errs) == 0 {
			return n, rejected
		}
		byExtra, other := attribute(errs, n, len(n.Policies)-len(ext), ext)
		if len(other) > 0 {
			return c.addOneByOne(ext, rejected)
		}
		var keep []ObjectPolicy
		for i, op := range ext {
			if es := byExtra[i]; len(es) > 0 {
				rejected = append(rejected, es...)
				continue
			}
			keep = append(keep, op)
		}
		ext = keep
	}
}

// clone is p with its own copy of what validation fills in or replaces in place: the metrics
// list, the endpoints and the metrics' sources.
func (p Policy) clone() Policy {
	p.Queries.Endpoint = p.Queries.Endpoint.clone()
	p.Metrics.List = slices.Clone(p.Metrics.List)
	for i := range p.Metrics.List {
		m := &p.Metrics.List[i]
		m.Endpoint = m.Endpoint.clone()
		m.External, m.Object, m.Pods = clonePtr(m.External), clonePtr(m.Object), clonePtr(m.Pods)
	}
	return p
}

func clonePtr[T any](v *T) *T {
	if v == nil {
		return nil
	}
	c := *v
	return &c
}

// addOneByOne adds the extras in order, keeping each that validates with those kept before it.
func (c *Config) addOneByOne(ext []ObjectPolicy, rejected []error) (*Config, []error) {
	var kept []ObjectPolicy
	for _, op := range ext {
		try := append(slices.Clone(kept), op)
		n, errs, err := c.validateWith(try)
		if err != nil {
			return c, append(rejected, err)
		}
		if len(errs) == 0 {
			kept = append(kept, op)
			continue
		}
		byExtra, other := attribute(errs, n, len(n.Policies)-len(try), try)
		for _, es := range byExtra {
			rejected = append(rejected, es...) // kept ones validated before: these are op's
		}
		for _, e := range other {
			rejected = append(rejected, &ObjectError{Source: op.Source, Path: "spec", Err: e})
		}
	}
	n, errs, err := c.validateWith(kept)
	if err == nil && len(errs) > 0 {
		err = errs[0]
	}
	if err != nil {
		return c, append(rejected, err)
	}
	return n, rejected
}

// validateWith decodes the file's document again, appends the extras and their webhook modes
// and runs the file's validation, returning every error. err is set when the file's document
// does not decode.
func (c *Config) validateWith(ext []ObjectPolicy) (*Config, []error, error) {
	var n *Config
	var given []givenKeys
	if c.src != nil {
		var err error
		if n, given, err = decodeDocument(c.src); err != nil {
			return nil, nil, err
		}
		// LoadFile set the directory of the file's secrets on the loaded client configuration.
		n.Global.HTTPConfig = c.Global.HTTPConfig
		n.setDirectory(c.dir) // the policies' endpoints, decoded again
	} else {
		// A configuration built by hand: its policies are validated again as they are.
		cp := *c
		cp.Policies = slices.Clone(c.Policies)
		cp.Webhook.Policies = slices.Clone(c.Webhook.Policies)
		cp.Webhook.Tidal.Resources = slices.Clone(c.Webhook.Tidal.Resources)
		cp.warnings = slices.Clone(c.warnings)
		n = &cp
	}
	for _, op := range ext {
		// A copy of its own: validation fills in and replaces the metrics list's and the
		// endpoints' parts, and the caller's policies stay as given (the ElasticScaler source
		// compares each translation with the last).
		n.Policies = append(n.Policies, op.Policy.clone())
		if op.Mode != "" {
			n.Webhook.Policies = append(n.Webhook.Policies, WebhookPolicy{Name: op.Policy.Name, Mode: op.Mode, Paused: op.Paused, PausedReplicas: op.PausedReplicas})
		}
	}
	var errs errList
	n.validate(given, &errs)
	n.src, n.dir = c.src, c.dir
	return n, errs, nil
}

// decodeDocument is Load's decoding: the configuration before defaults, and the keys given.
func decodeDocument(b []byte) (*Config, []givenKeys, error) {
	c := &Config{}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil, errors.New("empty configuration")
		}
		return nil, nil, withYAMLPaths(b, err)
	}
	var keys struct {
		Policies []givenKeys `yaml:"policies"`
	}
	if err := yaml.NewDecoder(bytes.NewReader(b)).Decode(&keys); err != nil {
		return nil, nil, withYAMLPaths(b, err)
	}
	return c, keys.Policies, nil
}

// attribute sorts a validation's errors into those of each extra (at the object's paths) and
// the others. The extras are policies[nFile…] and their webhook.policies entries.
func attribute(errs []error, n *Config, nFile int, ext []ObjectPolicy) (map[int][]error, []error) {
	by := map[int][]error{}
	var other []error
	idx := map[string]int{}
	for i, op := range ext {
		idx[op.Policy.Name] = i
	}
	for _, err := range errs {
		path, msg := errorPath(err)
		i, rel := -1, ""
		if m := policyPathRe.FindStringSubmatch(path); m != nil {
			k, _ := strconv.Atoi(m[1])
			if k >= nFile && k-nFile < len(ext) {
				i, rel = k-nFile, m[2]
			}
		} else if m := webhookPolicyPathRe.FindStringSubmatch(path); m != nil {
			k, _ := strconv.Atoi(m[1])
			if k < len(n.Webhook.Policies) {
				if j, ok := idx[n.Webhook.Policies[k].Name]; ok {
					i, rel = j, m[2]
				}
			}
		}
		if i < 0 {
			other = append(other, err)
			continue
		}
		op := ext[i]
		if n != nil { // "already used by policies[3]": name the policy, not its index
			msg = policyIndexRe.ReplaceAllStringFunc(msg, func(m string) string {
				k, _ := strconv.Atoi(policyIndexRe.FindStringSubmatch(m)[1])
				if k < len(n.Policies) {
					return fmt.Sprintf("policy %q", n.Policies[k].Name)
				}
				return m
			})
		}
		if rel == "name" && strings.HasPrefix(path, "webhook.") {
			rel = "mode" // an entry is the extra's own: only its mode can be at fault
		}
		by[i] = append(by[i], &ObjectError{Source: op.Source, Path: op.objectPath(rel), Err: errors.New(objectMessage(op, rel, msg))})
	}
	return by, other
}

// objectPath is the object's field that sets the policy field rel, the longest mapped prefix;
// "spec" when none does.
func (op ObjectPolicy) objectPath(rel string) string {
	for r := rel; r != ""; {
		if p, ok := op.Paths[r]; ok {
			return p
		}
		i := strings.LastIndexByte(r, '.')
		if i < 0 {
			break
		}
		r = r[:i]
	}
	return "spec"
}

// objectMessage names the policy field as well when the object's path does not say it.
func objectMessage(op ObjectPolicy, rel, msg string) string {
	if _, ok := op.Paths[rel]; ok || rel == "" {
		return msg
	}
	return fmt.Sprintf("%s (debi policy field %s)", msg, rel)
}

// errorPath splits a validation error into its field path and message.
func errorPath(err error) (string, string) {
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

// SetScalingKey records that a translation (an ElasticScaler object's) set scaling.<key> (or
// scaling.budget.<key> for "budget.<key>"): it keeps its value, zero included, as a key of the
// file does.
func (p *Policy) SetScalingKey(key string) {
	if p.given.Scaling == nil {
		p.given.Scaling = map[string]any{}
	}
	if sub, ok := strings.CutPrefix(key, "budget."); ok {
		b, _ := p.given.Scaling["budget"].(map[string]any)
		if b == nil {
			b = map[string]any{}
			p.given.Scaling["budget"] = b
		}
		b[sub] = true
		return
	}
	p.given.Scaling[key] = true
}
