package testenv

import (
	"context"
	"fmt"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
)

// EngineQuerier answers the Prometheus HTTP API's instant and range queries with Prometheus's
// own PromQL engine over a storage (unit tests only: integration tests use a real Prometheus),
// in the client's model types, so that code under test sees Prometheus's real semantics. A query
// the engine rejects is a bad-data error, as the HTTP API answers it.
type EngineQuerier struct {
	Engine  *promql.Engine
	Storage storage.Queryable
}

// Query implements the instant query of v1.API.
func (q EngineQuerier) Query(ctx context.Context, expr string, ts time.Time, _ ...v1.Option) (model.Value, v1.Warnings, v1.Infos, error) {
	qry, err := q.Engine.NewInstantQuery(ctx, q.Storage, nil, expr, ts)
	if err != nil {
		return nil, nil, nil, &v1.Error{Type: v1.ErrBadData, Msg: err.Error()}
	}
	defer qry.Close()
	res := qry.Exec(ctx)
	if res.Err != nil {
		return nil, nil, nil, res.Err
	}
	switch v := res.Value.(type) {
	case promql.Vector:
		out := model.Vector{}
		for _, s := range v {
			out = append(out, &model.Sample{Metric: Metric(s.Metric), Value: model.SampleValue(s.F), Timestamp: model.Time(s.T)})
		}
		return out, nil, nil, nil
	case promql.Scalar:
		return &model.Scalar{Value: model.SampleValue(v.V), Timestamp: model.Time(v.T)}, nil, nil, nil
	}
	return nil, nil, nil, fmt.Errorf("engine: %s result", res.Value.Type())
}

// QueryRange implements the range query of v1.API.
func (q EngineQuerier) QueryRange(ctx context.Context, expr string, r v1.Range, _ ...v1.Option) (model.Value, v1.Warnings, v1.Infos, error) {
	qry, err := q.Engine.NewRangeQuery(ctx, q.Storage, nil, expr, r.Start, r.End, r.Step)
	if err != nil {
		return nil, nil, nil, &v1.Error{Type: v1.ErrBadData, Msg: err.Error()}
	}
	defer qry.Close()
	res := qry.Exec(ctx)
	if res.Err != nil {
		return nil, nil, nil, res.Err
	}
	m, err := res.Matrix()
	if err != nil {
		return nil, nil, nil, err
	}
	out := model.Matrix{}
	for _, s := range m {
		ss := &model.SampleStream{Metric: Metric(s.Metric)}
		for _, p := range s.Floats {
			ss.Values = append(ss.Values, model.SamplePair{Timestamp: model.Time(p.T), Value: model.SampleValue(p.F)})
		}
		out = append(out, ss)
	}
	return out, nil, nil, nil
}

// Metric converts a label set to the client's model.
func Metric(ls labels.Labels) model.Metric {
	m := model.Metric{}
	ls.Range(func(l labels.Label) { m[model.LabelName(l.Name)] = model.LabelValue(l.Value) })
	return m
}
