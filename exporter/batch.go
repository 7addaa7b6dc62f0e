package exporter

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// Batched queries. Policies whose queries differ only in the values of equality matchers (the
// default queries of every Deployment differ only in namespace and name) are answered by one
// query per such template and step: the matchers that vary are dropped from the selector, the
// aggregation is grouped by their labels, and the result is fanned out to the policies by
// those labels (prometheus-adapter's and kube-state-metrics' way). A policy then reads its own
// query as before, and gets the answer its own query would have had: the same value, no series
// (stale, as today) or several (a configuration error, as today).
//
// A query is batchable when it is an aggregation sum, min, max, avg, count or group without a
// grouping, or no aggregation at all, of an expression over exactly one vector selector whose
// other nodes keep the selector's labels (range functions such as rate, math functions,
// arithmetic with scalars). Others are queried per policy.

// templatePlaceholder replaces an equality matcher's value in a template's key.
const templatePlaceholder = "\x00"

// historyPagePoints bounds the points of one batched range query: the history of a large
// fleet is loaded in pages of consecutive time ranges.
const historyPagePoints = 1_000_000

// batchAggregations are the aggregations that can be grouped by the fanned-out labels without
// changing each group's value.
var batchAggregations = map[parser.ItemType]bool{
	parser.SUM: true, parser.MIN: true, parser.MAX: true, parser.AVG: true, parser.COUNT: true, parser.GROUP: true,
}

// labelKeeping are the functions that keep the labels of their vector argument (but the
// metric name): the batched query's series carry the labels the fan-out reads.
var labelKeeping = map[string]bool{
	"rate": true, "irate": true, "increase": true, "delta": true, "idelta": true, "deriv": true,
	"predict_linear": true, "resets": true, "changes": true,
	"avg_over_time": true, "min_over_time": true, "max_over_time": true, "sum_over_time": true,
	"count_over_time": true, "last_over_time": true, "quantile_over_time": true,
	"stddev_over_time": true, "stdvar_over_time": true, "present_over_time": true, "mad_over_time": true,
	"abs": true, "ceil": true, "floor": true, "round": true, "clamp": true, "clamp_min": true, "clamp_max": true,
	"exp": true, "ln": true, "log2": true, "log10": true, "sqrt": true, "sgn": true,
}

// exprTemplate is a batchable query: its template's key (the expression with the values of its
// equality matchers replaced) and those values by label.
type exprTemplate struct {
	key        string
	values     map[string]string
	aggregated bool
}

// parseTemplate returns the template of a batchable query (ok false: query it per policy).
func parseTemplate(expr string) (exprTemplate, bool) {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return exprTemplate{}, false
	}
	vs, agg, ok := analyze(e)
	if !ok {
		return exprTemplate{}, false
	}
	t := exprTemplate{values: map[string]string{}, aggregated: agg != nil}
	seen := map[string]bool{}
	for _, m := range vs.LabelMatchers {
		if seen[m.Name] {
			return exprTemplate{}, false // two matchers on one label: leave it to Prometheus
		}
		seen[m.Name] = true
		if m.Type == labels.MatchEqual && m.Name != model.MetricNameLabel && m.Value != "" {
			t.values[m.Name] = m.Value
			m.Value = templatePlaceholder
		}
	}
	if len(t.values) == 0 {
		return exprTemplate{}, false
	}
	t.key = e.String()
	return t, true
}

// analyze returns the one vector selector of a batchable query and its aggregation (nil:
// none); ok is false when the query cannot be batched: not exactly one selector, a node that
// changes labels, an aggregation with a grouping or a parameter, or two aggregations.
func analyze(e parser.Expr) (vs *parser.VectorSelector, agg *parser.AggregateExpr, ok bool) {
	ok = true
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.VectorSelector:
			ok = ok && vs == nil
			vs = n
		case *parser.AggregateExpr:
			ok = ok && agg == nil && batchAggregations[n.Op] && len(n.Grouping) == 0 && !n.Without && n.Param == nil
			agg = n
		case *parser.MatrixSelector, *parser.SubqueryExpr, *parser.ParenExpr, *parser.NumberLiteral,
			*parser.StepInvariantExpr, *parser.UnaryExpr:
		case *parser.Call:
			ok = ok && labelKeeping[n.Func.Name]
		case *parser.BinaryExpr:
			// Arithmetic or a filter with a scalar: no vector matching.
			ok = ok && (n.LHS.Type() == parser.ValueTypeScalar || n.RHS.Type() == parser.ValueTypeScalar)
		case parser.Expressions, nil: // nil: the end of a node's children
		default:
			ok = false
		}
		return nil
	})
	return vs, agg, ok && vs != nil
}

