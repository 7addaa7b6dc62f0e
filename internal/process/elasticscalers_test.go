package process

import (
	"context"
	"testing"

	"github.com/oklog/run"

	"github.com/debi-scaler/debi/elasticscaler"
)

// TestElasticScalersNil: a webhook without global.elastic_scalers has no actors; its decisions
// are reported to nobody and its run group gets nothing.
func TestElasticScalersNil(t *testing.T) {
	var e *ElasticScalers
	e.Observe(elasticscaler.Decision{Policy: "web"})
	var g run.Group
	e.Add(context.Background(), &g)
	if err := g.Run(); err != nil { // an empty group returns at once
		t.Fatalf("Run = %v", err)
	}
}
