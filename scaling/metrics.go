package scaling

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Aggregation of the samples in the stabilisation window.
type Aggregation string

// Aggregations of the Elastic Scaler metrics policy.
const (
	AggAverage Aggregation = "Average"
	AggMax     Aggregation = "Max"
	AggMin     Aggregation = "Min"
	AggP90     Aggregation = "P90"
)

// MissingData says what a missing (NaN) sample means.
type MissingData string

// Missing-data policies of the Elastic Scaler metrics policy.
const (
	MissingIgnore      MissingData = "Ignore"
	MissingTreatAsZero MissingData = "TreatAsZero"
	MissingFail        MissingData = "Fail"
)

// ErrMissingData is returned by Stabilize under MissingFail when a sample is missing, and under
// every policy when the window holds no usable sample.
var ErrMissingData = errors.New("missing metric data")

// MetricsPolicy is the Elastic Scaler's metric stabilisation (METHOD §1): samples in
// (now − Window, now] are cleaned (missing data, optional Tukey outlier filter) and aggregated.
type MetricsPolicy struct {
	Window           time.Duration `yaml:"window" json:"window"`
	Aggregation      Aggregation   `yaml:"aggregation" json:"aggregation"`
	MissingData      MissingData   `yaml:"missing_data" json:"missing_data"`
	OutlierFilter    bool          `yaml:"outlier_filter" json:"outlier_filter"`
	OutlierThreshold float64       `yaml:"outlier_threshold" json:"outlier_threshold"`
}

// DefaultMetricsPolicy is the Elastic Scaler's default: 60 s, Average, Ignore, no filter, k=1.5.
func DefaultMetricsPolicy() MetricsPolicy {
	return MetricsPolicy{Window: 60 * time.Second, Aggregation: AggAverage, MissingData: MissingIgnore, OutlierThreshold: 1.5}
}

// Normalize returns the policy with every invalid setting replaced by its default, and one
// warning per replacement naming the field (as the Elastic Scaler does: a bad annotation falls
// back, it never stops the scaler). Names are matched case-insensitively.
func (m MetricsPolicy) Normalize() (MetricsPolicy, []string) {
	def := DefaultMetricsPolicy()
	var warn []string
	if m.Window <= 0 {
		warn = append(warn, fmt.Sprintf("window %v is not positive; using %v", m.Window, def.Window))
		m.Window = def.Window
	}
	switch strings.ToLower(string(m.Aggregation)) {
	case "average", "avg", "mean":
		m.Aggregation = AggAverage
	case "max":
		m.Aggregation = AggMax
	case "min":
		m.Aggregation = AggMin
	case "p90":
		m.Aggregation = AggP90
	case "":
		m.Aggregation = def.Aggregation
	default:
		warn = append(warn, fmt.Sprintf("aggregation %q is not one of Average, Max, Min, P90; using %s", m.Aggregation, def.Aggregation))
		m.Aggregation = def.Aggregation
	}
	switch strings.ToLower(string(m.MissingData)) {
	case "ignore":
		m.MissingData = MissingIgnore
	case "treataszero":
		m.MissingData = MissingTreatAsZero
	case "fail":
		m.MissingData = MissingFail
	case "":
		m.MissingData = def.MissingData
	default:
		warn = append(warn, fmt.Sprintf("missing_data %q is not one of Ignore, TreatAsZero, Fail; using %s", m.MissingData, def.MissingData))
		m.MissingData = def.MissingData
	}
	if m.OutlierThreshold == 0 {
		m.OutlierThreshold = def.OutlierThreshold
	} else if !(m.OutlierThreshold > 0) || math.IsInf(m.OutlierThreshold, 0) {
		warn = append(warn, fmt.Sprintf("outlier_threshold %v is not a positive number; using %v", m.OutlierThreshold, def.OutlierThreshold))
		m.OutlierThreshold = def.OutlierThreshold
	}
	return m, warn
}

// Sample is one observation of a metric; a NaN Value is a missing sample.
type Sample struct {
	Time  time.Time
	Value float64
}

// Stabilize aggregates the samples in (now − Window, now] under the policy, which must be
// normalised. scratch, if large enough, is reused to avoid allocation.
func (m MetricsPolicy) Stabilize(samples []Sample, now time.Time, scratch []float64) (float64, error) {
	cut := now.Add(-m.Window)
	vals := scratch[:0]
	missing := 0
	for _, s := range samples {
		if !s.Time.After(cut) || s.Time.After(now) {
			continue
		}
		if math.IsNaN(s.Value) || math.IsInf(s.Value, 0) {
			missing++
			switch m.MissingData {
			case MissingFail:
				return math.NaN(), fmt.Errorf("%w: sample at %s is not a number (missing_data: Fail)", ErrMissingData, s.Time.Format(time.RFC3339))
			case MissingTreatAsZero:
				vals = append(vals, 0)
			}
			continue
		}
		vals = append(vals, s.Value)
	}
	if len(vals) == 0 {
		return math.NaN(), fmt.Errorf("%w: no sample in the last %v (%d missing)", ErrMissingData, m.Window, missing)
	}
	if m.OutlierFilter && len(vals) >= 4 {
		vals = tukeyFilter(vals, m.OutlierThreshold)
	}
	return aggregate(vals, m.Aggregation), nil
}

// tukeyFilter keeps the values inside [Q1 − k·IQR, Q3 + k·IQR]. It sorts vals in place.
func tukeyFilter(vals []float64, k float64) []float64 {
	slices.Sort(vals)
	q1, q3 := quantileSorted(vals, 0.25), quantileSorted(vals, 0.75)
	lo, hi := q1-k*(q3-q1), q3+k*(q3-q1)
	out := vals[:0]
	for _, v := range vals {
		if v >= lo && v <= hi {
			out = append(out, v)
		}
	}
	return out
}

func aggregate(vals []float64, agg Aggregation) float64 {
	switch agg {
	case AggMax:
		return slices.Max(vals)
	case AggMin:
		return slices.Min(vals)
	case AggP90:
		slices.Sort(vals)
		return quantileSorted(vals, 0.9)
	default:
		s := 0.0
		for _, v := range vals {
			s += v
		}
		return s / float64(len(vals))
	}
}

// quantileSorted is the linear-interpolation quantile (type 7, as numpy's default and
// PromQL's quantile_over_time) of sorted values.
func quantileSorted(s []float64, q float64) float64 {
	if len(s) == 0 {
		return math.NaN()
	}
	pos := q * float64(len(s)-1)
	i := int(math.Floor(pos))
	if i >= len(s)-1 {
		return s[len(s)-1]
	}
	f := pos - float64(i)
	return s[i] + f*(s[i+1]-s[i])
}