// batchGroup is one batched query: the policies' queries it answers by the values of the
// fanned-out labels.
type batchGroup struct {
	// ep is the endpoint the batch goes to (nil: global.prometheus_url): a batch holds the
	// queries of one endpoint.
	ep         *endpointClient
	expr       string
	labels     []string            // the fanned-out labels, sorted
	members    map[string][]string // fan-out key → the policy queries with those values
	aggregated bool
}

// fanoutKey joins the values of the fanned-out labels.
func fanoutKey(get func(string) string, labels []string) string {
	var b strings.Builder
	for i, l := range labels {
		if i > 0 {
			b.WriteByte(0xff)
		}
		b.WriteString(get(l))
	}
	return b.String()
}

// planBatches groups queries by template. A template with queries that differ in the values of
// some labels becomes a batchGroup fanned out by those labels; the rest are left to be queried
// one by one (singles). Duplicate queries are answered once either way.
func planBatches(exprs []string, templates map[string]exprTemplate) (groups []*batchGroup, singles []string) {
	byKey := map[string][]string{}
	var keys []string
	seen := map[string]bool{}
	for _, x := range exprs {
		if seen[x] {
			continue
		}
		seen[x] = true
		t, ok := templates[x]
		if !ok {
			singles = append(singles, x)
			continue
		}
		if _, dup := byKey[t.key]; !dup {
			keys = append(keys, t.key)
		}
		byKey[t.key] = append(byKey[t.key], x)
	}
	for _, k := range keys {
		xs := byKey[k]
		if len(xs) < 2 {
			singles = append(singles, xs...)
			continue
		}
		g, ok := newBatchGroup(xs, templates)
		if !ok {
			singles = append(singles, xs...)
			continue
		}
		groups = append(groups, g)
	}
	return groups, singles
}

// newBatchGroup builds the batched query of queries of one template: the labels whose values
// differ between them are dropped from the selector and become the grouping.
func newBatchGroup(xs []string, templates map[string]exprTemplate) (*batchGroup, bool) {
	first := templates[xs[0]]
	var vary []string
	for l, v := range first.values {
		for _, x := range xs[1:] {
			if templates[x].values[l] != v {
				vary = append(vary, l)
				break
			}
		}
	}
	slices.Sort(vary)
	e, err := parser.NewParser(parser.Options{}).ParseExpr(xs[0])
	if err != nil {
		return nil, false
	}
	vs, agg, _ := analyze(e)
	aggregated := agg != nil
	kept := vs.LabelMatchers[:0]
	nonEmpty := false
	for _, m := range vs.LabelMatchers {
		if m.Type == labels.MatchEqual && slices.Contains(vary, m.Name) {
			continue
		}
		kept = append(kept, m)
		nonEmpty = nonEmpty || !m.Matches("")
	}
	if !nonEmpty {
		return nil, false // a selector must keep a matcher that does not match the empty string
	}
	vs.LabelMatchers = kept
	if vs.Name != "" && !slices.ContainsFunc(kept, func(m *labels.Matcher) bool { return m.Name == model.MetricNameLabel }) {
		vs.Name = ""
	}
	if aggregated {
		agg.Grouping = vary
	}
	g := &batchGroup{expr: e.String(), labels: vary, members: map[string][]string{}, aggregated: aggregated}
	for _, x := range xs {
		vals := templates[x].values
		k := fanoutKey(func(l string) string { return vals[l] }, vary)
		g.members[k] = append(g.members[k], x)
	}
	return g, true
}

// answer is one prefetched query result.
type answer struct {
	v   model.Value
	err error
}

