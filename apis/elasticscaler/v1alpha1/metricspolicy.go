package v1alpha1

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// The metrics-policy annotations of the guide (metadata.annotations of an ElasticScaler): how the
// collected samples are stabilised before an algorithm sees them.
const (
	AnnotationPrefix              = "elasticscaler.io/metrics."
	AnnotationWindowSeconds       = AnnotationPrefix + "windowSeconds"
	AnnotationAggregationType     = AnnotationPrefix + "aggregationType"
	AnnotationMissingDataPolicy   = AnnotationPrefix + "missingDataPolicy"
	AnnotationGCFactor            = AnnotationPrefix + "gcFactor"
	AnnotationEnableOutlierFilter = AnnotationPrefix + "enableOutlierFilter"
	AnnotationOutlierThreshold    = AnnotationPrefix + "outlierThreshold"
)

// Aggregation types of AnnotationAggregationType.
const (
	AggregationAverage = "Average"
	AggregationMax     = "Max"
	AggregationMin     = "Min"
	AggregationP90     = "P90"
)

// Missing-data policies of AnnotationMissingDataPolicy.
const (
	MissingDataIgnore      = "Ignore"
	MissingDataTreatAsZero = "TreatAsZero"
	MissingDataFail        = "Fail"
)

// MetricsPolicy is the parsed metrics-policy annotations; string fields hold the canonical
// spelling (Max, not max).
type MetricsPolicy struct {
	WindowSeconds       int
	AggregationType     string
	MissingDataPolicy   string
	GCFactor            int
	EnableOutlierFilter bool
	OutlierThreshold    float64
}

// DefaultMetricsPolicy is the policy of an ElasticScaler without annotations. The guide gives the
// defaults of windowSeconds (60), gcFactor (5) and outlierThreshold (1.5); its table of the others
// is missing, so Average, Ignore and no outlier filter — the choices that change the samples
// least — are debi's.
func DefaultMetricsPolicy() MetricsPolicy {
	return MetricsPolicy{
		WindowSeconds:       60,
		AggregationType:     AggregationAverage,
		MissingDataPolicy:   MissingDataIgnore,
		GCFactor:            5,
		EnableOutlierFilter: false,
		OutlierThreshold:    1.5,
	}
}

// ParseMetricsPolicy reads the metrics-policy annotations. As the guide says, an invalid value
// never fails the object: that key falls back to its default and a warning says so; unset keys
// take their defaults. Unknown keys under elasticscaler.io/metrics. are warned about too.
// Warnings are sorted by key.
func ParseMetricsPolicy(annotations map[string]string) (MetricsPolicy, []string) {
	p := DefaultMetricsPolicy()
	var warnings []string
	warn := func(key, v, want string, def any) {
		warnings = append(warnings, fmt.Sprintf("annotation %s: %q is not %s; using the default %v", key, v, want, def))
	}
	keys := make([]string, 0, len(annotations))
	for k := range annotations {
		if strings.HasPrefix(k, AnnotationPrefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		raw := annotations[k]
		v := strings.TrimSpace(raw)
		switch k {
		case AnnotationWindowSeconds:
			if n, err := strconv.Atoi(v); err == nil && n > 0 {
				p.WindowSeconds = n
			} else {
				warn(k, raw, "a positive integer", p.WindowSeconds)
			}
		case AnnotationGCFactor:
			if n, err := strconv.Atoi(v); err == nil && n > 0 {
				p.GCFactor = n
			} else {
				warn(k, raw, "a positive integer", p.GCFactor)
			}
		case AnnotationAggregationType:
			if c, ok := canonical(v, AggregationAverage, AggregationMax, AggregationMin, AggregationP90); ok {
				p.AggregationType = c
			} else {
				warn(k, raw, "one of Average, Max, Min, P90", p.AggregationType)
			}
		case AnnotationMissingDataPolicy:
			if c, ok := canonical(v, MissingDataIgnore, MissingDataTreatAsZero, MissingDataFail); ok {
				p.MissingDataPolicy = c
			} else {
				warn(k, raw, "one of Ignore, TreatAsZero, Fail", p.MissingDataPolicy)
			}
		case AnnotationEnableOutlierFilter:
			switch strings.ToLower(v) {
			case "true":
				p.EnableOutlierFilter = true
			case "false":
				p.EnableOutlierFilter = false
			default:
				warn(k, raw, "true or false", p.EnableOutlierFilter)
			}
		case AnnotationOutlierThreshold:
			if f, err := strconv.ParseFloat(v, 64); err == nil && f > 0 && !math.IsInf(f, 0) {
				p.OutlierThreshold = f
			} else {
				warn(k, raw, "a positive number", p.OutlierThreshold)
			}
		default:
			warnings = append(warnings, fmt.Sprintf("annotation %s is not a metrics-policy key; ignored", k))
		}
	}
	return p, warnings
}

func canonical(v string, names ...string) (string, bool) {
	for _, n := range names {
		if strings.EqualFold(v, n) {
			return n, true
		}
	}
	return "", false
}
