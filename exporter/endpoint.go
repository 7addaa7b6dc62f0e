package exporter

import (
	"context"
	"fmt"
	"reflect"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	commoncfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/internal/promclient"
)

// Metrics on their own endpoints. A metric may send its queries to another Prometheus-compatible
// API than global.prometheus_url (config.Endpoint). The exporter builds one client per distinct
// endpoint (URL and HTTP client settings) when the policy set changes, and keeps it while a
// policy uses it. A query's endpoint travels in its context: the querier under the step's
// (routingQuerier) sends it to that endpoint's client, the batches are planned per endpoint, and
// the prefetched answers are keyed by endpoint and expression.

// endpointClient is the client of one endpoint of the policy set.
type endpointClient struct {
	ep config.Endpoint
	// name is the endpoint as logs and errors name it (its URL without a password).
	name string
	q    Querier
}

// endpointKey is the context key of a query's endpoint.
type endpointKey struct{}

// withEndpoint is ctx whose queries go to ep (nil: global.prometheus_url).
func withEndpoint(ctx context.Context, ep *endpointClient) context.Context {
	if ep == nil && ctx.Value(endpointKey{}) == nil {
		return ctx
	}
	return context.WithValue(ctx, endpointKey{}, ep)
}

// endpointOf is the endpoint of ctx's queries (nil: global.prometheus_url).
func endpointOf(ctx context.Context) *endpointClient {
	ep, _ := ctx.Value(endpointKey{}).(*endpointClient)
	return ep
}

// EndpointQuerier builds the client of an endpoint. NewEndpointQuerier is the default; tests
// replace it.
type EndpointQuerier func(config.Endpoint) (Querier, error)

// NewEndpointQuerier builds the Prometheus client of ep with its own HTTP client settings.
func NewEndpointQuerier(ep config.Endpoint) (Querier, error) {
	hc := commoncfg.DefaultHTTPClientConfig
	if ep.HTTPConfig != nil {
		hc = *ep.HTTPConfig
	}
	client, err := promclient.New(ep.URL, hc)
	if err != nil {
		return nil, err
	}
	return v1.NewAPI(client), nil
}

// routingQuerier sends a query to the client of its context's endpoint, or to q.
type routingQuerier struct{ q Querier }

func (r routingQuerier) pick(ctx context.Context) Querier {
	if ep := endpointOf(ctx); ep != nil {
		return ep.q
	}
	return r.q
}

func (r routingQuerier) Query(ctx context.Context, expr string, ts time.Time, opts ...v1.Option) (model.Value, v1.Warnings, v1.Infos, error) {
	return r.pick(ctx).Query(ctx, expr, ts, opts...)
}

func (r routingQuerier) QueryRange(ctx context.Context, expr string, rg v1.Range, opts ...v1.Option) (model.Value, v1.Warnings, v1.Infos, error) {
	return r.pick(ctx).QueryRange(ctx, expr, rg, opts...)
}

// resolveEndpoints sets each policy's endpoint of every query (ps.endpoints) and keeps the
// clients of the endpoints the policy set uses: an endpoint already in use keeps its client, a
// new one gets one, and those no policy uses any more are dropped. Called with mu held when the
// policy set changes (New, apply), before replan. A client that cannot be built is an error
// naming the policy's endpoint field.
func (e *Exporter) resolveEndpoints(policies []*policyState) error {
	var next []*endpointClient
	find := func(ep *config.Endpoint) (*endpointClient, error) {
		for _, c := range next {
			if reflect.DeepEqual(c.ep, *ep) {
				return c, nil
			}
		}
		var c *endpointClient
		for _, old := range e.endpoints {
			if reflect.DeepEqual(old.ep, *ep) {
				c = old
				break
			}
		}
		if c == nil {
			build := e.newEndpoint
			if build == nil {
				build = NewEndpointQuerier
			}
			q, err := build(*ep)
			if err != nil {
				return nil, err
			}
			c = &endpointClient{ep: *ep, name: ep.String(), q: q}
		}
		next = append(next, c)
		return c, nil
	}
	for _, ps := range policies {
		ps.endpoints = make([]*endpointClient, qRequest+2*len(ps.metrics))
		for i, m := range ps.metrics {
			if m.spec.Endpoint == nil {
				continue
			}
			c, err := find(m.spec.Endpoint)
			if err != nil {
				return fmt.Errorf("%s.%s (policy %q, metric %q): %w", ps.path, m.spec.EndpointPath, ps.cfg.Name, m.spec.Name, err)
			}
			ps.endpoints[qRequest+2*i], ps.endpoints[qDemand+2*i] = c, c
		}
	}
	e.endpoints = next
	return nil
}

// endpoint is the endpoint of query k (nil: global.prometheus_url).
func (ps *policyState) endpoint(k int) *endpointClient {
	if k < len(ps.endpoints) {
		return ps.endpoints[k]
	}
	return nil
}

// queryWhere names query k in errors and logs: its field path relative to the policy, with the
// metric and its endpoint when the metric has its own.
func (ps *policyState) queryWhere(k int) string {
	if ep := ps.endpoint(k); ep != nil {
		i, _ := metricQuery(k)
		return fmt.Sprintf("%s (metric %q, endpoint %s)", ps.queryPath(k), ps.metrics[i].spec.Name, ep.name)
	}
	return ps.queryPath(k)
}

// endpointExpr names a query to prefetch or serve: its endpoint and expression.
type endpointExpr struct {
	ep   *endpointClient
	expr string
}