// rangeKey names a range query on an endpoint.
type rangeKey struct {
	ep               *endpointClient
	expr             string
	start, end, step int64
}

func newRangeKey(ep *endpointClient, expr string, r v1.Range) rangeKey {
	return rangeKey{ep, expr, r.Start.UnixMilli(), r.End.UnixMilli(), int64(r.Step)}
}

// prefetched are the answers of one step's batched queries, by policy query. Written before
// the step's workers start and read-only while they run.
type prefetched struct {
	t       int64 // the step's evaluation time in Unix milliseconds
	instant map[endpointExpr]answer
	ranges  map[rangeKey]answer
}

// servingQuerier answers the queries of the current step's batches from their prefetched
// results and passes every other query to Prometheus.
type servingQuerier struct{ e *Exporter }

func (s servingQuerier) Query(ctx context.Context, expr string, ts time.Time, opts ...v1.Option) (model.Value, v1.Warnings, v1.Infos, error) {
	if a, ok := s.e.prefetchedInstant(endpointOf(ctx), expr, ts); ok {
		return a.v, nil, nil, a.err
	}
	return s.e.base.Query(ctx, expr, ts, opts...)
}

func (s servingQuerier) QueryRange(ctx context.Context, expr string, r v1.Range, opts ...v1.Option) (model.Value, v1.Warnings, v1.Infos, error) {
	if a, ok := s.e.pre.rangeAnswer(endpointOf(ctx), expr, r); ok {
		return a.v, nil, nil, a.err
	}
	return s.e.base.QueryRange(ctx, expr, r, opts...)
}

// rangeAnswer is the prefetched answer of a range query on ep, if any (p may be nil).
func (p *prefetched) rangeAnswer(ep *endpointClient, expr string, r v1.Range) (answer, bool) {
	if p == nil {
		return answer{}, false
	}
	a, ok := p.ranges[newRangeKey(ep, expr, r)]
	return a, ok
}

// prefetchedInstant is the prefetched answer of an instant query on ep at ts, if any.
func (e *Exporter) prefetchedInstant(ep *endpointClient, expr string, ts time.Time) (answer, bool) {
	p := e.pre
	if p == nil || p.t != ts.UnixMilli() {
		return answer{}, false
	}
	a, ok := p.instant[endpointExpr{ep, expr}]
	return a, ok
}

// replan groups the instant queries of the policy set into batches, the queries of each
// endpoint apart. Called with mu held when the policy set changes.
func (e *Exporter) replan() {
	e.templates = map[string]exprTemplate{}
	exprs := map[*endpointClient][]string{}
	eps := []*endpointClient{nil}
	for _, ps := range e.policies {
		for k, x := range ps.queries() {
			if x == "" {
				continue
			}
			if _, done := e.templates[x]; !done {
				if t, ok := parseTemplate(x); ok {
					e.templates[x] = t
				}
			}
			ep := ps.endpoint(k)
			if _, seen := exprs[ep]; !seen && ep != nil {
				eps = append(eps, ep)
			}
			exprs[ep] = append(exprs[ep], x)
		}
		for _, x := range ps.rangeQueries() { // the history of metrics read from metrics APIs
			if _, done := e.templates[x]; x != "" && !done {
				if t, ok := parseTemplate(x); ok {
					e.templates[x] = t
				}
			}
		}
	}
	e.batches = nil
	if e.batching {
		for _, ep := range eps {
			groups, _ := planBatches(exprs[ep], e.templates)
			for _, g := range groups {
				g.ep = ep
			}
			e.batches = append(e.batches, groups...)
		}
	}
	n := 0
	for _, g := range e.batches {
		for _, xs := range g.members {
			n += len(xs)
		}
	}
	e.metrics.batches.Set(float64(len(e.batches)))
	e.metrics.batchedQueries.Set(float64(n))
	e.pre = nil
}

// prefetch runs the step's batched queries at t: the instant batches of the plan, and the
// range batches of the policies whose history the step loads. A batch Prometheus rejects as bad
// data is not prefetched, so that each policy's own query names its error; any other error is
// the answer of every query of the batch (they are stale, as each would have been).
func (e *Exporter) prefetch(ctx context.Context, t time.Time) {
	p := &prefetched{t: t.UnixMilli(), instant: map[endpointExpr]answer{}, ranges: map[rangeKey]answer{}}
	type job struct {
		g *batchGroup
		r *v1.Range // nil: instant
	}
	var jobs []job
	for _, g := range e.batches {
		jobs = append(jobs, job{g: g})
	}
	for _, rj := range e.historyBatches(t) {
		jobs = append(jobs, job{g: rj.g, r: &rj.r})
	}
	if len(jobs) == 0 {
		e.pre = nil
		return
	}
	var mu sync.Mutex
	work := make(chan job)
	var wg sync.WaitGroup
	for range min(e.workers, len(jobs)) {
		wg.Go(func() {
			for j := range work {
				if j.r == nil {
					ans := e.batchInstant(ctx, j.g, t)
					mu.Lock()
					for x, a := range ans {
						p.instant[endpointExpr{j.g.ep, x}] = a
					}
					mu.Unlock()
					continue
				}
				ans := e.batchRange(ctx, j.g, *j.r)
				mu.Lock()
				for x, a := range ans {
					p.ranges[newRangeKey(j.g.ep, x, *j.r)] = a
				}
				mu.Unlock()
			}
		})
	}
	for _, j := range jobs {
		work <- j
	}
	close(work)
	wg.Wait()
	e.pre = p
}

// batchInstant runs one instant batch and fans its result out (nil: not prefetched).
func (e *Exporter) batchInstant(ctx context.Context, g *batchGroup, t time.Time) map[string]answer {
	ctx, cancel := context.WithTimeout(withEndpoint(ctx, g.ep), e.timeout)
	defer cancel()
	start := time.Now()
	v, _, _, err := e.base.Query(ctx, g.expr, t, v1.WithLookbackDelta(e.lookback))
	e.metrics.queryDuration.WithLabelValues("batch", "instant").Observe(time.Since(start).Seconds())
	out := map[string]answer{}
	if err == nil {
		vec, ok := v.(model.Vector)
		if !ok {
			err = fmt.Errorf("batched query returned a %s, want an instant vector", v.Type())
		} else {
			byKey := map[string]model.Vector{}
			for _, s := range vec {
				k := fanoutKey(func(l string) string { return string(s.Metric[model.LabelName(l)]) }, g.labels)
				if g.aggregated {
					s = &model.Sample{Metric: model.Metric{}, Value: s.Value, Timestamp: s.Timestamp}
				}
				byKey[k] = append(byKey[k], s)
			}
			for k, xs := range g.members {
				vv := byKey[k]
				if vv == nil {
					vv = model.Vector{}
				}
				for _, x := range xs {
					out[x] = answer{v: vv}
				}
			}
			return out
		}
	}
	if isConfigError(err) {
		e.batchFailed(g, err)
		return nil
	}
	for _, xs := range g.members {
		for _, x := range xs {
			out[x] = answer{err: err}
		}
	}
	return out
}

// batchFailed logs a batch that Prometheus rejected; its policies are queried one by one.
func (e *Exporter) batchFailed(g *batchGroup, err error) {
	e.metrics.batchFallbacks.Inc()
	e.log.Debug("batched query rejected; its policies are queried one by one", "query", g.expr, "endpoint", g.endpointName(), "err", err)
}

// endpointName names the batch's endpoint in logs.
func (g *batchGroup) endpointName() string {
	if g.ep == nil {
		return "global.prometheus_url"
	}
	return g.ep.name
}

// rangeBatch is one history batch of a step.
type rangeBatch struct {
	g *batchGroup
	r v1.Range
}

// historyBatches groups the range queries of the policies whose history the step at t loads:
// the same template over the same range.
func (e *Exporter) historyBatches(t time.Time) []rangeBatch {
	if !e.batching {
		return nil
	}
	type rk struct {
		ep         *endpointClient
		start, end int64
		step       time.Duration
	}
	byRange := map[rk][]string{}
	var order []rk
	for _, ps := range e.policies {
		if ps.historyLoaded || ps.failed != nil {
			continue
		}
		start, end, ok := historyRange(t, ps.histStep, ps.cfg.History, e.cfg.Exporter.HistoryLookback)
		if !ok {
			continue
		}
		for q, x := range ps.rangeQueries() {
			if x == "" {
				continue
			}
			k := rk{ps.endpoint(q), start.UnixMilli(), end.UnixMilli(), ps.histStep}
			if _, dup := byRange[k]; !dup {
				order = append(order, k)
			}
			byRange[k] = append(byRange[k], x)
		}
	}
	var out []rangeBatch
	for _, k := range order {
		groups, _ := planBatches(byRange[k], e.templates)
		for _, g := range groups {
			g.ep = k.ep
			out = append(out, rangeBatch{g, v1.Range{Start: time.UnixMilli(k.start), End: time.UnixMilli(k.end), Step: k.step}})
		}
	}
	return out
}

// batchRange runs one history batch, in pages of at most historyPagePoints points, and fans it
// out (nil: not prefetched).
func (e *Exporter) batchRange(ctx context.Context, g *batchGroup, r v1.Range) map[string]answer {
	return e.batchRangePaged(ctx, g, r, historyPagePoints)
}

// batchRangePaged is batchRange with pages of at most pagePoints points (one series per query
// of the batch).
func (e *Exporter) batchRangePaged(ctx context.Context, g *batchGroup, r v1.Range, pagePoints int) map[string]answer {
	n := 0
	for _, xs := range g.members {
		n += len(xs)
	}
	pageSteps := max(pagePoints/max(n, 1), 1)
	series := map[model.Fingerprint]*model.SampleStream{}
	var order []model.Fingerprint
	var err error
	for from := r.Start; !from.After(r.End) && err == nil; from = from.Add(time.Duration(pageSteps) * r.Step) {
		to := from.Add(time.Duration(pageSteps-1) * r.Step)
		if to.After(r.End) {
			to = r.End
		}
		qctx, cancel := context.WithTimeout(withEndpoint(ctx, g.ep), e.timeout)
		start := time.Now()
		var v model.Value
		v, _, _, err = e.base.QueryRange(qctx, g.expr, v1.Range{Start: from, End: to, Step: r.Step})
		cancel()
		e.metrics.queryDuration.WithLabelValues("batch", "range").Observe(time.Since(start).Seconds())
		if err != nil {
			break
		}
		m, ok := v.(model.Matrix)
		if !ok {
			err = fmt.Errorf("batched range query returned a %s, want a matrix", v.Type())
			break
		}
		for _, ss := range m {
			fp := ss.Metric.Fingerprint()
			if s, ok := series[fp]; ok {
				s.Values = append(s.Values, ss.Values...)
				continue
			}
			series[fp] = ss
			order = append(order, fp)
		}
	}
	out := map[string]answer{}
	if err != nil {
		if isConfigError(err) {
			e.batchFailed(g, err)
			return nil
		}
		for _, xs := range g.members {
			for _, x := range xs {
				out[x] = answer{err: err}
			}
		}
		return out
	}
	byKey := map[string]model.Matrix{}
	for _, fp := range order {
		ss := series[fp]
		k := fanoutKey(func(l string) string { return string(ss.Metric[model.LabelName(l)]) }, g.labels)
		byKey[k] = append(byKey[k], ss)
	}
	for k, xs := range g.members {
		m := byKey[k]
		if m == nil {
			m = model.Matrix{}
		}
		for _, x := range xs {
			out[x] = answer{v: m}
		}
	}
	return out
}

// countingQuerier counts the queries sent to Prometheus.
type countingQuerier struct {
	Querier
	e *Exporter
}

func (c countingQuerier) Query(ctx context.Context, expr string, ts time.Time, opts ...v1.Option) (model.Value, v1.Warnings, v1.Infos, error) {
	c.e.metrics.requests.WithLabelValues("instant").Inc()
	return c.Querier.Query(ctx, expr, ts, opts...)
}

func (c countingQuerier) QueryRange(ctx context.Context, expr string, r v1.Range, opts ...v1.Option) (model.Value, v1.Warnings, v1.Infos, error) {
	c.e.metrics.requests.WithLabelValues("range").Inc()
	return c.Querier.QueryRange(ctx, expr, r, opts...)
}
